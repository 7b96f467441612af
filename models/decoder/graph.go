package decoder

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/remat"
	"github.com/ragforge/ragforge/models/t5"
)

// maskValue is the additive bias of a blocked key: torch.finfo(float32).min,
// as HF's causal mask (applied once, so a fully masked row stays finite).
const maskValue = -math.MaxFloat32

// Linear is every projection of the model, nn.Linear by HF module name
// ("model.layers.0.self_attn.q_proj", "lm_head"): x [..., in] → [..., out] =
// x·Wᵀ (+ b when the config gives the module a bias). A tied lm_head reads
// model.embed_tokens.weight. When m.LoRA targets the module it adds PEFT's
// LoRA term scaling·(dropout(x)·Aᵀ)·Bᵀ with A = <module>.lora_A.weight
// [r, in] and B = <module>.lora_B.weight [out, r] (dropout only while
// ctx is training).
func (m *Model) Linear(ctx *context.Context, module string, x *graph.Node) *graph.Node {
	g := x.Graph()
	wName := module + ".weight"
	if module == "lm_head" && m.Config.TieWordEmbeddings {
		wName = "model.embed_tokens.weight"
	}
	y := nn.MatmulT(x, nn.Param(ctx, g, wName))
	if m.Config.hasBias(module) {
		y = graph.Add(y, graph.ExpandLeftToRank(nn.Param(ctx, g, module+".bias"), y.Rank()))
	}
	if l := m.LoRA; l != nil && l.Targets(module) {
		in := x
		if l.Dropout > 0 {
			in = nn.Dropout(ctx, x, l.Dropout)
		}
		a := nn.Param(ctx, g, module+".lora_A.weight")
		b := nn.Param(ctx, g, module+".lora_B.weight")
		y = graph.Add(y, graph.MulScalar(nn.MatmulT(nn.MatmulT(in, a), b), l.Scaling()))
	}
	return y
}

// invFreq is LlamaRotaryEmbedding's inv_freq buffer (default rope type),
// computed in float32 as HF does: 1 / theta^(float32(2j)/D), j < D/2.
func (c Config) invFreq() []float32 {
	D := c.HeadDim
	out := make([]float32, D/2)
	for j := range out {
		e := float32(2*j) / float32(D)
		out[j] = float32(1 / float64(float32(math.Pow(c.RopeTheta, float64(e)))))
	}
	return out
}

// rope returns cos and sin [B, L, 1, D] of the angles position·inv_freq,
// duplicated over both halves (HF emb = cat(freqs, freqs)); pos [B, L] int.
func (m *Model) rope(pos *graph.Node) (cos, sin *graph.Node) {
	g := pos.Graph()
	d := pos.Shape().Dimensions
	inv := graph.Reshape(graph.Const(g, m.Config.invFreq()), 1, 1, m.Config.HeadDim/2)
	angle := graph.Mul(graph.ExpandAxes(graph.ConvertDType(pos, dtypes.Float32), -1), inv) // [B, L, D/2]
	emb := graph.Concatenate([]*graph.Node{angle, angle}, -1)
	emb = graph.Reshape(emb, d[0], d[1], 1, m.Config.HeadDim)
	return graph.Cos(emb), graph.Sin(emb)
}

// applyRope is apply_rotary_pos_emb on x [B, L, heads, D]:
// x·cos + rotate_half(x)·sin, rotate_half(x) = cat(-x[D/2:], x[:D/2]).
func applyRope(x, cos, sin *graph.Node) *graph.Node {
	D := x.Shape().Dimensions[3]
	x1 := graph.Slice(x, graph.AxisRange(), graph.AxisRange(), graph.AxisRange(), graph.AxisRange(0, D/2))
	x2 := graph.Slice(x, graph.AxisRange(), graph.AxisRange(), graph.AxisRange(), graph.AxisRange(D/2, D))
	rot := graph.Concatenate([]*graph.Node{graph.Neg(x2), x1}, -1)
	return graph.Add(graph.Mul(x, cos), graph.Mul(rot, sin))
}

