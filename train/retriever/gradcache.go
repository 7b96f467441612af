package retriever

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/train/trainer"
)

// DefaultSubBatchTokens is Config.SubBatchTokens's default: padded tokens
// (rows × bucket length) per encoder pass.
const DefaultSubBatchTokens = 4096

// maxShapes bounds the graphs compiled per executor (one per padded
// sub-batch shape; there is one shape per length bucket).
const maxShapes = 64

// gradCache computes one update with gradient caching (Gao et al., 2021,
// "Scaling Deep Contrastive Learning Batch Size under Memory Limited
// Setup"), which gives the gradient of the whole-batch InfoNCE while
// holding the activations of only one sub-batch:
//
//  1. the distinct texts of the update group are sorted by token length and
//     embedded in sub-batches (training mode, dropout on), without
//     gradients, from a saved RNG state;
//  2. Eq. 10 and Eq. 8 are computed on those embeddings and differentiated
//     with respect to them (lossExec): G = ∂L/∂e;
//  3. the RNG state is restored, so each sub-batch draws the same dropout
//     masks again, and the trainer accumulates the gradient of the
//     surrogate Σ e·G over the sub-batches (∂/∂θ Σ e·G = Σ (∂L/∂e)(∂e/∂θ) =
//     ∂L/∂θ) and applies one AdamW update.
//
// The first and last micro-batch of every trainer step are a one-row
// [CLS][SEP] sub-batch with G = 0, so that the trainer's first/last modes
// always see one shape and the sub-batch shapes (one per length bucket) go
// through one cached executable.
type gradCache struct {
	m        *bert.Model
	cfg      Config
	tk       *tokenized
	n, nh    int
	maxTok   int
	budget   int
	embed    *mlctx.Exec // [rows, L] ids, mask → [rows, H] (training mode)
	lossExec *graph.Exec // q, (hypo, weights), cands, valid → loss, ∂q, (∂hypo), ∂cands
}

func newGradCache(be backends.Backend, m *bert.Model, cfg Config, tk *tokenized, n, nh, maxTok int) (*gradCache, error) {
	gc := &gradCache{m: m, cfg: cfg, tk: tk, n: n, nh: nh, maxTok: maxTok, budget: cfg.SubBatchTokens}
	if gc.budget <= 0 {
		gc.budget = DefaultSubBatchTokens
	}
	var err error
	gc.embed, err = mlctx.NewExecAny(be, m.Ctx, func(ctx *mlctx.Context, ids, mask *graph.Node) *graph.Node {
		ctx.SetTraining(ids.Graph(), true)
		return bert.PoolGraph(m.EncoderGraph(ctx, ids, mask, nil), mask, cfg.Pooling, cfg.Normalize)
	})
	if err != nil {
		return nil, err
	}
	gc.embed.SetMaxCache(maxShapes)
	gc.lossExec, err = graph.NewExecAny(be, func(in []*graph.Node) []*graph.Node {
		q, cands, valid := in[0], in[len(in)-2], in[len(in)-1]
		wrt := []*graph.Node{q}
		fused := q
		if nh > 0 {
			fused = FuseGraph(q, in[1], in[2], cfg.Normalize)
			wrt = append(wrt, in[1])
		}
		wrt = append(wrt, cands)
		loss := InfoNCEGraph(fused, cands, valid, cfg.Temperature)
		return append([]*graph.Node{loss}, graph.Gradient(loss, wrt...)...)
	})
	if err != nil {
		return nil, err
	}
	gc.lossExec.SetMaxCache(maxShapes)
	return gc, nil
}

// surrogate is the trainer's LossFn: inputs ids, mask [rows, L] and
// G [rows, H] → Σ e·G.
func (gc *gradCache) surrogate(ctx *mlctx.Context, in []*graph.Node) *graph.Node {
	e := bert.PoolGraph(gc.m.EncoderGraph(ctx, in[0], in[1], nil), in[1], gc.cfg.Pooling, gc.cfg.Normalize)
	return graph.ReduceAllSum(graph.Mul(e, in[2]))
}

