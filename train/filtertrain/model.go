package filtertrain

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// labeled is the filter's Predictor with what training adds to it: the
// loss and the target batches. Validation scores through the Predictor, so
// training and serving share one scoring path.
type labeled struct {
	*filter.Predictor
	smoothing float64 // Config.LabelSmoothing
}

// loadForTraining loads dir, adds the label tokens when missing (HF
// add_tokens) and grows the embeddings to len(tokenizer) when the tokens do
// not fit (HF resize_token_embeddings(len(tokenizer)), as RAG²'s token_add
// notebook); a padded embedding that holds them keeps its size.
// Resizing gives both label tokens the mean row; identical label rows (from
// resizing, or in any checkpoint) are then made distinct with
// t5.SeparateRows (N(0, 0.02²) seeded by seed), because two identical rows
// are a symmetric start that training never breaks in a random model. A
// checkpoint whose label rows already differ (a trained filter, `models
// init` output) is left unchanged. dropout ≥ 0 replaces dropout_rate. pc
// configures validation (Config.predictor). marks, when not nil, puts
// match marks into the config (recordMarks). A calibration in the config
// (calibrate filter) is dropped: it was fitted to the start weights.
func loadForTraining(backendName, dir string, seed int64, dropout float64, marks *markPlan, pc filter.Config) (*labeled, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, err
	}
	m, err := t5.Load(be, dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	ids := tok.AddTokens([]string{filter.Helpful, filter.NotHelpful})
	// A padded embedding (Flan-T5: 32,128 rows for 32,100 pieces) keeps its
	// rows when the new tokens fit in it, as downstream code expects 32,128;
	// shrinking it to len(tokenizer) dropped rows a checkpoint was saved with.
	if tok.Len() > m.Config.VocabSize {
		if err := m.ResizeTokenEmbeddings(tok.Len()); err != nil {
			return nil, fmt.Errorf("load %s: %w", dir, err)
		}
	}
	if _, err := m.SeparateRows(ids, t5.LabelRowStd, uint64(seed)); err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	if dropout >= 0 {
		m.Config.DropoutRate = dropout
	}
	if err := recordMarks(m, marks); err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	// A calibration was fitted to the start weights, which training changes.
	m.Config.DeleteExtra(filter.CalibrationKey)
	// The windows it was evaluated at are the start model's; the new
	// checkpoints' are their training run's (CheckpointWindows).
	m.Config.DeleteExtra(filter.WindowsKey)
	p, err := filter.NewPredictor(m, tok, pc)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	return &labeled{Predictor: p}, nil
}

// loadForEval loads a trained checkpoint (models/filter.LoadAs, the
// weights held as dt); the label tokens must already be in its tokenizer
// and inside the model's vocabulary.
func loadForEval(backendName, dir string, pc filter.Config, dt nn.DType) (*filter.Predictor, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, err
	}
	p, err := filter.LoadAs(be, dir, pc, dt)
	if errors.Is(err, filter.ErrNotFilter) {
		return nil, fmt.Errorf("%w (train one with `ragforge train filter`, which adds %s and %s)", err, filter.Helpful, filter.NotHelpful)
	}
	return p, err
}

// targetBatch returns decoder inputs [start, label] and labels [label, </s>]
// as int32 [rows, 2]; padding rows get labels IgnoreIndex (left out of the loss).
func (lm *labeled) targetBatch(labels []int, rows int) (dec, lab *tensors.Tensor) {
	c := lm.Model.Config
	dv := make([]int32, rows*2)
	lv := make([]int32, rows*2)
	for b := range rows {
		dv[b*2] = int32(c.DecoderStartTokenID)
		dv[b*2+1] = int32(c.PadTokenID)
		lv[b*2], lv[b*2+1] = t5.IgnoreIndex, t5.IgnoreIndex
		if b < len(labels) {
			dv[b*2+1] = int32(labels[b])
			lv[b*2], lv[b*2+1] = int32(labels[b]), int32(c.EOSTokenID)
		}
	}
	return tensors.FromFlatDataAndDimensions(dv, rows, 2), tensors.FromFlatDataAndDimensions(lv, rows, 2)
}

// lossFn is the trainer.LossFn of the filter: inputs ids, mask [B, L], decoder
// ids, labels [B, 2] → HF T5 loss (mean cross-entropy over non-ignored
// labels), label-smoothed by lm.smoothing (HF label_smoothing_factor).
func (lm *labeled) lossFn(ctx *context.Context, in []*graph.Node) *graph.Node {
	return t5.SmoothedLossGraph(lm.Model.LogitsGraph(ctx, in[0], in[1], in[2]), in[3], lm.smoothing)
}

// recordMarks puts the marks of plan into m's config, so that every
// checkpoint saved carries them: DefaultMatchMarks when it has none, the
// checkpoint's own otherwise (kept as they are: prefix_chars, say), with
// plan's RareDocFractions and their document frequencies added when the
// marks have none. Errors: marks with other RareDocFractions than plan's.
func recordMarks(m *t5.Model, plan *markPlan) error {
	if plan == nil {
		return nil
	}
	marks, err := filter.MatchMarksOf(m.Config.Extra(filter.MatchMarksKey))
	switch {
	case err != nil:
		return err
	case marks == nil:
		d := filter.DefaultMatchMarks()
		marks = &d
	case len(plan.rare) == 0 || slices.Equal(marks.RareDocFractions, plan.rare):
		return nil
	case len(marks.RareDocFractions) > 0:
		return fmt.Errorf("the checkpoint's match marks have rare_doc_fractions %v, not the %v asked for (start from a checkpoint without them)",
			marks.RareDocFractions, plan.rare)
	}
	if len(plan.rare) > 0 {
		marks.RareDocFractions = plan.rare
		*marks = marks.WithDocFreq(plan.evidence)
	}
	return m.Config.SetExtra(filter.MatchMarksKey, *marks)
}
