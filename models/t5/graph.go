package t5

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/remat"
)

// IgnoreIndex is the label value the loss skips (PyTorch CrossEntropyLoss ignore_index, HF labels padding).
const IgnoreIndex = -100

// maskValue is the additive bias for blocked positions: torch.finfo(float32).min, as in HF.
const maskValue = -math.MaxFloat32

// The building blocks T5 shares with models/decoder (package models/nn):
// weight is the variable of an HF parameter name, linear is nn.Linear
// without bias (x·Wᵀ), rmsNorm is T5LayerNorm.
var (
	weight  = nn.Param
	linear  = nn.MatmulT
	rmsNorm = nn.RMSNorm
)

// geluNew is HF gelu_new: 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))).
func geluNew(x *graph.Node) *graph.Node {
	inner := graph.MulScalar(graph.Add(x, graph.MulScalar(graph.Mul(x, graph.Square(x)), 0.044715)), math.Sqrt(2/math.Pi))
	return graph.Mul(graph.MulScalar(x, 0.5), graph.OnePlus(graph.Tanh(inner)))
}

func (m *Model) act(x *graph.Node) *graph.Node {
	a, _, err := m.Config.activation()
	if err != nil {
		panic(err)
	}
	switch a {
	case "relu":
		return graph.Max(x, graph.ZerosLike(x))
	case "gelu_new":
		return geluNew(x)
	default: // exact gelu
		return graph.Mul(graph.MulScalar(x, 0.5), graph.OnePlus(graph.Erf(graph.DivScalar(x, math.Sqrt2))))
	}
}

func (m *Model) dropout(ctx *context.Context, x *graph.Node) *graph.Node {
	return nn.Dropout(ctx, x, m.Config.DropoutRate)
}

// layerFF is T5LayerFF: x + dropout(DenseReluDense(layer_norm(x))), with
// DenseReluDense = wo(act(wi(h))) (T5DenseActDense) or
// wo(act(wi_0(h)) * wi_1(h)) (T5DenseGatedActDense). prefix is e.g.
// "encoder.block.0.layer.1". x [B, L, d_model] → [B, L, d_model].
func (m *Model) layerFF(ctx *context.Context, prefix string, x *graph.Node) *graph.Node {
	g := x.Graph()
	h := rmsNorm(x, weight(ctx, g, prefix+".layer_norm.weight"), m.Config.LayerNormEpsilon)
	_, gated, _ := m.Config.activation()
	var inner *graph.Node
	if gated {
		inner = graph.Mul(m.act(linear(h, weight(ctx, g, prefix+".DenseReluDense.wi_0.weight"))),
			linear(h, weight(ctx, g, prefix+".DenseReluDense.wi_1.weight")))
	} else {
		inner = m.act(linear(h, weight(ctx, g, prefix+".DenseReluDense.wi.weight")))
	}
	inner = m.dropout(ctx, inner)
	out := linear(inner, weight(ctx, g, prefix+".DenseReluDense.wo.weight"))
	return graph.Add(x, m.dropout(ctx, out))
}

// splitHeads: [B, L, H*d_kv] → [B, H, L, d_kv].
func (m *Model) splitHeads(x *graph.Node) *graph.Node {
	d := x.Shape().Dimensions
	return graph.Transpose(graph.Reshape(x, d[0], d[1], m.Config.NumHeads, m.Config.DKV), 1, 2)
}

// mergeHeads: [B, H, L, d_kv] → [B, L, H*d_kv].
func (m *Model) mergeHeads(x *graph.Node) *graph.Node {
	d := x.Shape().Dimensions
	return graph.Reshape(graph.Transpose(x, 1, 2), d[0], d[2], m.Config.NumHeads*m.Config.DKV)
}

// attend is the core of T5Attention: softmax(q·kᵀ + bias) · v, with NO
// 1/sqrt(d_kv) scaling (T5 folds it into the q initialisation).
// q [B,H,Lq,d_kv], k,v [B,H,Lk,d_kv], bias broadcastable to [B,H,Lq,Lk]
// (position bias plus additive mask) → [B,H,Lq,d_kv].
func (m *Model) attend(ctx *context.Context, q, k, v, bias *graph.Node) *graph.Node {
	scores := graph.DotGeneral(q, []int{3}, []int{0, 1}, k, []int{3}, []int{0, 1}) // [B,H,Lq,Lk]
	// bias broadcasts implicitly: no [B,H,Lq,Lk] copy of it per layer.
	scores = graph.Add(scores, bias)
	w := m.dropout(ctx, graph.Softmax(scores, -1))
	return graph.DotGeneral(w, []int{3}, []int{0, 1}, v, []int{2}, []int{0, 1}) // [B,H,Lq,d_kv]
}

