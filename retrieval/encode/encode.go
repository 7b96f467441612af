// Package encode turns texts into dense vectors for retrieval: the Encoder
// interface, a BERT bi-encoder (BGE / MedEmbed / MedCPT conventions) with
// length-bucketed batching and its loader (LoadBERT), and corpus encoding.
// Searching is retrieval/search's.
//
// Vectors are float32 [dim]. With Normalize (the BGE / MedEmbed convention)
// they have unit L2 norm, so a FAISS inner-product index scores by cosine
// similarity.
package encode

import (
	"errors"
	"fmt"
	"sort"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// Encoder embeds queries and documents. Both methods return one vector
// [Dim()] per text, in input order. Queries and documents are separate
// because asymmetric models encode them differently (BGE's query
// instruction, MedCPT's two towers).
type Encoder interface {
	EncodeQueries(texts []string) ([][]float32, error)
	EncodeDocs(texts []string) ([][]float32, error)
	Dim() int
	Name() string
}

// Progress is told how many of the distinct texts of the current call are encoded so
// far (done ≤ total). It is called from the encoding goroutine.
type Progress func(done, total int)

// BGEQueryInstruction is the instruction BGE v1.5 English models prepend to
// short queries for passage retrieval (FlagEmbedding
// query_instruction_for_retrieval). Documents get no instruction.
const BGEQueryInstruction = "Represent this sentence for searching relevant passages: "

// BERTEncoder is a bi-encoder over a bert.Model: tokenize (WordPiece, [CLS]
// text [SEP], truncated to MaxLength tokens), run the encoder, pool
// (Pooling), optionally L2-normalise.
//
// Batching: identical texts of one call are encoded once; the texts are
// tokenized, sorted by token length (longest first) and cut into batches
// run through bert.Model.Embed, which pads each batch to a (BucketBatch,
// BucketLength) shape and compiles one graph per bucket. A batch starting
// at a text of bucket length L holds R(L) texts: the largest power of two
// ≤ min(BatchSize, MaxBatchTokens / L) (at least 1), so long texts go in
// small batches with little padding; the last batch of a call is filled
// with [CLS][SEP] rows to R(L), R(L)/2 or R(L)/4 rows, so a bucket length
// has at most three shapes and a corpus costs a handful of compilations.
// Results are returned in input order and do not depend on the batching
// beyond float rounding.
//
// Use NewBERTEncoder for the defaults; the zero values of Pooling, MaxLength
// and BatchSize are replaced by those defaults at encoding time.
type BERTEncoder struct {
	Model     *bert.Model
	Tokenizer tokenizer.Tokenizer
	// Pooling is bert.PoolCLS for BGE / MedCPT (default) and bert.PoolMean
	// for sentence-transformers mean-pooled models.
	Pooling bert.Pooling
	// Normalize divides each vector by its L2 norm (BGE, MedEmbed: cosine =
	// inner product). Default true.
	Normalize bool
	// QueryInstruction is prepended to every query text (not to documents),
	// e.g. BGEQueryInstruction; empty by default.
	QueryInstruction string
	// DocInstruction is prepended to every document text (E5's "passage: ");
	// empty by default (BGE documents get none).
	DocInstruction string
	// MaxLength is the token limit including [CLS] and [SEP] (512 by
	// default, the BERT / BGE limit), clamped to max_position_embeddings.
	MaxLength int
	// BatchSize is the largest number of texts per forward pass (default
	// 32).
	BatchSize int
	// MaxBatchTokens bounds a forward pass's padded tokens (rows × bucket
	// length; default 4096), see Batching.
	MaxBatchTokens int
	// ModelName is what Name returns ("bert" when empty).
	ModelName string
	// Progress, when set, is called after every batch.
	Progress Progress
}

// Defaults of BERTEncoder.
const (
	DefaultMaxLength = 512
	DefaultBatchSize = 32
	// DefaultMaxBatchTokens is BERTEncoder.MaxBatchTokens's default.
	DefaultMaxBatchTokens = 4096
)

// NewBERTEncoder returns an encoder with the BGE defaults: CLS pooling,
// normalisation, no query instruction, MaxLength 512, BatchSize 32.
func NewBERTEncoder(m *bert.Model, tok tokenizer.Tokenizer, name string) *BERTEncoder {
	return &BERTEncoder{
		Model: m, Tokenizer: tok, Pooling: bert.PoolCLS, Normalize: true,
		MaxLength: DefaultMaxLength, BatchSize: DefaultBatchSize, ModelName: name,
	}
}

// Dim is the model's hidden size.
func (e *BERTEncoder) Dim() int { return e.Model.Config.HiddenSize }

// Name is ModelName, or "bert".
func (e *BERTEncoder) Name() string {
	if e.ModelName == "" {
		return "bert"
	}
	return e.ModelName
}

// EncodeQueries embeds QueryInstruction+text for each text.
func (e *BERTEncoder) EncodeQueries(texts []string) ([][]float32, error) {
	return e.encode("queries", prefixed(e.QueryInstruction, texts))
}

// EncodeDocs embeds DocInstruction+text for each text.
func (e *BERTEncoder) EncodeDocs(texts []string) ([][]float32, error) {
	return e.encode("docs", prefixed(e.DocInstruction, texts))
}

func prefixed(prefix string, texts []string) []string {
	if prefix == "" {
		return texts
	}
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = prefix + t
	}
	return out
}