// qkv projects normed hidden states x [B, L, hidden] of layer prefix p
// ("model.layers.0.") to q [B, L, H, D] and k, v [B, KV, L, D] (the cache
// layout), with Qwen3's q_norm/k_norm before RoPE and RoPE on q and k.
func (m *Model) qkv(ctx *context.Context, p string, x, cos, sin *graph.Node) (q, k, v *graph.Node) {
	c := m.Config
	g := x.Graph()
	d := x.Shape().Dimensions
	B, L := d[0], d[1]
	q = graph.Reshape(m.Linear(ctx, p+"self_attn.q_proj", x), B, L, c.NumAttentionHeads, c.HeadDim)
	k = graph.Reshape(m.Linear(ctx, p+"self_attn.k_proj", x), B, L, c.NumKeyValueHeads, c.HeadDim)
	v = graph.Reshape(m.Linear(ctx, p+"self_attn.v_proj", x), B, L, c.NumKeyValueHeads, c.HeadDim)
	if c.Family().QKNorm {
		q = nn.RMSNorm(q, nn.Param(ctx, g, p+"self_attn.q_norm.weight"), c.RMSNormEps)
		k = nn.RMSNorm(k, nn.Param(ctx, g, p+"self_attn.k_norm.weight"), c.RMSNormEps)
	}
	q = applyRope(q, cos, sin)
	k = applyRope(k, cos, sin)
	return q, graph.Transpose(k, 1, 2), graph.Transpose(v, 1, 2)
}

// attend is eager attention with grouped-query heads: q [B, Lq, H, D], k, v
// [B, KV, Lk, D], bias [B, 1, 1, Lq, Lk] (0 or maskValue) → [B, Lq, H·D].
// Query head h reads kv head h // (H/KV) (repeat_kv = repeat_interleave):
// q is viewed as [B, KV, H/KV, Lq, D], so k and v are never repeated.
// Scores are q·kᵀ·D^-½ + bias, softmax over keys in float32.
func (m *Model) attend(ctx *context.Context, q, k, v, bias *graph.Node) *graph.Node {
	c := m.Config
	d := q.Shape().Dimensions
	B, Lq, H, D := d[0], d[1], d[2], d[3]
	KV := c.NumKeyValueHeads
	R := H / KV
	q5 := graph.TransposeAllAxes(graph.Reshape(q, B, Lq, KV, R, D), 0, 2, 3, 1, 4)  // [B, KV, R, Lq, D]
	scores := graph.DotGeneral(q5, []int{4}, []int{0, 1}, k, []int{3}, []int{0, 1}) // [B, KV, R, Lq, Lk]
	scores = graph.Add(graph.MulScalar(scores, 1/math.Sqrt(float64(D))), bias)
	w := graph.Softmax(scores, -1)
	out := graph.DotGeneral(w, []int{4}, []int{0, 1}, v, []int{2}, []int{0, 1}) // [B, KV, R, Lq, D]
	return graph.Reshape(graph.TransposeAllAxes(out, 0, 3, 1, 2, 4), B, Lq, H*D)
}

// mlp is LlamaMLP (SwiGLU): down_proj(silu(gate_proj(x)) · up_proj(x)).
func (m *Model) mlp(ctx *context.Context, p string, x *graph.Node) *graph.Node {
	gate := m.Linear(ctx, p+"mlp.gate_proj", x)
	silu := graph.Mul(gate, graph.Sigmoid(gate))
	return m.Linear(ctx, p+"mlp.down_proj", graph.Mul(silu, m.Linear(ctx, p+"mlp.up_proj", x)))
}

// embed looks up model.embed_tokens.weight rows (no scaling): ids [B, L] → [B, L, hidden].
func embed(ctx *context.Context, ids *graph.Node) *graph.Node {
	return nn.Lookup(nn.StoredParam(ctx, ids.Graph(), "model.embed_tokens.weight"), ids)
}

// causalPaddingBias is [B, 1, 1, L, L]: 0 where key ≤ query and
// mask[key] == 1, maskValue elsewhere. mask [B, L] any numeric dtype.
func causalPaddingBias(mask *graph.Node) *graph.Node {
	g := mask.Graph()
	d := mask.Shape().Dimensions
	B, L := d[0], d[1]
	qi := graph.Iota(g, shapes.Make(dtypes.Int32, B, L, L), 1)
	ki := graph.Iota(g, shapes.Make(dtypes.Int32, B, L, L), 2)
	real := graph.BroadcastToDims(graph.Reshape(graph.NotEqual(graph.ConvertDType(mask, dtypes.Int32), graph.ZerosLike(graph.ConvertDType(mask, dtypes.Int32))), B, 1, L), B, L, L)
	ok := graph.LogicalAnd(graph.LessOrEqual(ki, qi), real)
	bias := graph.Where(ok, graph.Scalar(g, dtypes.Float32, 0), graph.Scalar(g, dtypes.Float32, maskValue))
	return graph.Reshape(bias, B, 1, 1, L, L)
}