// attention is T5Attention without cache. prefix names the module (e.g.
// "encoder.block.0.layer.0.SelfAttention"); x [B,Lq,d_model] gives queries,
// kvIn [B,Lk,d_model] keys/values; q/k/v weights [H*d_kv, d_model], o [d_model, H*d_kv].
func (m *Model) attention(ctx *context.Context, prefix string, x, kvIn, bias *graph.Node) *graph.Node {
	g := x.Graph()
	q := m.splitHeads(linear(x, weight(ctx, g, prefix+".q.weight")))
	k := m.splitHeads(linear(kvIn, weight(ctx, g, prefix+".k.weight")))
	v := m.splitHeads(linear(kvIn, weight(ctx, g, prefix+".v.weight")))
	out := m.mergeHeads(m.attend(ctx, q, k, v, bias))
	return linear(out, weight(ctx, g, prefix+".o.weight"))
}

// crossAttention is T5Attention for EncDecAttention (no position bias):
// x [B,T,d_model] decoder states, enc [B,L,d_model] encoder output, bias
// [B,H,T,L] the encoder padding mask → [B,T,d_model].
//
// When the decoder is short (the RAG² filter scores one or two target
// tokens), projecting all L encoder positions to keys and values
// (2·B·L·d_model·H·d_kv multiply-adds per layer) costs far more than the
// attention itself. The products are then reassociated, which is exact in
// real arithmetic (float32 rounding differs at the 1e-6 level):
//
//	scores_h = q_h·(enc·W_k,hᵀ)ᵀ = (q_h·W_k,h)·encᵀ
//	out_h    = w_h·(enc·W_v,hᵀ)  = (w_h·enc)·W_v,hᵀ
//
// with W_k,h, W_v,h the [d_kv, d_model] rows of head h; cost
// 2·B·T·H·d_kv·d_model + 2·B·H·T·L·d_model. The cheaper form is chosen
// from the static shapes.
func (m *Model) crossAttention(ctx *context.Context, prefix string, x, enc, bias *graph.Node) *graph.Node {
	c := m.Config
	xd, ed := x.Shape().Dimensions, enc.Shape().Dimensions
	B, T, L, D := xd[0], xd[1], ed[1], ed[2]
	H, K := c.NumHeads, c.DKV
	if crossForm == crossDirect || crossForm == crossAuto && !reassociateCross(T, L, D, H, K) {
		return m.attention(ctx, prefix, x, enc, bias)
	}
	g := x.Graph()
	q := m.splitHeads(linear(x, weight(ctx, g, prefix+".q.weight")))            // [B,H,T,K]
	wk := graph.Reshape(weight(ctx, g, prefix+".k.weight"), H, K, D)            // [H,K,D]
	wv := graph.Reshape(weight(ctx, g, prefix+".v.weight"), H, K, D)            // [H,K,D]
	qk := graph.DotGeneral(q, []int{3}, []int{1}, wk, []int{1}, []int{0})       // [H,B,T,D]
	qk = graph.Reshape(graph.TransposeAllAxes(qk, 1, 0, 2, 3), B, H*T, D)       // [B,H·T,D]
	scores := graph.DotGeneral(qk, []int{2}, []int{0}, enc, []int{2}, []int{0}) // [B,H·T,L]
	scores = graph.Add(graph.Reshape(scores, B, H, T, L), bias)
	w := m.dropout(ctx, graph.Softmax(scores, -1))                                                   // [B,H,T,L]
	we := graph.DotGeneral(graph.Reshape(w, B, H*T, L), []int{2}, []int{0}, enc, []int{1}, []int{0}) // [B,H·T,D]
	we = graph.Reshape(we, B, H, T, D)
	out := graph.DotGeneral(we, []int{3}, []int{1}, wv, []int{2}, []int{0}) // [H,B,T,K]
	out = graph.Reshape(graph.TransposeAllAxes(out, 1, 2, 0, 3), B, T, H*K) // [B,T,H·K]
	return linear(out, weight(ctx, g, prefix+".o.weight"))
}

