package retriever

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/train/trainer"
)

// BenchShape is one `bench models` retriever configuration: an InfoNCE
// update of Queries × (1 positive + Negatives hard negatives) texts of
// Length tokens (no hypothetical documents), with GradCache passes of
// SubBatchTokens, then encoding EncodeBatch passages of EncodeLength tokens.
type BenchShape struct {
	Queries, Negatives, Length int
	SubBatchTokens             int // 0: DefaultSubBatchTokens
	EncodeBatch, EncodeLength  int
	SkipTrain                  bool // encode throughput only
	// EncodeDType holds the weights for encoding (float32, bfloat16 or
	// float16; 0 = float32): from the random init with SkipTrain, else
	// cast after the float32 training step.
	EncodeDType           dtypes.DType
	SkipEncode            bool // training step only (EncodeBatch, EncodeLength unused)
	GradientCheckpointing bool // per-block recomputation in the training step
}

// BenchResult is the speed of BenchTrainStep; compilation (the first call
// of each executable) is timed apart and excluded from the rates.
type BenchResult struct {
	Steps                int     `json:"steps"`
	CompileMs            float64 `json:"compile_ms"`              // first update (compile + run) and first encode call
	MsPerStepMin         float64 `json:"ms_per_step_min"`         // fastest timed update; 0 with SkipTrain
	MsPerStepMedian      float64 `json:"ms_per_step_median"`      // median timed update
	TrainTokensPerSec    float64 `json:"train_tokens_per_sec"`    // padded tokens of every text of an update per second
	EncodePassagesPerSec float64 `json:"encode_passages_per_sec"` // Embed (CLS, normalised) passages per second
	Queries              int     `json:"queries"`
	Negatives            int     `json:"negatives"`
	Length               int     `json:"length"`
	EncodeLength         int     `json:"encode_length"`
	EncodeDType          string  `json:"encode_dtype"`        // dtype the weights are held in while encoding
	EncodeWeightBytes    int64   `json:"encode_weight_bytes"` // bytes those weights hold
}

