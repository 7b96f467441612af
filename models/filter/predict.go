package filter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// Config sets how a Predictor cuts, scores and combines windows. RAG²'s
// classifier/run_classifier.py uses max_seq_length 512, doc_stride 128 and
// per_device_eval_batch_size 16; callers (train/filtertrain.DefaultConfig, the
// serving manifest) fill and validate these, the Predictor only checks them.
type Config struct {
	Windowing     // windows and their aggregation
	BatchSize int // windows per model call in ScoreRows, ≥ 1
}

// Check returns an error naming the first field that makes no sense.
func (c Config) Check() error {
	if c.BatchSize < 1 {
		return fmt.Errorf("filter config: batch size %d, want ≥ 1", c.BatchSize)
	}
	if err := c.Windowing.Check(); err != nil {
		return fmt.Errorf("filter config: %w", err)
	}
	return nil
}

// ErrNotFilter reports a checkpoint without the two label tokens.
var ErrNotFilter = errors.New("not a RAG² filter checkpoint")

// Predictor is the RAG² filter at inference: a T5 whose tokenizer holds the
// label tokens, scoring an instruction by P([HELPFUL]) at the first decoder
// step. It is safe for concurrent use; the model's variables are read at
// every call, so a Predictor over a model in training scores its current
// weights.
type Predictor struct {
	Model               *t5.Model
	Tokenizer           tokenizer.Tokenizer
	Helpful, NotHelpful int // label token ids
	Config              Config
	// Marks, from the checkpoint's config.json (MatchMarksKey), are written
	// into every instruction's evidence before tokenizing; nil: none.
	Marks *MatchMarks
	// Calibration, from the checkpoint's config.json (CalibrationKey),
	// maps Predict's aggregated P([HELPFUL]) to the calibrated one; nil:
	// none. ScoreRows and ScoreWindows stay the T5's own.
	Calibration *Calibration

	mu    sync.Mutex
	score *mlctx.Exec // first-step label logits, compiled per shape
}

// NewPredictor checks cfg and that tok holds both label tokens as single
// added tokens inside m's vocabulary (LabelIDs, whose errors wrap
// ErrNotFilter), and reads the match marks and the calibration m's config
// carries (MatchMarksOf, CalibrationOf).
func NewPredictor(m *t5.Model, tok tokenizer.Tokenizer, cfg Config) (*Predictor, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	helpful, notHelpful, err := LabelIDs(tok, m.Config.VocabSize)
	if err != nil {
		return nil, err
	}
	marks, err := MatchMarksOf(m.Config.Extra(MatchMarksKey))
	if err != nil {
		return nil, err
	}
	cal, err := CalibrationOf(m.Config.Extra(CalibrationKey))
	if err != nil {
		return nil, err
	}
	return &Predictor{Model: m, Tokenizer: tok, Helpful: helpful, NotHelpful: notHelpful, Config: cfg, Marks: marks, Calibration: cal}, nil
}

// Load reads a filter checkpoint (HF T5 layout with the label tokens in its
// tokenizer) from dir on be. The label tokens are checked against
// config.json before the weights are read. Errors name dir; a checkpoint
// without the label tokens wraps ErrNotFilter.
//
// The filter only scores, so its weights are held as stored (nn.Auto: a
// BF16 checkpoint stays bfloat16); LoadAs chooses.
func Load(be backends.Backend, dir string, cfg Config) (*Predictor, error) {
	return LoadAs(be, dir, cfg, nn.Auto)
}

// LoadAs is Load holding the T5's weights as dt (t5.LoadAs).
func LoadAs(be backends.Backend, dir string, cfg Config, dt nn.DType) (*Predictor, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if err := dt.CheckOn(be); err != nil {
		return nil, fmt.Errorf("load filter %s: %w", dir, err)
	}
	mc, err := t5.LoadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("load filter %s: %w", dir, err)
	}
	// Ids past vocab_size would have no embedding row (another model's
	// tokenizer beside these weights).
	tok, err := tokenizer.LoadFor(dir, mc.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("load filter %s: %w", dir, err)
	}
	if _, _, err := LabelIDs(tok, mc.VocabSize); err != nil {
		return nil, fmt.Errorf("load filter %s: %w", dir, err)
	}
	m, err := t5.LoadAs(be, dir, dt)
	if err != nil {
		return nil, fmt.Errorf("load filter %s: %w", dir, err)
	}
	p, err := NewPredictor(m, tok, cfg)
	if err != nil {
		return nil, fmt.Errorf("load filter %s: %w", dir, err)
	}
	return p, nil
}

