package bert

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/ragforge/ragforge/internal/catch"
)

// maxCachedShapes bounds the compiled graphs kept per executor (one per
// (batch bucket, length bucket) pair).
const maxCachedShapes = 64

// BucketLength is the padded sequence length used for a batch whose longest
// row has n tokens: 16 for n ≤ 16, the next multiple of 16 up to 128, the
// next multiple of 64 above, never more than maxLen (max_position_embeddings).
// Padding to buckets bounds the number of compiled graphs; results do not
// depend on the bucket because padded keys are masked.
func BucketLength(n, maxLen int) int {
	var b int
	switch {
	case n <= 16:
		b = 16
	case n <= 128:
		b = (n + 15) / 16 * 16
	default:
		b = (n + 63) / 64 * 64
	}
	return min(b, maxLen)
}

// BucketBatch is the padded batch size for n rows: the next power of two up
// to 64, then the next multiple of 64. Padded rows are all padding and are
// dropped from the results.
func BucketBatch(n int) int {
	if n > 64 {
		return (n + 63) / 64 * 64
	}
	b := 1
	for b < n {
		b *= 2
	}
	return b
}

// Outputs holds Forward's results as row-major float32 slices.
type Outputs struct {
	Batch, Length, Hidden int       // B, L (longest input row), H
	LastHidden            []float32 // [B, L, H] last_hidden_state, padded positions included (HF math)
	CLS                   []float32 // [B, H] last_hidden_state[:, 0]
	Mean                  []float32 // [B, H] masked mean over real tokens
	Pooler                []float32 // [B, H] tanh(pooler.dense(CLS)); nil when !HasPooler
}

// batchInput is a padded [Bb, Lb] batch.
type batchInput struct {
	b, l, bb, lb        int
	ids, mask, typesIDs *tensors.Tensor
}

// pad validates the ragged rows and pads them to bucket shapes: ids with
// pad_token_id, mask and type ids with 0. mask == nil means all ones;
// typeIDs == nil means all zeros; a nil row inside mask/typeIDs likewise.
func (m *Model) pad(ids, mask, typeIDs [][]int) (*batchInput, error) {
	c := m.Config
	if len(ids) == 0 {
		return nil, errors.New("empty batch")
	}
	if mask != nil && len(mask) != len(ids) {
		return nil, fmt.Errorf("mask has %d rows, ids %d", len(mask), len(ids))
	}
	if typeIDs != nil && len(typeIDs) != len(ids) {
		return nil, fmt.Errorf("typeIDs has %d rows, ids %d", len(typeIDs), len(ids))
	}
	l := 0
	for _, r := range ids {
		l = max(l, len(r))
	}
	if l == 0 {
		return nil, errors.New("all rows are empty")
	}
	if l > m.MaxLength() {
		return nil, fmt.Errorf("row length %d exceeds %d (max_position_embeddings %d)", l, m.MaxLength(), c.MaxPositionEmbeddings)
	}
	in := &batchInput{b: len(ids), l: l, bb: BucketBatch(len(ids)), lb: BucketLength(l, m.MaxLength())}
	fi := make([]int32, in.bb*in.lb)
	fm := make([]int32, in.bb*in.lb)
	ft := make([]int32, in.bb*in.lb)
	for i := range fi {
		fi[i] = int32(c.PadTokenID)
	}
	for r, row := range ids {
		var mrow, trow []int
		if mask != nil && mask[r] != nil {
			if mrow = mask[r]; len(mrow) != len(row) {
				return nil, fmt.Errorf("row %d: mask length %d, ids length %d", r, len(mrow), len(row))
			}
		}
		if typeIDs != nil && typeIDs[r] != nil {
			if trow = typeIDs[r]; len(trow) != len(row) {
				return nil, fmt.Errorf("row %d: typeIDs length %d, ids length %d", r, len(trow), len(row))
			}
		}
		for t, id := range row {
			if id < 0 || id >= c.VocabSize {
				return nil, fmt.Errorf("row %d, position %d: token id %d outside vocabulary [0,%d)", r, t, id, c.VocabSize)
			}
			k := r*in.lb + t
			fi[k], fm[k] = int32(id), 1
			if mrow != nil {
				if mrow[t] != 0 && mrow[t] != 1 {
					return nil, fmt.Errorf("row %d, position %d: mask value %d (want 0 or 1)", r, t, mrow[t])
				}
				fm[k] = int32(mrow[t])
			}
			if trow != nil {
				if trow[t] < 0 || trow[t] >= c.TypeVocabSize {
					return nil, fmt.Errorf("row %d, position %d: token type %d outside [0,%d)", r, t, trow[t], c.TypeVocabSize)
				}
				ft[k] = int32(trow[t])
			}
		}
	}
	in.ids = tensors.FromFlatDataAndDimensions(fi, in.bb, in.lb)
	in.mask = tensors.FromFlatDataAndDimensions(fm, in.bb, in.lb)
	in.typesIDs = tensors.FromFlatDataAndDimensions(ft, in.bb, in.lb)
	return in, nil
}

// exec returns the cached executor under key, building it with fn once.
// The executor compiles one graph per padded input shape.
func (m *Model) exec(key string, fn any) (*context.Exec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.execs == nil {
		m.execs = map[string]*context.Exec{}
	}
	if e, ok := m.execs[key]; ok {
		return e, nil
	}
	e, err := context.NewExecAny(m.Backend, m.Ctx, fn)
	if err != nil {
		return nil, err
	}
	e.SetMaxCache(maxCachedShapes)
	m.execs[key] = e
	return e, nil
}