// reassociateCross reports whether the reassociated cross-attention costs
// fewer multiply-adds per batch row than the direct one, for T decoder and L
// encoder positions, d_model D, H heads of d_kv K:
// T·H·K·D + H·T·L·D (reassociated) < L·D·H·K + H·T·L·K (direct).
func reassociateCross(T, L, D, H, K int) bool {
	return T*H*K*D+H*T*L*D < L*D*H*K+H*T*L*K
}

// crossForm selects the cross-attention form; tests force one or the other.
var crossForm = crossAuto

const (
	crossAuto = iota
	crossDirect
	crossReassociated
)

// positionBias is T5Attention.compute_bias: table[bucket(k - q - queryOffset), h]
// as [1, H, qLen, kLen]; table is relative_attention_bias.weight [buckets, H].
func (m *Model) positionBias(table *graph.Node, qLen, kLen, queryOffset int, bidirectional bool) *graph.Node {
	c := m.Config
	b := bucketGrid(qLen, kLen, queryOffset, bidirectional, c.RelativeAttentionNumBuckets, c.RelativeAttentionMaxDistance)
	idx := make([]int32, len(b))
	for i, x := range b {
		idx[i] = int32(x)
	}
	g := table.Graph()
	ids := graph.Reshape(graph.Const(g, idx), qLen, kLen, 1)
	vals := graph.Gather(table, ids) // [q, k, H]
	vals = graph.TransposeAllDims(vals, 2, 0, 1)
	return graph.ExpandAxes(vals, 0)
}

// paddingBias turns a [B, L] 1/0 mask into the additive key mask
// (1 - m)·float32_min of shape [B, 1, 1, L].
func paddingBias(mask *graph.Node) *graph.Node {
	mf := graph.ConvertDType(mask, dtypes.Float32)
	b := graph.MulScalar(graph.OneMinus(mf), maskValue)
	return graph.ExpandAxes(b, 1, 2)
}

// embed looks up shared.weight rows (no scaling): ids [B, L] → [B, L, d_model].
func embed(ctx *context.Context, ids *graph.Node) *graph.Node {
	return nn.Lookup(nn.StoredParam(ctx, ids.Graph(), "shared.weight"), ids)
}

// EncoderGraph is T5Stack (encoder): embeddings, blocks of [self-attention
// with bidirectional relative bias computed by block 0 and shared, FF], then
// final_layer_norm. inputIDs [B, L] int, mask [B, L] (1 real, 0 pad; any
// numeric dtype) → [B, L, d_model] float32. ctx is the model's root scope.
func (m *Model) EncoderGraph(ctx *context.Context, inputIDs, mask *graph.Node) *graph.Node {
	h, _ := m.encoderStack(ctx, inputIDs, mask, false)
	return h
}