// Windows cuts instructions into windows of Config.MaxSeqLength tokens
// sharing Config.DocStride (see Windows), after marking their evidence
// when the checkpoint carries Marks. Errors: with Marks, an instruction
// that is not RAG²'s, as an *InstructionError.
func (p *Predictor) Windows(instructions []string) ([]Window, error) {
	if p.Marks != nil {
		marked := make([]string, len(instructions))
		for i, s := range instructions {
			var err error
			if marked[i], err = p.Marks.Mark(s); err != nil {
				return nil, &InstructionError{Index: i, Err: err}
			}
		}
		instructions = marked
	}
	return Windows(p.Tokenizer, instructions, p.Config.MaxSeqLength, p.Config.DocStride)
}

// InstructionError is an instruction Predictor.Windows could not read;
// Index is its position (0-based) in the slice given.
type InstructionError struct {
	Index int
	Err   error
}

func (e *InstructionError) Error() string { return fmt.Sprintf("instruction %d: %v", e.Index+1, e.Err) }
func (e *InstructionError) Unwrap() error { return e.Err }

// ScoreFunc scores window rows (token ids ending in </s>): P(helpful) per
// row, in row order. Predictor.ScoreRows is one; a server puts its
// micro-batcher in front of Predictor.ScoreWindows.
type ScoreFunc func(ctx context.Context, rows [][]int) ([]float64, error)

// Predict returns P(helpful) of each instruction, aggregated over its
// windows by Config.Aggregate and then calibrated when the checkpoint
// carries a Calibration, and the number of windows of each. score nil
// is ScoreRows without progress. Errors of score come back as they are (so
// ctx's and a caller's typed errors pass through); tokenizer errors are
// wrapped.
func (p *Predictor) Predict(ctx context.Context, instructions []string, score ScoreFunc) (probs []float64, windows []int, err error) {
	if len(instructions) == 0 {
		return nil, nil, nil
	}
	wins, err := p.Windows(instructions)
	if err != nil {
		return nil, nil, fmt.Errorf("filter: %w", err)
	}
	rows := make([][]int, len(wins))
	for i, w := range wins {
		rows[i] = w.IDs
	}
	if score == nil {
		score = func(ctx context.Context, rows [][]int) ([]float64, error) { return p.ScoreRows(ctx, rows, nil) }
	}
	pw, err := score(ctx, rows)
	if err != nil {
		return nil, nil, err
	}
	probs, windows, err = Aggregate(wins, pw, len(instructions), p.Config.Aggregate)
	if err != nil {
		return nil, nil, fmt.Errorf("filter: %w", err)
	}
	if p.Calibration != nil {
		for i, s := range instructions {
			if probs[i], err = p.Calibration.Apply(probs[i], s); err != nil {
				return nil, nil, fmt.Errorf("filter: %w", &InstructionError{Index: i, Err: err})
			}
		}
	}
	return probs, windows, nil
}

// PredictPairs is Predict over (question, snippet) pairs: the instruction of
// snippet i is Instruction(snippets[i], question).
func (p *Predictor) PredictPairs(ctx context.Context, question string, snippets []string, score ScoreFunc) ([]float64, error) {
	instr := make([]string, len(snippets))
	for i, s := range snippets {
		instr[i] = Instruction(s, question)
	}
	probs, _, err := p.Predict(ctx, instr, score)
	return probs, err
}

// LabelOf is the class of probability prob at threshold: Helpful when
// prob ≥ threshold (RAG² uses 0.5), else NotHelpful.
func LabelOf(prob, threshold float64) string {
	if prob >= threshold {
		return Helpful
	}
	return NotHelpful
}