// microRows indexes one micro-batch's rows into the distinct texts of its
// update (-1 = a missing hypothetical document or negative: zero vector).
type microRows struct {
	q, hypo, cands []int
	hw             []float32 // [b·nh]
	valid          []float32 // [b, len(cands)]
}

type subBatch struct {
	rows []int // distinct-text indices; padded to cap with [CLS][SEP]
	cap  int
	l    int // bucket length
}

// update runs one optimiser update over the micro-batches (triplet indices)
// of one accumulation group and returns the trainer's result with Loss
// replaced by the mean InfoNCE of the micro-batches. A non-finite InfoNCE
// or gradient follows the trainer's policy (trainer.Config.SkipNonFinite).
func (gc *gradCache) update(tr *trainer.Trainer, ts []Triplet, micro [][]int) (trainer.StepResult, error) {
	batches, loss, err := gc.prepare(ts, micro)
	if err != nil {
		return trainer.StepResult{}, err
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		// The trainer's own loss is the surrogate Σ e·G; the InfoNCE is checked here.
		return tr.RejectNonFinite(loss)
	}
	sr, err := tr.Step(batches)
	if err != nil {
		return sr, err
	}
	sr.Loss = loss
	return sr, nil
}

// prepare runs steps 1 and 2 of an update (embeddings, InfoNCE and its
// gradient G with respect to the embeddings) and returns the trainer's
// micro-batches of step 3 (ids, mask, G per sub-batch) and the mean InfoNCE.
func (gc *gradCache) prepare(ts []Triplet, micro [][]int) ([][]*tensors.Tensor, float64, error) {
	texts, mr := gc.groupRows(ts, micro)
	subs := gc.plan(texts)

	// 1. Embeddings without gradients, from the saved RNG state.
	rng := gc.m.Ctx.GetVariableByScopeAndName(mlctx.RootScope, mlctx.RNGStateVariableName)
	if rng == nil {
		return nil, 0, fmt.Errorf("context has no RNG state (seed it before training)")
	}
	saved, err := rngValue(rng)
	if err != nil {
		return nil, 0, err
	}
	dummy := subBatch{cap: 1, l: len(gc.tk.empty)}
	emb, err := gc.embedTexts(texts, subs, dummy)
	if err != nil {
		return nil, 0, err
	}

	// 2. InfoNCE per micro-batch and its gradient with respect to the
	// embeddings.
	grad, loss, err := gc.lossGrad(emb, mr, micro, len(texts), len(subs))
	if err != nil {
		return nil, 0, err
	}

	// 3. Same dropout masks again: the trainer accumulates ∂(Σ e·G)/∂θ.
	restore, err := saved.LocalClone()
	if err != nil {
		return nil, 0, err
	}
	if err := rng.SetValue(restore); err != nil {
		return nil, 0, err
	}
	return gc.stepBatches(texts, subs, dummy, grad), loss, nil
}

// groupRows returns the distinct token sequences of an update group (in
// order of first occurrence) and each micro-batch's rows indexed into them.
func (gc *gradCache) groupRows(ts []Triplet, micro [][]int) ([][]int, []microRows) {
	tk, n, nh := gc.tk, gc.n, gc.nh
	var texts [][]int
	seen := map[string]int{}
	id := func(ids []int) int {
		k := idsKey(ids)
		if i, ok := seen[k]; ok {
			return i
		}
		seen[k] = len(texts)
		texts = append(texts, ids)
		return len(texts) - 1
	}
	mr := make([]microRows, len(micro))
	for a, idx := range micro {
		b := len(idx)
		r := microRows{q: make([]int, b), hypo: make([]int, b*nh), hw: make([]float32, b*nh), cands: make([]int, b+b*n)}
		for i, t := range idx {
			r.q[i], r.cands[i] = id(tk.q[t]), id(tk.pos[t])
			for k := range nh {
				r.hypo[i*nh+k] = -1
				if k < len(tk.hypo[t]) {
					r.hypo[i*nh+k], r.hw[i*nh+k] = id(tk.hypo[t][k]), 1
				}
			}
			for k := range n {
				r.cands[b+i*n+k] = -1 // masked: key ""
				if k < len(tk.negs[t]) {
					r.cands[b+i*n+k] = id(tk.negs[t][k])
				}
			}
		}
		for _, row := range CandidateMask(maskKeys(ts, idx, n)) {
			for _, ok := range row {
				r.valid = append(r.valid, b2f(ok))
			}
		}
		mr[a] = r
	}
	return texts, mr
}

