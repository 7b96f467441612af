package decoder

import (
	"fmt"
	"slices"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/ragforge/ragforge/models/backend"
)

// Qwen25HalfBConfig is the shape of Qwen/Qwen2.5-0.5B(-Instruct) as its HF
// config.json gives it: hidden 896, 24 layers, 14 heads / 2 kv heads
// (head_dim 64), intermediate 4864, vocab 151936, tied embeddings,
// rope_theta 1e6, rms_norm_eps 1e-6, 32768 positions (494M parameters).
func Qwen25HalfBConfig() Config {
	c := qwen2Defaults()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 151936, 896, 4864, 24
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 14, 2, 64
	c.TieWordEmbeddings, c.RopeTheta, c.MaxPositionEmbeddings = true, 1e6, 32768
	c.BOSTokenID, c.EOSTokenIDs = 151643, []int{151643}
	c.DType = dtypes.Float32
	return c
}

// BenchResult is one decoder benchmark (times in milliseconds).
type BenchResult struct {
	Parameters int64   `json:"parameters"`
	Pairs      int     `json:"pairs"`        // (prompt, continuation) pairs per perplexity call
	PromptLen  int     `json:"prompt_len"`   // tokens
	ContLen    int     `json:"continuation"` // tokens
	Steps      int     `json:"steps"`        // timed perplexity calls
	InitMs     float64 `json:"init_ms"`      // random initialisation at the real shape
	// CompileMs is the first perplexity call (compile + run).
	CompileMs          float64 `json:"compile_ms"`
	PerplexityMsMin    float64 `json:"perplexity_ms_min"`
	PerplexityMsMedian float64 `json:"perplexity_ms_median"`
	// TokensPerSec counts every prompt and continuation token of a call, at the median.
	TokensPerSec float64 `json:"tokens_per_sec"`
	// NewTokens greedy tokens per pair after the prompt (KV cache);
	// GenerateMs is the whole first call (prefill and step compiles
	// included), MsPerStep the mean of the cached steps after the first
	// (one token for every pair).
	NewTokens  int     `json:"new_tokens"`
	GenerateMs float64 `json:"generate_ms"`
	MsPerStep  float64 `json:"ms_per_step"`
}

// Bench times ContinuationLogProbs on pairs random (prompt, continuation)
// pairs of promptLen + contLen tokens (one batch) at cfg's shape with
// random weights, steps times after a compile call, then one greedy
// Generate of newTokens tokens (0 skips it) on the prompts. For `ragforge
// bench models`.
func Bench(backendName string, cfg Config, pairs, promptLen, contLen, newTokens, steps int) (BenchResult, error) {
	if pairs < 1 || promptLen < 1 || contLen < 1 || steps < 1 || newTokens < 0 {
		return BenchResult{}, fmt.Errorf("decoder bench: pairs %d, prompt %d, continuation %d, steps %d must be ≥ 1 and new tokens %d ≥ 0",
			pairs, promptLen, contLen, steps, newTokens)
	}
	be, err := backend.New(backendName)
	if err != nil {
		return BenchResult{}, err
	}
	res := BenchResult{Parameters: cfg.Parameters(), Pairs: pairs, PromptLen: promptLen, ContLen: contLen, Steps: steps, NewTokens: newTokens}
	t0 := time.Now()
	m, err := NewRandom(be, cfg, 1)
	if err != nil {
		return res, err
	}
	res.InitMs = ms(time.Since(t0))
	ps := make([]Pair, pairs)
	prompts := make([][]int, pairs)
	for i := range ps {
		ps[i].Prompt = make([]int, promptLen)
		ps[i].Continuation = make([]int, contLen)
		for j := range ps[i].Prompt {
			ps[i].Prompt[j] = (7919*i + 104729*j) % cfg.VocabSize
		}
		for j := range ps[i].Continuation {
			ps[i].Continuation[j] = (15485863*i + 32452843*j + 1) % cfg.VocabSize
		}
		prompts[i] = ps[i].Prompt
	}
	t0 = time.Now()
	if _, err := m.ContinuationLogProbs(ps); err != nil {
		return res, err
	}
	res.CompileMs = ms(time.Since(t0))
	var times []float64
	for range steps {
		t0 = time.Now()
		if _, err := m.ContinuationLogProbs(ps); err != nil {
			return res, err
		}
		times = append(times, ms(time.Since(t0)))
	}
	slices.Sort(times)
	res.PerplexityMsMin, res.PerplexityMsMedian = times[0], times[len(times)/2]
	res.TokensPerSec = float64(pairs*(promptLen+contLen)) / (res.PerplexityMsMedian / 1000)
	if newTokens > 0 {
		var last time.Time
		var stepMs []float64
		opt := GenerateOptions{MaxNewTokens: newTokens, Step: func(t int, _ []int) error {
			now := time.Now()
			if t > 1 { // step 1 compiles the step graph
				stepMs = append(stepMs, ms(now.Sub(last)))
			}
			last = now
			return nil
		}}
		t0 = time.Now()
		if _, err := m.Generate(prompts, opt); err != nil {
			return res, err
		}
		res.GenerateMs = ms(time.Since(t0))
		if len(stepMs) > 0 {
			sum := 0.0
			for _, x := range stepMs {
				sum += x
			}
			res.MsPerStep = sum / float64(len(stepMs))
		}
	}
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