// ScoreRows returns P(helpful) of each row in input order. Rows are scored
// Config.BatchSize at a time in order of length (so padding buckets stay
// small), each call padded to BatchSize rows (one graph per length bucket);
// ctx is checked before each call, and progress (may be nil) gets the rows
// done after it. Errors: ctx's, the model's.
func (p *Predictor) ScoreRows(ctx context.Context, rows [][]int, progress func(done, total int)) ([]float64, error) {
	batch := p.Config.BatchSize
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(rows[order[a]]) < len(rows[order[b]]) })
	out := make([]float64, len(rows))
	for s := 0; s < len(order); s += batch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		idx := order[s:min(s+batch, len(order))]
		ids := make([][]int, len(idx))
		for k, i := range idx {
			ids[k] = rows[i]
		}
		got, err := p.scoreBatch(ids, batch)
		if err != nil {
			return nil, err
		}
		for k, i := range idx {
			out[i] = got[k]
		}
		if progress != nil {
			progress(min(s+batch, len(order)), len(order))
		}
	}
	return out, nil
}

// ScoreWindows returns P(helpful) of each row in one model call, the batch
// padded to a power of two rows (so few graph shapes are compiled): the unit
// of a server's micro-batches. Errors: the model's.
func (p *Predictor) ScoreWindows(rows [][]int) ([]float64, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	B := 1
	for B < len(rows) {
		B *= 2
	}
	return p.scoreBatch(rows, B)
}

// scoreBatch scores rows (≤ padRows of them) in one call of the scoring
// executable on a [padRows, t5.PadLen(longest)] batch: P(helpful) is the
// softmax over the two label-token logits at the first decoder step
// (decoder input = decoder_start_token_id), 1/(1+exp(ℓ_not − ℓ_helpful)).
func (p *Predictor) scoreBatch(rows [][]int, padRows int) ([]float64, error) {
	e, err := p.Compile()
	if err != nil {
		return nil, err
	}
	idT, maskT := EncoderBatch(rows, padRows, p.Model.Config.PadTokenID)
	var res []*tensors.Tensor
	var xerr error
	if err := catch.Do(func() { res, xerr = e.Exec(idT, maskT) }); err != nil {
		return nil, fmt.Errorf("filter: score %d windows: %w", len(rows), err)
	}
	if xerr != nil {
		return nil, fmt.Errorf("filter: score %d windows: %w", len(rows), xerr)
	}
	lg := tensors.MustCopyFlatData[float32](res[0])
	out := make([]float64, len(rows))
	for k := range rows {
		out[k] = 1 / (1 + math.Exp(float64(lg[2*k+1])-float64(lg[2*k])))
	}
	return out, nil
}

// Compile builds (once) and returns the scoring executable: encoder ids,
// mask int32 [B, L] → the two label-token logits float32 [B, 2]
// ([HELPFUL], [NOT_HELPFUL]) at the first decoder step; only those two rows
// of the LM head are multiplied. Benchmarks precompile it per shape.
func (p *Predictor) Compile() (*mlctx.Exec, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.score != nil {
		return p.score, nil
	}
	h, n := p.Helpful, p.NotHelpful
	start := p.Model.Config.DecoderStartTokenID
	e, err := mlctx.NewExecAny(p.Model.Backend, p.Model.Ctx, func(ctx *mlctx.Context, ids, mask *graph.Node) *graph.Node {
		B := ids.Shape().Dimensions[0]
		dec := graph.Reshape(graph.Const(ids.Graph(), make([]int32, B)), B, 1)
		if start != 0 {
			dec = graph.AddScalar(dec, float64(start))
		}
		return graph.Reshape(p.Model.TokenLogitsGraph(ctx, ids, mask, dec, []int{h, n}), B, 2)
	})
	if err != nil {
		return nil, fmt.Errorf("compile filter scoring: %w", err)
	}
	p.score = e
	return e, nil
}

// EncoderBatch packs rows of ids into int32 [B, L] ids and mask tensors, L =
// t5.PadLen(longest row), B = padRows ≥ len(ids) (extra rows are padding
// with one unmasked pad token, so that every attention row has a real key).
func EncoderBatch(ids [][]int, padRows, pad int) (idT, maskT *tensors.Tensor) {
	L := 0
	for _, r := range ids {
		L = max(L, len(r))
	}
	L = t5.PadLen(L)
	iv := make([]int32, padRows*L)
	mv := make([]int32, padRows*L)
	for b := range padRows {
		for j := range L {
			iv[b*L+j] = int32(pad)
		}
		if b >= len(ids) {
			mv[b*L] = 1
			continue
		}
		for j, x := range ids[b] {
			iv[b*L+j] = int32(x)
			mv[b*L+j] = 1
		}
	}
	return tensors.FromFlatDataAndDimensions(iv, padRows, L), tensors.FromFlatDataAndDimensions(mv, padRows, L)
}