// rows copies the first b rows (and, for rank 3, the first l positions) of a
// [Bb, ...] float32 tensor.
func rows(t *tensors.Tensor, b, l int) ([]float32, error) {
	flat, err := tensors.CopyFlatData[float32](t)
	if err != nil {
		return nil, err
	}
	dims := t.Shape().Dimensions
	if len(dims) == 2 {
		return flat[:b*dims[1]], nil
	}
	lb, h := dims[1], dims[2]
	out := make([]float32, 0, b*l*h)
	for i := 0; i < b; i++ {
		out = append(out, flat[i*lb*h:(i*lb+l)*h]...)
	}
	return out, nil
}

// Forward runs BertModel on a batch of token-id rows (rows may differ in
// length; shorter rows are right-padded with pad_token_id). mask rows (1 =
// real token) default to all ones, typeIDs rows to zeros; nil slices mean
// the default for every row. The batch is padded to
// [BucketBatch(B), BucketLength(L)] and one graph is compiled per such
// bucket and cached, so steady-state calls never recompile. Errors: empty batch, ragged mask/typeIDs
// disagreeing with ids, ids outside the vocabulary, rows longer than
// max_position_embeddings, or a failure compiling/executing the graph.
func (m *Model) Forward(ids, mask, typeIDs [][]int) (*Outputs, error) {
	in, err := m.pad(ids, mask, typeIDs)
	if err != nil {
		return nil, fmt.Errorf("bert: forward: %w", err)
	}
	e, err := m.exec("forward", func(ctx *context.Context, ids, mask, types *graph.Node) []*graph.Node {
		hidden := m.EncoderGraph(ctx, ids, mask, types)
		outs := []*graph.Node{hidden, PoolGraph(hidden, mask, PoolCLS, false), PoolGraph(hidden, mask, PoolMean, false)}
		if m.HasPooler {
			outs = append(outs, m.PoolerGraph(ctx, hidden))
		}
		return outs
	})
	if err != nil {
		return nil, fmt.Errorf("bert: forward: %w", err)
	}
	res, err := catch.Exec(e, in.ids, in.mask, in.typesIDs)
	if err != nil {
		return nil, fmt.Errorf("bert: forward [%d,%d] (bucket [%d,%d]): %w", in.b, in.l, in.bb, in.lb, err)
	}
	o := &Outputs{Batch: in.b, Length: in.l, Hidden: m.Config.HiddenSize}
	dst := []*[]float32{&o.LastHidden, &o.CLS, &o.Mean, &o.Pooler}
	for i, t := range res {
		if *dst[i], err = rows(t, in.b, in.l); err != nil {
			return nil, fmt.Errorf("bert: forward: output %d: %w", i, err)
		}
	}
	return o, nil
}

// Embed returns one pooled (and, with normalize, L2-normalised) embedding
// [B][H] per row; see PoolGraph for the pooling math and Forward for the
// input conventions and errors.
func (m *Model) Embed(ids, mask [][]int, p Pooling, normalize bool) ([][]float32, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("bert: embed: unknown pooling %q (want %q or %q)", p, PoolCLS, PoolMean)
	}
	in, err := m.pad(ids, mask, nil)
	if err != nil {
		return nil, fmt.Errorf("bert: embed: %w", err)
	}
	e, err := m.exec(fmt.Sprintf("embed/%s/%v", p, normalize), func(ctx *context.Context, ids, mask *graph.Node) *graph.Node {
		return PoolGraph(m.EncoderGraph(ctx, ids, mask, nil), mask, p, normalize)
	})
	if err != nil {
		return nil, fmt.Errorf("bert: embed: %w", err)
	}
	res, err := catch.Exec(e, in.ids, in.mask)
	if err != nil {
		return nil, fmt.Errorf("bert: embed [%d,%d] (bucket [%d,%d]): %w", in.b, in.l, in.bb, in.lb, err)
	}
	flat, err := rows(res[0], in.b, in.l)
	if err != nil {
		return nil, fmt.Errorf("bert: embed: %w", err)
	}
	h := m.Config.HiddenSize
	out := make([][]float32, in.b)
	for i := range out {
		out[i] = flat[i*h : (i+1)*h : (i+1)*h]
	}
	return out, nil
}

// Score runs the sequence-classification head and returns logits[:, 0] [B]
// for each row: the relevance score of a cross-encoder (MedCPT, num_labels 1)
// fed "[CLS] query [SEP] doc [SEP]" with token types 0/1. Errors as Forward,
// plus a model without classifier.
func (m *Model) Score(ids, mask, typeIDs [][]int) ([]float32, error) {
	if !m.HasClassifier {
		return nil, errors.New("bert: score: model has no classifier head (classifier.* absent)")
	}
	in, err := m.pad(ids, mask, typeIDs)
	if err != nil {
		return nil, fmt.Errorf("bert: score: %w", err)
	}
	e, err := m.exec("score", func(ctx *context.Context, ids, mask, types *graph.Node) *graph.Node {
		logits := m.ClassifierGraph(ctx, m.EncoderGraph(ctx, ids, mask, types))
		return firstOf(graph.InsertAxes(logits, -1)) // logits[:, 0]
	})
	if err != nil {
		return nil, fmt.Errorf("bert: score: %w", err)
	}
	res, err := catch.Exec(e, in.ids, in.mask, in.typesIDs)
	if err != nil {
		return nil, fmt.Errorf("bert: score [%d,%d] (bucket [%d,%d]): %w", in.b, in.l, in.bb, in.lb, err)
	}
	flat, err := tensors.CopyFlatData[float32](res[0])
	if err != nil {
		return nil, fmt.Errorf("bert: score: %w", err)
	}
	return flat[:in.b], nil
}