// encoderStack optionally also returns each block's output (residual stream).
func (m *Model) encoderStack(ctx *context.Context, inputIDs, mask *graph.Node, keep bool) (*graph.Node, []*graph.Node) {
	g := inputIDs.Graph()
	c := m.Config
	L := inputIDs.Shape().Dimensions[1]
	h := m.dropout(ctx, embed(ctx, inputIDs))
	pos := m.positionBias(weight(ctx, g, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"), L, L, 0, true)
	// [1,H,L,L] + [B,1,1,L] → [B,H,L,L], broadcast implicitly: made once,
	// shared by every layer.
	bias := graph.Add(pos, paddingBias(mask))
	var outs []*graph.Node
	for i := range c.NumLayers {
		p := fmt.Sprintf("encoder.block.%d.layer.", i)
		h = remat.If(m.GradientCheckpointing, ctx, h, func(h *graph.Node) *graph.Node {
			n := rmsNorm(h, weight(ctx, g, p+"0.layer_norm.weight"), c.LayerNormEpsilon)
			h = graph.Add(h, m.dropout(ctx, m.attention(ctx, p+"0.SelfAttention", n, n, bias)))
			return m.layerFF(ctx, p+"1", h)
		})
		if keep {
			outs = append(outs, h)
		}
	}
	h = rmsNorm(h, weight(ctx, g, "encoder.final_layer_norm.weight"), c.LayerNormEpsilon)
	return m.dropout(ctx, h), outs
}

// causalBias is [1, 1, T, T]: 0 where key ≤ query, float32_min elsewhere.
func causalBias(g *graph.Graph, T int) *graph.Node {
	v := make([]float32, T*T)
	for q := range T {
		for k := q + 1; k < T; k++ {
			v[q*T+k] = maskValue
		}
	}
	return graph.Reshape(graph.Const(g, v), 1, 1, T, T)
}

// DecoderGraph is T5Stack (decoder), teacher-forced: decIDs [B, T] int,
// encOut [B, L, d_model], encMask [B, L] → [B, T, d_model] after
// final_layer_norm (before the tied-embedding rescale). Self-attention is
// causal with unidirectional relative bias (block 0, shared); cross-attention
// has no position bias, only the encoder padding mask; the decoder has
// num_decoder_layers blocks.
func (m *Model) DecoderGraph(ctx *context.Context, decIDs, encOut, encMask *graph.Node) *graph.Node {
	h, _ := m.decoderStack(ctx, decIDs, encOut, encMask, false)
	return h
}

func (m *Model) decoderStack(ctx *context.Context, decIDs, encOut, encMask *graph.Node, keep bool) (*graph.Node, []*graph.Node) {
	g := decIDs.Graph()
	c := m.Config
	T := decIDs.Shape().Dimensions[1]
	h := m.dropout(ctx, embed(ctx, decIDs))
	pos := m.positionBias(weight(ctx, g, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"), T, T, 0, false)
	selfBias := graph.Add(pos, causalBias(g, T)) // [1,H,T,T]
	crossBias := paddingBias(encMask)            // [B,1,1,L], broadcast by each attention's Add
	var outs []*graph.Node
	for i := range c.NumDecoderLayers {
		p := fmt.Sprintf("decoder.block.%d.layer.", i)
		h = remat.If(m.GradientCheckpointing, ctx, h, func(h *graph.Node) *graph.Node {
			n := rmsNorm(h, weight(ctx, g, p+"0.layer_norm.weight"), c.LayerNormEpsilon)
			h = graph.Add(h, m.dropout(ctx, m.attention(ctx, p+"0.SelfAttention", n, n, selfBias)))
			n = rmsNorm(h, weight(ctx, g, p+"1.layer_norm.weight"), c.LayerNormEpsilon)
			h = graph.Add(h, m.dropout(ctx, m.crossAttention(ctx, p+"1.EncDecAttention", n, encOut, crossBias)))
			return m.layerFF(ctx, p+"2", h)
		})
		if keep {
			outs = append(outs, h)
		}
	}
	h = rmsNorm(h, weight(ctx, g, "decoder.final_layer_norm.weight"), c.LayerNormEpsilon)
	return m.dropout(ctx, h), outs
}

// lmHead projects decoder states h [B, T, d_model] to logits [B, T, vocab]:
// tied: (h·d_model^-½)·sharedᵀ (Mesh TF / HF rescale); untied: lm_head(h).
func (m *Model) lmHead(ctx *context.Context, h *graph.Node) *graph.Node {
	g := h.Graph()
	if m.Config.TieWordEmbeddings {
		h = graph.MulScalar(h, math.Pow(float64(m.Config.DModel), -0.5))
		return linear(h, weight(ctx, g, "shared.weight"))
	}
	return linear(h, weight(ctx, g, "lm_head.weight"))
}

// TokenLogitsGraph is LogitsGraph restricted to the vocabulary entries
// tokens: inputIDs, mask [B, L], decIDs [B, T] → logits [B, T, len(tokens)]
// float32, column j being the logit of tokens[j] (same values as the full
// LogitsGraph, whose other columns are never computed: scoring a few label
// tokens skips the [B·T, d_model]×[d_model, vocab] head). tokens must lie in
// [0, vocab) (graph-building panic otherwise).
func (m *Model) TokenLogitsGraph(ctx *context.Context, inputIDs, mask, decIDs *graph.Node, tokens []int) *graph.Node {
	enc := m.EncoderGraph(ctx, inputIDs, mask)
	h := m.DecoderGraph(ctx, decIDs, enc, mask)
	g := h.Graph()
	idx := make([]int32, len(tokens))
	for i, tk := range tokens {
		if tk < 0 || tk >= m.Config.VocabSize {
			panic(fmt.Errorf("t5: token %d outside [0,%d)", tk, m.Config.VocabSize))
		}
		idx[i] = int32(tk)
	}
	rows := graph.Reshape(graph.Const(g, idx), len(tokens), 1)
	if m.Config.TieWordEmbeddings {
		h = graph.MulScalar(h, math.Pow(float64(m.Config.DModel), -0.5))
		return linear(h, nn.Widen(graph.Gather(nn.StoredParam(ctx, g, "shared.weight"), rows)))
	}
	return linear(h, nn.Widen(graph.Gather(nn.StoredParam(ctx, g, "lm_head.weight"), rows)))
}

// LogitsGraph is T5ForConditionalGeneration.forward (teacher forcing):
// inputIDs, mask [B, L], decIDs [B, T] → logits [B, T, vocab] float32.
func (m *Model) LogitsGraph(ctx *context.Context, inputIDs, mask, decIDs *graph.Node) *graph.Node {
	enc := m.EncoderGraph(ctx, inputIDs, mask)
	return m.lmHead(ctx, m.DecoderGraph(ctx, decIDs, enc, mask))
}

// labelLogProbs returns log p(label) [B, T] from logits [B, T, V] and labels
// [B, T] (IgnoreIndex positions read index 0) and the valid mask [B, T] float32.
func labelLogProbs(logits, labels *graph.Node) (logp, valid *graph.Node) {
	g := logits.Graph()
	dims := labels.Shape().Dimensions
	B, T := dims[0], dims[1]
	lab := graph.ConvertDType(labels, dtypes.Int32)
	isValid := graph.NotEqual(lab, graph.Scalar(g, dtypes.Int32, IgnoreIndex))
	safe := graph.Where(isValid, lab, graph.ZerosLike(lab))
	shape := shapes.Make(dtypes.Int32, B, T, 1)
	idx := graph.Concatenate([]*graph.Node{graph.Iota(g, shape, 0), graph.Iota(g, shape, 1), graph.ExpandAxes(safe, -1)}, -1)
	lp := graph.Gather(graph.LogSoftmax(logits, -1), idx) // [B, T]
	valid = graph.ConvertDType(isValid, dtypes.Float32)
	return graph.Mul(lp, valid), valid
}

// LossGraph is HF's T5 loss: CrossEntropyLoss(ignore_index=-100) with mean
// reduction, i.e. the natural-log NLL summed over all non-ignored label
// positions of the batch divided by their count (not a per-sequence mean).
// logits [B, T, V] float, labels [B, T] int → scalar float32. A batch with no
// valid label gives 0 (HF gives NaN).
func LossGraph(logits, labels *graph.Node) *graph.Node {
	lp, valid := labelLogProbs(logits, labels)
	return graph.Div(graph.Neg(graph.ReduceAllSum(lp)), graph.MaxScalar(graph.ReduceAllSum(valid), 1))
}

// SmoothedLossGraph is LossGraph with label smoothing eps in [0, 1), as HF
// Trainer's LabelSmoother (label_smoothing_factor): (1−eps)·NLL + eps·the
// mean over the V vocabulary entries of −log p, both averaged over the
// non-ignored label positions. eps 0 is LossGraph exactly. logits [B, T, V]
// float, labels [B, T] int → scalar float32; a batch with no valid label
// gives 0.
func SmoothedLossGraph(logits, labels *graph.Node, eps float64) *graph.Node {
	if eps == 0 {
		return LossGraph(logits, labels)
	}
	lp, valid := labelLogProbs(logits, labels)
	V := logits.Shape().Dimensions[2]
	// Σ_v log p(v) per position [B, T], kept only at valid positions.
	all := graph.Mul(graph.ReduceSum(graph.LogSoftmax(logits, -1), -1), valid)
	n := graph.MaxScalar(graph.ReduceAllSum(valid), 1)
	nll := graph.Div(graph.Neg(graph.ReduceAllSum(lp)), n)
	smooth := graph.Div(graph.Neg(graph.ReduceAllSum(all)), graph.MulScalar(n, float64(V)))
	return graph.Add(graph.MulScalar(nll, 1-eps), graph.MulScalar(smooth, eps))
}

// ShiftRight is HF T5PreTrainedModel._shift_right: each row becomes
// [decoderStart, labels[:-1]...] with IgnoreIndex (-100) replaced by pad.
func ShiftRight(labels [][]int, decoderStart, pad int) [][]int {
	out := make([][]int, len(labels))
	for i, row := range labels {
		r := make([]int, len(row))
		if len(r) > 0 {
			r[0] = decoderStart
		}
		for j := 1; j < len(row); j++ {
			r[j] = row[j-1]
			if r[j] == IgnoreIndex {
				r[j] = pad
			}
		}
		out[i] = r
	}
	return out
}
