package serve

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// Filter scores snippets for a question: P([HELPFUL]) per snippet, in
// snippet order, each in [0, 1]. train/filter exports no such predictor
// (only whole-file evaluation), so the server defines it and T5Filter
// implements it over models/t5.
type Filter interface {
	Predict(ctx context.Context, question string, snippets []string) ([]float64, error)
}

// T5Filter is the RAG² filter (Sohn et al. 2025) served from a checkpoint
// exported by train/filter: each snippet's instruction
// (label.Instruction(snippet, question)) is cut into windows of
// Config.MaxSeqLength tokens sharing Config.DocStride tokens (filter.Windows,
// HF return_overflowing_tokens), every window is scored at the first decoder
// step, P(helpful) = softmax over the [HELPFUL] / [NOT_HELPFUL] logits =
// 1/(1+exp(ℓ_not − ℓ_helpful)), as train/filter's evaluation, and windows
// are aggregated per snippet by Config.Aggregate (max by default).
//
// Windows of concurrent Predict calls are scored together when batching is
// on (see Server): the window is the unit of micro-batching.
type T5Filter struct {
	Model               *t5.Model
	Tokenizer           tokenizer.Tokenizer
	Helpful, NotHelpful int // label token ids
	Config              pipeline.Filter
	// MaxTokens limits the window tokens of one Predict call (0: none);
	// the server sets Options.MaxRequestTokens. Over it, Predict returns a
	// 413 error naming the limit before any model work.
	MaxTokens int

	batcher *Batcher[[]int, float64]
}

// NewT5Filter checks that tok holds both label tokens as single added
// tokens inside the model's vocabulary. Errors name the missing token.
func NewT5Filter(m *t5.Model, tok tokenizer.Tokenizer, cfg pipeline.Filter) (*T5Filter, error) {
	helpful, notHelpful, err := filter.LabelIDs(tok, m.Config.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	return &T5Filter{Model: m, Tokenizer: tok, Helpful: helpful, NotHelpful: notHelpful, Config: cfg}, nil
}

// LoadT5Filter loads a filter directory (HF T5 layout with the label
// tokens) on the named backend.
func LoadT5Filter(dir, backendName string, cfg pipeline.Filter) (*T5Filter, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, err
	}
	m, err := t5.Load(be, dir)
	if err != nil {
		return nil, fmt.Errorf("load filter: %w", err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load filter: %w", err)
	}
	f, err := NewT5Filter(m, tok, cfg)
	if err != nil {
		return nil, fmt.Errorf("load filter %s: %w", dir, err)
	}
	return f, nil
}

// startBatching routes window scoring through a Batcher: micro-batches of
// at most maxBatch windows and maxTokens window tokens.
func (f *T5Filter) startBatching(maxBatch, maxTokens int, wait time.Duration, observe func(int)) {
	f.batcher = NewTokenBatcher(f.ScoreWindows, maxBatch, maxTokens, func(r []int) int { return len(r) }, wait, observe)
}

func (f *T5Filter) stopBatching() {
	if f.batcher != nil {
		f.batcher.Close()
	}
}

// ScoreWindows returns P(helpful) of each window (token ids ending in
// </s>, at most MaxSeqLength long) in one forward pass: rows are
// right-padded to the longest, the batch is padded to a power of two rows
// (so few graph shapes are compiled), and the decoder input is
// decoder_start_token_id alone. Errors: the model's.
func (f *T5Filter) ScoreWindows(rows [][]int) ([]float64, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	L := 0
	for _, r := range rows {
		L = max(L, len(r))
	}
	B := 1
	for B < len(rows) {
		B *= 2
	}
	pad := f.Model.Config.PadTokenID
	ids := make([][]int, B)
	mask := make([][]int, B)
	dec := make([][]int, B)
	for b := range B {
		ids[b] = make([]int, L)
		mask[b] = make([]int, L)
		for j := range ids[b] {
			ids[b][j] = pad
		}
		if b < len(rows) {
			copy(ids[b], rows[b])
			for j := range rows[b] {
				mask[b][j] = 1
			}
		} else {
			mask[b][0] = 1 // a padding row keeps one real key
		}
		dec[b] = []int{f.Model.Config.DecoderStartTokenID}
	}
	_, _, logits, err := f.Model.Forward(ids, mask, dec)
	if err != nil {
		return nil, fmt.Errorf("filter: score %d windows: %w", len(rows), err)
	}
	lg := tensors.MustCopyFlatData[float32](logits) // [B, 1, V]
	V := len(lg) / B
	out := make([]float64, len(rows))
	for b := range rows {
		h, n := float64(lg[b*V+f.Helpful]), float64(lg[b*V+f.NotHelpful])
		out[b] = 1 / (1 + math.Exp(n-h))
	}
	return out, nil
}

// Predict implements Filter. Errors: tokenizer option errors, the model's,
// or ctx's.
func (f *T5Filter) Predict(ctx context.Context, question string, snippets []string) ([]float64, error) {
	if len(snippets) == 0 {
		return nil, nil
	}
	instr := make([]string, len(snippets))
	for i, s := range snippets {
		instr[i] = label.Instruction(s, question)
	}
	wins, err := filter.Windows(f.Tokenizer, instr, f.Config.MaxSeqLength, f.Config.DocStride)
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	rows := make([][]int, len(wins))
	tokens := 0
	for i, w := range wins {
		rows[i] = w.IDs
		tokens += len(w.IDs)
	}
	if f.MaxTokens > 0 && tokens > f.MaxTokens {
		return nil, &requestError{code: 413, msg: fmt.Sprintf("%d snippets make %d filter windows of %d tokens, over the limit of %d tokens per request (max-request-tokens)", len(snippets), len(wins), tokens, f.MaxTokens)}
	}
	var p []float64
	if f.batcher != nil {
		p, err = f.batcher.Do(ctx, rows)
	} else {
		p, err = f.scoreInChunks(ctx, rows)
	}
	if err != nil {
		return nil, err
	}
	out, _, err := filter.Aggregate(wins, p, len(snippets), f.Config.Aggregate)
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	return out, nil
}

// scoreInChunks scores rows without a batcher, 32 windows per model call,
// checking ctx before each.
func (f *T5Filter) scoreInChunks(ctx context.Context, rows [][]int) ([]float64, error) {
	const chunk = 32
	out := make([]float64, 0, len(rows))
	for lo := 0; lo < len(rows); lo += chunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p, err := f.ScoreWindows(rows[lo:min(lo+chunk, len(rows))])
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	return out, nil
}
