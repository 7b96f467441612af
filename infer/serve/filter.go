package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/nn"
)

// Filter scores snippets for a question: P([HELPFUL]) per snippet, in
// snippet order, each in [0, 1]. T5Filter implements it over the one RAG²
// filter predictor (models/filter.Predictor); tests put fakes behind it.
type Filter interface {
	Predict(ctx context.Context, question string, snippets []string) ([]float64, error)
}

// T5Filter serves a models/filter.Predictor (the RAG² filter, Sohn et al.
// 2025, as train/filtertrain trains and evaluates it): each snippet's
// instruction is cut into windows of Config.MaxSeqLength tokens sharing
// Config.DocStride, each window is scored at the first decoder step and the
// windows are aggregated per snippet by Config.Aggregate (max by default).
// The server adds what serving needs: the per-request token limit and the
// micro-batcher, for which the window is the unit (see Server).
type T5Filter struct {
	P *filter.Predictor
	// MaxTokens limits the window tokens of one Predict call (0: none);
	// the server sets Options.MaxRequestTokens. Over it, Predict returns a
	// 413 error naming the limit before any model work.
	MaxTokens int

	batcher *Batcher[[]int, float64]
}

// unbatchedWindows is the windows per model call of a T5Filter whose
// server has not started batching.
const unbatchedWindows = 32

// LoadT5Filter loads a filter directory (HF T5 layout with the label
// tokens) on the named backend. Errors name the directory and, for a
// checkpoint without the label tokens, the missing token.
func LoadT5Filter(dir, backendName string, cfg pipeline.Filter) (*T5Filter, error) {
	return LoadT5FilterAs(dir, backendName, cfg, nn.Auto)
}

// LoadT5FilterAs is LoadT5Filter holding the weights as dt (nn.DType).
func LoadT5FilterAs(dir, backendName string, cfg pipeline.Filter, dt nn.DType) (*T5Filter, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, err
	}
	p, err := filter.LoadAs(be, dir, filter.Config{Windowing: cfg.Windowing, BatchSize: unbatchedWindows}, dt)
	if err != nil {
		return nil, err
	}
	return &T5Filter{P: p}, nil
}

// startBatching routes window scoring through a Batcher: micro-batches of
// at most maxBatch windows and maxTokens window tokens, each one
// Predictor.ScoreWindows call.
func (f *T5Filter) startBatching(maxBatch, maxTokens int, wait time.Duration, observe func(int)) {
	f.batcher = NewTokenBatcher(f.P.ScoreWindows, maxBatch, maxTokens, func(r []int) int { return len(r) }, wait, observe)
}

func (f *T5Filter) stopBatching() {
	if f.batcher != nil {
		f.batcher.Close()
	}
}

// Predict implements Filter. Errors: tokenizer option errors, the 413 of
// MaxTokens, the model's, or ctx's.
func (f *T5Filter) Predict(ctx context.Context, question string, snippets []string) ([]float64, error) {
	return f.P.PredictPairs(ctx, question, snippets, func(ctx context.Context, rows [][]int) ([]float64, error) {
		tokens := 0
		for _, r := range rows {
			tokens += len(r)
		}
		if f.MaxTokens > 0 && tokens > f.MaxTokens {
			return nil, &requestError{code: 413, msg: fmt.Sprintf("%d snippets make %d filter windows of %d tokens, over the limit of %d tokens per request (max-request-tokens)", len(snippets), len(rows), tokens, f.MaxTokens)}
		}
		if f.batcher != nil {
			return f.batcher.Do(ctx, rows)
		}
		return f.P.ScoreRows(ctx, rows, nil)
	})
}