// embedTexts is step 1: the [len(texts), H] embeddings (row-major) of the
// distinct texts, sub-batch by sub-batch after the dummy one.
func (gc *gradCache) embedTexts(texts [][]int, subs []subBatch, dummy subBatch) ([]float32, error) {
	h := gc.m.Config.HiddenSize
	emb := make([]float32, len(texts)*h)
	for i, sb := range append([]subBatch{dummy}, subs...) {
		ids, mask := gc.pad(sb, texts)
		out, err := catch.Exec(gc.embed, ids, mask)
		if err != nil {
			return nil, fmt.Errorf("embed sub-batch %d [%d, %d]: %w", i, sb.cap, sb.l, err)
		}
		if i == 0 {
			continue
		}
		flat, err := tensors.CopyFlatData[float32](out[0])
		if err != nil {
			return nil, err
		}
		for j, u := range sb.rows {
			copy(emb[u*h:(u+1)*h], flat[j*h:(j+1)*h])
		}
	}
	return emb, nil
}

// lossGrad is step 2: the mean InfoNCE of the micro-batches and its
// gradient G [ntexts, H] with respect to the embeddings, summed per distinct
// text (the trainer scales each of its nsubs+2 micro-batches by 1/len,
// undone here).
func (gc *gradCache) lossGrad(emb []float32, mr []microRows, micro [][]int, ntexts, nsubs int) ([]float64, float64, error) {
	nh, h := gc.nh, gc.m.Config.HiddenSize
	grad := make([]float64, ntexts*h)
	parts := float64(nsubs + 2)
	var loss float64
	for a, r := range mr {
		b := len(micro[a])
		gather := func(rows []int) *tensors.Tensor {
			f := make([]float32, len(rows)*h)
			for j, u := range rows {
				if u >= 0 {
					copy(f[j*h:(j+1)*h], emb[u*h:(u+1)*h])
				}
			}
			return tensors.FromFlatDataAndDimensions(f, len(rows), h)
		}
		args := []any{gather(r.q)}
		if nh > 0 {
			args = append(args, gather(r.hypo), tensors.FromFlatDataAndDimensions(r.hw, b, nh))
		}
		args = append(args, gather(r.cands), tensors.FromFlatDataAndDimensions(r.valid, b, len(r.cands)))
		out, err := catch.Exec(gc.lossExec, args...)
		if err != nil {
			return nil, 0, fmt.Errorf("micro-batch %d: loss: %w", a, err)
		}
		loss += float64(tensors.ToScalar[float32](out[0])) / float64(len(micro))
		rowsOf := [][]int{r.q}
		if nh > 0 {
			rowsOf = append(rowsOf, r.hypo)
		}
		rowsOf = append(rowsOf, r.cands)
		for o, rows := range rowsOf {
			g, err := tensors.CopyFlatData[float32](out[1+o])
			if err != nil {
				return nil, 0, err
			}
			for j, u := range rows {
				if u < 0 {
					continue
				}
				for c := range h {
					grad[u*h+c] += float64(g[j*h+c]) / float64(len(micro)) * parts
				}
			}
		}
	}
	return grad, loss, nil
}