// MaxTokens is the effective token limit: MaxLength (default 512) clamped
// to the model's max_position_embeddings.
func (e *BERTEncoder) MaxTokens() int {
	l := e.MaxLength
	if l <= 0 {
		l = DefaultMaxLength
	}
	return min(l, e.Model.MaxLength())
}

// Tokenize returns the truncated [CLS] text [SEP] ids of each text
// (MaxTokens tokens at most), as the encoder feeds them to the model.
func (e *BERTEncoder) Tokenize(texts []string) ([][]int, error) {
	encs, err := tokenizer.EncodeBatchErr(e.Tokenizer, texts, tokenizer.EncodeOptions{
		MaxLength: e.MaxTokens(), Truncation: true,
	})
	if err != nil {
		return nil, err
	}
	ids := make([][]int, len(encs))
	for i, enc := range encs {
		ids[i] = enc.IDs
	}
	return ids, nil
}

func (e *BERTEncoder) encode(what string, texts []string) ([][]float32, error) {
	if e.Model == nil || e.Tokenizer == nil {
		return nil, errors.New("encode " + what + ": BERTEncoder needs Model and Tokenizer")
	}
	pool := e.Pooling
	if pool == "" {
		pool = bert.PoolCLS
	}
	bs := e.BatchSize
	if bs <= 0 {
		bs = DefaultBatchSize
	}
	// Identical texts are encoded once (inference has no randomness, so
	// their vectors are the same); uniq holds the first occurrence of each.
	first := make(map[string]int, len(texts))
	dup := make([]int, len(texts)) // index of the first occurrence
	var uniq []string
	var uniqAt []int
	for i, t := range texts {
		if j, ok := first[t]; ok {
			dup[i] = j
			continue
		}
		first[t], dup[i] = i, i
		uniq, uniqAt = append(uniq, t), append(uniqAt, i)
	}
	ids, err := e.Tokenize(uniq)
	if err != nil {
		return nil, fmt.Errorf("encode %s: tokenize: %w", what, err)
	}
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(ids[order[a]]) > len(ids[order[b]]) })
	budget := e.MaxBatchTokens
	if budget <= 0 {
		budget = DefaultMaxBatchTokens
	}
	var filler []int // [CLS][SEP], tokenized on first use
	out := make([][]float32, len(texts))
	for start := 0; start < len(order); {
		rows := floorPow2(max(1, min(bs, budget/bert.BucketLength(len(ids[order[start]]), e.MaxTokens()))))
		idx := order[start:min(start+rows, len(order))]
		for k := 0; k < 2 && rows > 1 && len(idx) <= rows/2; k++ {
			rows /= 2
		}
		batch := make([][]int, len(idx), rows)
		for j, i := range idx {
			batch[j] = ids[i]
		}
		if len(batch) < rows && filler == nil {
			f, err := e.Tokenize([]string{""})
			if err != nil {
				return nil, fmt.Errorf("encode %s: tokenize filler: %w", what, err)
			}
			filler = f[0]
		}
		for len(batch) < rows {
			batch = append(batch, filler)
		}
		vecs, err := e.Model.Embed(batch, nil, pool, e.Normalize)
		if err != nil {
			return nil, fmt.Errorf("encode %s: texts %d..%d of %d (by length, duplicates removed): %w", what, start, start+len(idx)-1, len(uniq), err)
		}
		for j, i := range idx {
			out[uniqAt[i]] = vecs[j]
		}
		start += len(idx)
		if e.Progress != nil {
			e.Progress(start, len(uniq))
		}
	}
	for i, j := range dup {
		if j != i {
			out[i] = append([]float32(nil), out[j]...)
		}
	}
	return out, nil
}

// floorPow2 is the largest power of two ≤ n (n ≥ 1).
func floorPow2(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}
