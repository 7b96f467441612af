package filter

import (
	"fmt"
	"math"
	"sort"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/backend"
	mfilter "github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// labeled is a T5 model with its tokenizer and the ids of the two label tokens.
type labeled struct {
	m                  *t5.Model
	tok                tokenizer.Tokenizer
	helpful, unhelpful int
	score              *context.Exec // first-step label logits, compiled per shape
}

// loadForTraining loads dir, adds the label tokens when missing (HF
// add_tokens) and resizes the embeddings to len(tokenizer) when they differ
// (HF resize_token_embeddings(len(tokenizer)), as RAG²'s token_add notebook).
// Resizing gives both label tokens the mean row; identical label rows (from
// resizing, or in any checkpoint) are then made distinct with
// t5.SeparateRows (N(0, 0.02²) seeded by seed), because two identical rows
// are a symmetric start that training never breaks in a random model. A
// checkpoint whose label rows already differ (a trained filter, `models
// init` output) is left unchanged. dropout ≥ 0 replaces dropout_rate.
func loadForTraining(backendName, dir string, seed int64, dropout float64) (*labeled, error) {
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
	ids := tok.AddTokens([]string{mfilter.Helpful, mfilter.NotHelpful})
	if tok.Len() != m.Config.VocabSize {
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
	return &labeled{m: m, tok: tok, helpful: ids[0], unhelpful: ids[1]}, nil
}

// loadForEval loads a trained checkpoint; the label tokens must already be
// in its tokenizer and inside the model's vocabulary.
func loadForEval(backendName, dir string) (*labeled, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := t5.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	helpful, notHelpful, err := mfilter.LabelIDs(tok, cfg.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("evaluate %s: %w (train one with `ragforge train filter`, which adds %s and %s)", dir, err, mfilter.Helpful, mfilter.NotHelpful)
	}
	m, err := t5.Load(be, dir)
	if err != nil {
		return nil, err
	}
	return &labeled{m: m, tok: tok, helpful: helpful, unhelpful: notHelpful}, nil
}

// encoderBatch packs rows of ids into int32 [B, L] ids and mask tensors, L =
// t5.PadLen(longest row), B = rows ≥ len(ids) (extra rows are padding with
// one unmasked pad token, so that every attention row has a real key).
func encoderBatch(ids [][]int, rows, pad int) (idT, maskT *tensors.Tensor) {
	L := 0
	for _, r := range ids {
		L = max(L, len(r))
	}
	L = t5.PadLen(L)
	iv := make([]int32, rows*L)
	mv := make([]int32, rows*L)
	for b := range rows {
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
	return tensors.FromFlatDataAndDimensions(iv, rows, L), tensors.FromFlatDataAndDimensions(mv, rows, L)
}

// targetBatch returns decoder inputs [start, label] and labels [label, </s>]
// as int32 [rows, 2]; padding rows get labels IgnoreIndex (left out of the loss).
func (lm *labeled) targetBatch(labels []int, rows int) (dec, lab *tensors.Tensor) {
	c := lm.m.Config
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
// ids, labels [B, 2] → HF T5 loss (mean cross-entropy over non-ignored labels).
func (lm *labeled) lossFn(ctx *context.Context, in []*graph.Node) *graph.Node {
	return t5.LossGraph(lm.m.LogitsGraph(ctx, in[0], in[1], in[2]), in[3])
}

// compileScore builds (once) the scoring executable: encoder ids, mask [B, L]
// → the two label-token logits [B, 2] at the first decoder step (decoder
// input = decoder_start_token_id); only those two rows of the LM head are
// multiplied.
func (lm *labeled) compileScore() error {
	if lm.score != nil {
		return nil
	}
	h, n := lm.helpful, lm.unhelpful
	start := lm.m.Config.DecoderStartTokenID
	e, err := context.NewExecAny(lm.m.Backend, lm.m.Ctx, func(ctx *context.Context, ids, mask *graph.Node) *graph.Node {
		B := ids.Shape().Dimensions[0]
		dec := graph.Reshape(graph.Const(ids.Graph(), make([]int32, B)), B, 1)
		if start != 0 {
			dec = graph.AddScalar(dec, float64(start))
		}
		return graph.Reshape(lm.m.TokenLogitsGraph(ctx, ids, mask, dec, []int{h, n}), B, 2)
	})
	if err != nil {
		return err
	}
	lm.score = e
	return nil
}

// scoreRows returns P(helpful) per row: the softmax over the two label-token
// logits at the first decoder step (decoder input = decoder_start_token_id),
// i.e. 1/(1+exp(ℓ_not − ℓ_helpful)). Rows are processed batch at a time in
// order of length (so padding buckets stay small); results are in input order.
func (lm *labeled) scoreRows(rows [][]int, batch int, progress func(done, total int)) ([]float64, error) {
	if err := lm.compileScore(); err != nil {
		return nil, err
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(rows[order[a]]) < len(rows[order[b]]) })
	out := make([]float64, len(rows))
	for s := 0; s < len(order); s += batch {
		idx := order[s:min(s+batch, len(order))]
		ids := make([][]int, len(idx))
		for k, i := range idx {
			ids[k] = rows[i]
		}
		idT, maskT := encoderBatch(ids, batch, lm.m.Config.PadTokenID)
		var res []*tensors.Tensor
		var xerr error
		if err := catch.Do(func() { res, xerr = lm.score.Exec(idT, maskT) }); err != nil {
			return nil, fmt.Errorf("score windows: %w", err)
		}
		if xerr != nil {
			return nil, fmt.Errorf("score windows: %w", xerr)
		}
		lg := tensors.MustCopyFlatData[float32](res[0])
		for k, i := range idx {
			out[i] = 1 / (1 + math.Exp(float64(lg[2*k+1])-float64(lg[2*k])))
		}
		if progress != nil {
			progress(min(s+batch, len(order)), len(order))
		}
	}
	return out, nil
}