// stepBatches returns step 3's trainer micro-batches: ids, mask and G per
// sub-batch, between two dummy sub-batches with G = 0.
func (gc *gradCache) stepBatches(texts [][]int, subs []subBatch, dummy subBatch, grad []float64) [][]*tensors.Tensor {
	h := gc.m.Config.HiddenSize
	batches := make([][]*tensors.Tensor, 0, len(subs)+2)
	for i, sb := range append(append([]subBatch{dummy}, subs...), dummy) {
		ids, mask := gc.pad(sb, texts)
		g := make([]float32, sb.cap*h)
		if i > 0 && i <= len(subs) {
			for j, u := range sb.rows {
				for c := range h {
					g[j*h+c] = float32(grad[u*h+c])
				}
			}
		}
		batches = append(batches, []*tensors.Tensor{ids, mask, tensors.FromFlatDataAndDimensions(g, sb.cap, h)})
	}
	return batches
}

// plan sorts the distinct texts by length (longest first, ties by first
// occurrence) and cuts them into sub-batches: a sub-batch starting at a text
// of bucket length L (bert.BucketLength) holds c = budget/L rows (at least
// 1), all padded to L; the last one is padded with [CLS][SEP] rows to c,
// c/2, c/4 or c/8 rows, so a bucket has at most four shapes.
func (gc *gradCache) plan(texts [][]int) []subBatch {
	order := make([]int, len(texts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(texts[order[a]]) > len(texts[order[b]]) })
	var subs []subBatch
	for p := 0; p < len(order); {
		l := bert.BucketLength(len(texts[order[p]]), gc.maxTok)
		c := max(1, gc.budget/l)
		end := min(p+c, len(order))
		// A short last sub-batch gets c/2, c/4 or c/8 rows when they
		// suffice: at most four shapes per bucket, little padding.
		for k := 0; k < 3 && c%2 == 0 && end-p <= c/2; k++ {
			c /= 2
		}
		subs = append(subs, subBatch{rows: order[p:end], cap: c, l: l})
		p = end
	}
	return subs
}

// maskKeys returns CandidateMask's posIDs [b] and negIDs [b][n] for the
// triplets ts[idx[0]], ts[idx[1]], ...: each passage's chunk.TextKey, so
// that copies of a positive differing only in Unicode form, case or white
// space are masked like exact copies. A "t:" prefix keeps keys non-empty;
// "" marks the padding slots of triplets with fewer than n negatives.
func maskKeys(ts []Triplet, idx []int, n int) (posIDs []string, negIDs [][]string) {
	posIDs = make([]string, len(idx))
	negIDs = make([][]string, len(idx))
	for i, t := range idx {
		posIDs[i] = "t:" + chunk.TextKey(ts[t].Pos)
		negIDs[i] = make([]string, n)
		for k := range min(n, len(ts[t].Negs)) {
			negIDs[i][k] = "t:" + chunk.TextKey(ts[t].Negs[k])
		}
	}
	return posIDs, negIDs
}

// pad packs a sub-batch into ids/mask [cap, l] int32 (pad_token_id and 0
// past each row; [CLS][SEP] rows past the last one).
func (gc *gradCache) pad(sb subBatch, texts [][]int) (ids, mask *tensors.Tensor) {
	pad := int32(gc.m.Config.PadTokenID)
	fi := make([]int32, sb.cap*sb.l)
	fm := make([]int32, sb.cap*sb.l)
	for i := range sb.cap {
		row := gc.tk.empty
		if i < len(sb.rows) {
			row = texts[sb.rows[i]]
		}
		for j := range sb.l {
			fi[i*sb.l+j] = pad
			if j < len(row) {
				fi[i*sb.l+j], fm[i*sb.l+j] = int32(row[j]), 1
			}
		}
	}
	return tensors.FromFlatDataAndDimensions(fi, sb.cap, sb.l), tensors.FromFlatDataAndDimensions(fm, sb.cap, sb.l)
}

func idsKey(ids []int) string {
	b := make([]byte, 4*len(ids))
	for i, v := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return string(b)
}

func rngValue(v *mlctx.Variable) (*tensors.Tensor, error) {
	t, err := v.Value()
	if err != nil {
		return nil, err
	}
	return t.LocalClone()
}

func b2f(ok bool) float32 {
	if ok {
		return 1
	}
	return 0
}