// BenchTrainStep measures a randomly initialised BERT-family encoder of
// config cfg and architecture a on the backend backendName (models/backend.New):
// one warm-up update compiles, then steps InfoNCE updates (GradCache, AdamW)
// are timed, then one warm-up and steps Embed calls. Token ids are random
// and never the pad id (XLM-R counts positions from it). Errors: invalid
// sizes or config, compute failures.
func BenchTrainStep(backendName string, cfg bert.Config, a bert.Arch, s BenchShape, steps int) (BenchResult, error) {
	if s.SkipEncode {
		s.EncodeBatch, s.EncodeLength = 1, 2
	}
	if s.Queries < 1 || s.Negatives < 0 || s.Length < 2 || s.EncodeBatch < 1 || s.EncodeLength < 2 || steps < 1 {
		return BenchResult{}, fmt.Errorf("bench retriever: queries %d, negatives %d, length %d, encode %d×%d, steps %d out of range",
			s.Queries, s.Negatives, s.Length, s.EncodeBatch, s.EncodeLength, steps)
	}
	be, err := backend.New(backendName)
	if err != nil {
		return BenchResult{}, err
	}
	held := s.EncodeDType
	if held == dtypes.InvalidDType {
		held = dtypes.Float32
	}
	initAs := dtypes.Float32 // the training step updates float32 master weights
	if s.SkipTrain {
		initAs = held
	}
	m, err := bert.NewRandomAs(be, cfg, a, false, 1, initAs)
	if err != nil {
		return BenchResult{}, err
	}
	m.GradientCheckpointing = s.GradientCheckpointing
	if s.Length > m.MaxLength() || s.EncodeLength > m.MaxLength() {
		return BenchResult{}, fmt.Errorf("bench retriever: length %d or %d exceeds the model's %d", s.Length, s.EncodeLength, m.MaxLength())
	}
	rng := rand.New(rand.NewPCG(7, 7))
	text := func(n int) []int {
		ids := make([]int, n)
		for i := range ids {
			for ids[i] = rng.IntN(cfg.VocabSize); ids[i] == cfg.PadTokenID; ids[i] = rng.IntN(cfg.VocabSize) {
			}
		}
		return ids
	}
	res := BenchResult{Steps: steps, Queries: s.Queries, Negatives: s.Negatives, Length: s.Length, EncodeLength: s.EncodeLength}
	var compile time.Duration
	if !s.SkipTrain {
		rc := DefaultConfig()
		rc.BatchSize, rc.NumNegatives, rc.NumHypo, rc.MaxLength = s.Queries, s.Negatives, 0, s.Length
		if s.SubBatchTokens > 0 {
			rc.SubBatchTokens = s.SubBatchTokens
		}
		tk := &tokenized{empty: text(2), hypo: make([][][]int, s.Queries), negs: make([][][]int, s.Queries)}
		triplets := make([]Triplet, s.Queries)
		for i := range triplets {
			triplets[i] = Triplet{Query: fmt.Sprint("q", i), Pos: fmt.Sprint("p", i)}
			tk.q, tk.pos = append(tk.q, text(s.Length)), append(tk.pos, text(s.Length))
			for k := range s.Negatives {
				triplets[i].Negs = append(triplets[i].Negs, fmt.Sprint("n", i, ".", k))
				tk.negs[i] = append(tk.negs[i], text(s.Length))
			}
		}
		gc, err := newGradCache(be, m, rc, tk, s.Negatives, 0, s.Length)
		if err != nil {
			return BenchResult{}, err
		}
		tr, err := trainer.New(be, m.Ctx, gc.surrogate, rc.optim(steps+1))
		if err != nil {
			return BenchResult{}, err
		}
		if err := m.Ctx.SetRNGStateFromSeed(1); err != nil {
			return BenchResult{}, err
		}
		micro := [][]int{make([]int, s.Queries)}
		for i := range micro[0] {
			micro[0][i] = i
		}
		t0 := time.Now()
		if _, err := gc.update(tr, triplets, micro); err != nil {
			return BenchResult{}, fmt.Errorf("bench retriever: first update: %w", err)
		}
		compile = time.Since(t0)
		perStep := make([]float64, steps)
		var total float64
		for i := range steps {
			t := time.Now()
			if _, err := gc.update(tr, triplets, micro); err != nil {
				return BenchResult{}, fmt.Errorf("bench retriever: update %d: %w", i+1, err)
			}
			perStep[i] = time.Since(t).Seconds()
			total += perStep[i]
		}
		slices.Sort(perStep)
		res.MsPerStepMin, res.MsPerStepMedian = 1e3*perStep[0], 1e3*trainer.Median(perStep)
		res.TrainTokensPerSec = float64(s.Queries*(2+s.Negatives)*s.Length*steps) / total
	}
	if s.SkipEncode {
		res.CompileMs = float64(compile.Microseconds()) / 1e3
		return res, nil
	}
	if err := nn.CastVariables(m.Weights(), held); err != nil {
		return BenchResult{}, fmt.Errorf("bench retriever: %w", err)
	}
	res.EncodeDType = strings.ToLower(held.String()) // HF's torch_dtype names: float32, bfloat16, float16
	for _, b := range nn.HeldBytes(m.Weights()) {
		res.EncodeWeightBytes += b
	}
	rows := make([][]int, s.EncodeBatch)
	for i := range rows {
		rows[i] = text(s.EncodeLength)
	}
	t0 := time.Now()
	if _, err := m.Embed(rows, nil, bert.PoolCLS, true); err != nil {
		return BenchResult{}, fmt.Errorf("bench retriever: first encode: %w", err)
	}
	res.CompileMs = float64((compile + time.Since(t0)).Microseconds()) / 1e3
	t0 = time.Now()
	for range steps {
		if _, err := m.Embed(rows, nil, bert.PoolCLS, true); err != nil {
			return BenchResult{}, fmt.Errorf("bench retriever: encode: %w", err)
		}
	}
	res.EncodePassagesPerSec = float64(s.EncodeBatch*steps) / time.Since(t0).Seconds()
	return res, nil
}