// HiddenGraph is LlamaModel.forward without cache: ids, mask, pos [B, L]
// (mask 1 real / 0 pad; pos the position_ids) → the final hidden states
// [B, L, hidden] after model.norm. keep, when non-nil, receives HF's
// hidden_states[0..num_hidden_layers-1]: the embeddings, then each
// layer's residual output before the last (that one is normed).
func (m *Model) HiddenGraph(ctx *context.Context, ids, mask, pos *graph.Node, keep *[]*graph.Node) *graph.Node {
	c := m.Config
	g := ids.Graph()
	h := embed(ctx, ids)
	cos, sin := m.rope(pos)
	bias := causalPaddingBias(mask)
	for i := range c.NumHiddenLayers {
		if keep != nil {
			*keep = append(*keep, h)
		}
		p := fmt.Sprintf("model.layers.%d.", i)
		h = remat.If(m.GradientCheckpointing, ctx, h, func(h *graph.Node) *graph.Node {
			x := nn.RMSNorm(h, nn.Param(ctx, g, p+"input_layernorm.weight"), c.RMSNormEps)
			q, k, v := m.qkv(ctx, p, x, cos, sin)
			h = graph.Add(h, m.Linear(ctx, p+"self_attn.o_proj", m.attend(ctx, q, k, v, bias)))
			x = nn.RMSNorm(h, nn.Param(ctx, g, p+"post_attention_layernorm.weight"), c.RMSNormEps)
			return graph.Add(h, m.mlp(ctx, p, x))
		})
	}
	return nn.RMSNorm(h, nn.Param(ctx, g, "model.norm.weight"), c.RMSNormEps)
}

// LogitsGraph is XForCausalLM.forward: ids, mask, pos [B, L] → logits
// [B, L, vocab] float32. For training graphs (train/trainer LossFn).
func (m *Model) LogitsGraph(ctx *context.Context, ids, mask, pos *graph.Node) *graph.Node {
	return m.Linear(ctx, "lm_head", m.HiddenGraph(ctx, ids, mask, pos, nil))
}

// LossGraph is the HF causal-LM loss: cross-entropy of logits[:, :-1]
// against labels[:, 1:] with ignore_index -100 (t5.IgnoreIndex), mean over
// the non-ignored tokens of the whole batch. ids, mask, pos, labels [B, L]
// → scalar float32 (0 when no label is valid). SFT on responses only
// labels prompt tokens -100.
func (m *Model) LossGraph(ctx *context.Context, ids, mask, pos, labels *graph.Node) *graph.Node {
	L := ids.Shape().Dimensions[1]
	h := m.HiddenGraph(ctx, ids, mask, pos, nil)
	h = graph.Slice(h, graph.AxisRange(), graph.AxisRange(0, L-1), graph.AxisRange())
	lab := graph.Slice(labels, graph.AxisRange(), graph.AxisRange(1, L))
	return t5.LossGraph(m.Linear(ctx, "lm_head", h), lab)
}

// targetLogProbsGraph returns log_softmax(logits at rows sel)[tgt] · valid
// [B, T] from hidden states h [B, L, hidden]; sel, tgt [B, T] int32 (the
// position whose logits predict the target, and the target id), valid
// [B, T] float32. Only the T selected positions go through lm_head, and the
// log-sum-exp and the target's logit are taken inside the graph: the host
// never sees a [B, L, vocab] tensor.
func (m *Model) targetLogProbsGraph(ctx *context.Context, h, sel, tgt, valid *graph.Node) *graph.Node {
	g := h.Graph()
	d := sel.Shape().Dimensions
	B, T := d[0], d[1]
	rowIdx := graph.Iota(g, shapes.Make(dtypes.Int32, B, T, 1), 0)
	colIdx := graph.Iota(g, shapes.Make(dtypes.Int32, B, T, 1), 1)
	hs := graph.Gather(h, graph.Concatenate([]*graph.Node{rowIdx, graph.ExpandAxes(sel, -1)}, -1)) // [B, T, hidden]
	logits := m.Linear(ctx, "lm_head", hs)                                                         // [B, T, V]
	mx := graph.StopGradient(graph.ReduceAndKeep(logits, graph.ReduceMax, -1))
	lse := graph.Add(graph.Log(graph.ReduceSum(graph.Exp(graph.Sub(logits, mx)), -1)), graph.Squeeze(mx, -1))
	tl := graph.Gather(logits, graph.Concatenate([]*graph.Node{rowIdx, colIdx, graph.ExpandAxes(tgt, -1)}, -1)) // [B, T]
	return graph.Mul(graph.Sub(tl, lse), valid)
}
