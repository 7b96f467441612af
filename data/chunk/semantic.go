package chunk

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strings"

	"github.com/ragforge/ragforge/data"
)

// Embedder embeds texts as documents: one vector [dim] per text, in input
// order. Every ragforge encoder (retrieval/encode.Encoder) satisfies it.
type Embedder interface {
	EncodeDocs(texts []string) ([][]float32, error)
}

// WordLen counts whitespace-separated words (Python len(s.split())): the
// default length of SemanticConfig, a cheap stand-in for tokens.
func WordLen(s string) int {
	n, in := 0, false
	for _, r := range s {
		if isSpace(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}

// SemanticConfig configures SplitSemantic. Sizes are in units of Length.
type SemanticConfig struct {
	// Percentile p in (0, 100]: a breakpoint falls after sentence i when the
	// cosine distance between the embeddings of i and i+1 is strictly
	// greater than the p-th percentile of all consecutive distances
	// (numpy.percentile, linear interpolation). Default 95 (LangChain
	// SemanticChunker breakpoint_threshold_type="percentile").
	Percentile float64
	// BufferSize is how many neighbouring sentences on each side are joined
	// (with " ") to the sentence before embedding, smoothing the distances
	// (LangChain buffer_size). 0 means the default 1; negative means none.
	BufferSize int
	// MinSize is the smallest chunk: a breakpoint is ignored while the chunk
	// it would close is shorter (LangChain min_chunk_size). 0 means the
	// default 128; negative means no minimum.
	MinSize int
	// MaxSize is the largest chunk: a longer one is cut by the recursive
	// splitter (SplitText with Fallback). Default 512 (the BERT/BGE token
	// limit). Must be >= MinSize.
	MaxSize int
	// Length measures text; nil means WordLen. Plug a tokenizer count for
	// true token sizes.
	Length func(string) int
	// Fallback configures the recursive splitter for chunks over MaxSize.
	// A zero Size means {Size: MaxSize, Overlap: 0, Length: Length}.
	Fallback Config
}

// DefaultSemanticConfig returns the defaults: 95th percentile, buffer 1,
// chunks of 128 to 512 words.
func DefaultSemanticConfig() SemanticConfig {
	return SemanticConfig{Percentile: 95, BufferSize: 1, MinSize: 128, MaxSize: 512, Length: WordLen}
}

func (c SemanticConfig) withDefaults() SemanticConfig {
	d := DefaultSemanticConfig()
	if c.Percentile == 0 {
		c.Percentile = d.Percentile
	}
	switch {
	case c.BufferSize == 0:
		c.BufferSize = d.BufferSize
	case c.BufferSize < 0:
		c.BufferSize = 0
	}
	switch {
	case c.MinSize == 0:
		c.MinSize = d.MinSize
	case c.MinSize < 0:
		c.MinSize = 0
	}
	if c.MaxSize == 0 {
		c.MaxSize = d.MaxSize
	}
	if c.Length == nil {
		c.Length = WordLen
	}
	if c.Fallback.Size == 0 {
		c.Fallback = Config{Size: c.MaxSize, Overlap: 0, Length: c.Length}
	}
	if c.Fallback.Length == nil {
		c.Fallback.Length = c.Length
	}
	return c
}

// Validate reports an unusable configuration (after defaults).
func (c SemanticConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Percentile <= 0 || c.Percentile > 100 || math.IsNaN(c.Percentile):
		return fmt.Errorf("semantic chunk config: field %q: must be in (0, 100], got %v", "Percentile", c.Percentile)
	case c.MaxSize < c.MinSize:
		return fmt.Errorf("semantic chunk config: field %q: must be >= MinSize (%d), got %d", "MaxSize", c.MinSize, c.MaxSize)
	}
	if err := c.Fallback.Validate(); err != nil {
		return fmt.Errorf("semantic chunk config: field %q: %w", "Fallback", err)
	}
	return nil
}

// Percentile is numpy.percentile(xs, p) with the default linear
// interpolation: sorted xs, position (n-1)·p/100, interpolated between its
// two neighbours. xs must be non-empty; it is not modified.
func Percentile(xs []float64, p float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := float64(len(s)-1) * p / 100
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[lo] + (s[lo+1]-s[lo])*(pos-float64(lo))
}

// CosineDistance is 1 - a·b / (|a| |b|); 1 when either vector is zero.
func CosineDistance(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 1
	}
	return 1 - dot/math.Sqrt(na*nb)
}

// SemanticStats describes one SplitSemantic call.
type SemanticStats struct {
	Sentences int     // sentences found
	Threshold float64 // distance percentile used (0 with < 2 sentences)
	// Breakpoints counts distances above Threshold; Ignored those skipped
	// because the chunk they would close was under MinSize.
	Breakpoints, Ignored int
	// Fallback counts chunks over MaxSize cut by the recursive splitter.
	Fallback int
}

// SplitSemantic cuts text where the meaning shifts (Kamradt's semantic
// chunking, as LangChain experimental SemanticChunker with
// breakpoint_threshold_type="percentile"):
//
//  1. SplitSentences(text) → sentences s_0..s_{n-1};
//  2. each sentence joined (" ") with BufferSize neighbours on each side is
//     embedded with emb.EncodeDocs (one batch of n texts);
//  3. d_i = CosineDistance(e_i, e_{i+1}), i = 0..n-2;
//  4. a breakpoint follows s_i when d_i > Percentile(d, cfg.Percentile),
//     unless the chunk it would close is shorter than MinSize;
//  5. a chunk longer than MaxSize is cut by SplitText(chunk, Fallback).
//
// Chunks are contiguous byte spans of text from a sentence's start to a
// sentence's end (the whitespace between sentences stays inside, so
// Piece.Text == text[Start:End]). A text of one sentence is one chunk (no
// embedding call). Errors: an invalid config, the embedder's error, a
// vector count or dimension mismatch, a non-finite distance.
func SplitSemantic(text string, emb Embedder, cfg SemanticConfig) ([]Piece, SemanticStats, error) {
	var st SemanticStats
	if err := cfg.Validate(); err != nil {
		return nil, st, err
	}
	cfg = cfg.withDefaults()
	sents := SplitSentences(text)
	st.Sentences = len(sents)
	if len(sents) == 0 {
		return nil, st, nil
	}
	var groups []span
	if len(sents) == 1 {
		groups = []span{{sents[0].Start, sents[0].End}}
	} else {
		dist, err := distances(sents, emb, cfg.BufferSize)
		if err != nil {
			return nil, st, err
		}
		st.Threshold = Percentile(dist, cfg.Percentile)
		start := sents[0].Start
		for i, d := range dist {
			if d <= st.Threshold {
				continue
			}
			st.Breakpoints++
			if cfg.Length(text[start:sents[i].End]) < cfg.MinSize {
				st.Ignored++
				continue
			}
			groups = append(groups, span{start, sents[i].End})
			start = sents[i+1].Start
		}
		groups = append(groups, span{start, sents[len(sents)-1].End})
	}
	var out []Piece
	for _, g := range groups {
		if cfg.Length(text[g.start:g.end]) <= cfg.MaxSize {
			out = append(out, Piece{Text: text[g.start:g.end], Start: g.start, End: g.end})
			continue
		}
		st.Fallback++
		sub, err := SplitText(text[g.start:g.end], cfg.Fallback)
		if err != nil {
			return nil, st, err
		}
		for _, p := range sub {
			out = append(out, Piece{Text: p.Text, Start: g.start + p.Start, End: g.start + p.End})
		}
	}
	return out, st, nil
}

// distances embeds the buffered sentences and returns the n-1 consecutive
// cosine distances.
func distances(sents []Piece, emb Embedder, buffer int) ([]float64, error) {
	texts := make([]string, len(sents))
	for i := range sents {
		lo, hi := max(0, i-buffer), min(len(sents)-1, i+buffer)
		parts := make([]string, 0, hi-lo+1)
		for j := lo; j <= hi; j++ {
			parts = append(parts, sents[j].Text)
		}
		texts[i] = strings.Join(parts, " ")
	}
	vecs, err := emb.EncodeDocs(texts)
	if err != nil {
		return nil, fmt.Errorf("semantic split: embed %d sentences: %w", len(texts), err)
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("semantic split: embedder returned %d vectors for %d sentences", len(vecs), len(texts))
	}
	dist := make([]float64, len(vecs)-1)
	for i := range dist {
		if len(vecs[i]) != len(vecs[i+1]) || len(vecs[i]) == 0 {
			return nil, fmt.Errorf("semantic split: sentence %d: vector dim %d, sentence %d: dim %d", i, len(vecs[i]), i+1, len(vecs[i+1]))
		}
		dist[i] = CosineDistance(vecs[i], vecs[i+1])
		if math.IsNaN(dist[i]) || math.IsInf(dist[i], 0) {
			return nil, fmt.Errorf("semantic split: sentences %d-%d: distance %v", i, i+1, dist[i])
		}
	}
	return dist, nil
}

// SplitSemanticDoc cuts doc with SplitSemantic and makes chunks as Split
// does: Text is the collapsed piece (Collapse), a piece that collapses to ""
// is dropped, ID "<doc.ID>#<i>", Start/End the piece's byte span in
// doc.Text, Meta a shallow copy of doc.Meta. Errors: an empty doc.ID and
// those of SplitSemantic, naming the document.
func SplitSemanticDoc(doc data.Document, emb Embedder, cfg SemanticConfig) ([]data.Chunk, SemanticStats, error) {
	if doc.ID == "" {
		return nil, SemanticStats{}, errors.New("semantic split: document with empty id")
	}
	pieces, st, err := SplitSemantic(doc.Text, emb, cfg)
	if err != nil {
		return nil, st, fmt.Errorf("semantic split %s: %w", doc.ID, err)
	}
	var chunks []data.Chunk
	for _, p := range pieces {
		t := Collapse(p.Text)
		if t == "" {
			continue
		}
		chunks = append(chunks, data.Chunk{
			ID: fmt.Sprintf("%s#%d", doc.ID, len(chunks)), DocID: doc.ID, Index: len(chunks),
			Text: t, Start: p.Start, End: p.End, Meta: maps.Clone(doc.Meta),
		})
	}
	return chunks, st, nil
}
