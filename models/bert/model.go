package bert

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/remat"
)

// Pooling selects how a sequence embedding is read from last_hidden_state.
type Pooling string

const (
	// PoolCLS takes the [CLS] (position 0) hidden state, as DPR/MedCPT do.
	PoolCLS Pooling = "cls"
	// PoolMean averages the hidden states of real tokens (mask 1), as
	// sentence-transformers' mean pooling does.
	PoolMean Pooling = "mean"
)

// Valid reports whether p is PoolCLS or PoolMean.
func (p Pooling) Valid() bool { return p == PoolCLS || p == PoolMean }

// ErrDenseOnly is wrapped by ParsePooling's refusal of bge-m3's sparse and
// multi-vector modes.
var ErrDenseOnly = errors.New("bge-m3's sparse and colbert (multi-vector) modes are not supported, dense only")

// ParsePooling reads a pooling name ("cls" or "mean"). bge-m3's other output
// modes are refused by name (ErrDenseOnly): its sparse lexical weights and
// colbert multi-vector heads ship as PyTorch pickles (sparse_linear.pt,
// colbert_linear.pt) and ragforge runs the dense [CLS] embedding only.
func ParsePooling(s string) (Pooling, error) {
	switch p := Pooling(s); {
	case p.Valid():
		return p, nil
	case s == "sparse" || s == "colbert" || s == "multi-vector" || s == "multivector":
		return "", fmt.Errorf("pooling %q: %w (want cls or mean)", s, ErrDenseOnly)
	}
	return "", fmt.Errorf("pooling %q: want cls or mean", s)
}

// normEps is the L2-normalisation floor: x / max(‖x‖₂, 1e-12), as
// torch.nn.functional.normalize.
const normEps = 1e-12

// meanEps floors the token count in mean pooling (sentence-transformers'
// clamp(min=1e-9)), so an all-padding row gives 0 instead of NaN.
const meanEps = 1e-9

// param returns the value of the HF parameter hfName ("a.b.weight") read
// from ctx's scope a/b (relative to ctx) as float32 (a weight held in
// bfloat16 or float16 is converted here, at its use: nn.DType). It panics,
// as graph-building code does, when the variable does not exist or has
// another shape.
func param(ctx *context.Context, g *graph.Graph, hfName string, shape ...int) *graph.Node {
	return nn.Widen(storedParam(ctx, g, hfName, shape...))
}

// storedParam is param in the dtype the weight is held in, for embedding
// lookups that convert only the rows they gather (nn.Lookup).
func storedParam(ctx *context.Context, g *graph.Graph, hfName string, shape ...int) *graph.Node {
	scope, name := scopeAndName(hfName)
	c := ctx
	for _, part := range splitScope(scope) {
		c = c.In(part)
	}
	v := c.GetVariable(name)
	if v == nil {
		panic(fmt.Errorf("variable %q missing in scope %q", name, c.Scope()))
	}
	if dims := v.Shape().Dimensions; !slices.Equal(dims, shape) {
		panic(fmt.Errorf("variable %q: shape %v, want %v", hfName, dims, shape))
	}
	return v.ValueGraph(g)
}

func splitScope(scope string) []string {
	var parts []string
	start := 1
	for i := 1; i <= len(scope); i++ {
		if i == len(scope) || scope[i] == '/' {
			parts = append(parts, scope[start:i])
			start = i + 1
		}
	}
	return parts
}

// bcast gives y x's rank, adding leading axes of size 1: the binary op it
// feeds broadcasts them implicitly, which reads y in place instead of
// materialising a [B, L, H] copy (same values, bit for bit).
func bcast(y *graph.Node, dims []int) *graph.Node {
	if y.Rank() < len(dims) {
		y = graph.ExpandLeftToRank(y, len(dims))
	}
	return y
}

// dense is PyTorch nn.Linear: y = x·Wᵀ + b with W [out, in] and x [..., in]
// → [..., out].
func (m *Model) dense(ctx *context.Context, x *graph.Node, name string, out, in int) *graph.Node {
	g := x.Graph()
	w := param(ctx, g, name+".weight", out, in)
	b := param(ctx, g, name+".bias", out)
	y := graph.DotGeneral(x, []int{-1}, nil, w, []int{1}, nil)
	return graph.Add(y, bcast(b, y.Shape().Dimensions))
}

// layerNorm is nn.LayerNorm over the last axis: (x-μ)/sqrt(σ²+eps)·w + b,
// with the biased variance, eps = layer_norm_eps (1e-12 for BERT).
func (m *Model) layerNorm(ctx *context.Context, x *graph.Node, name string) *graph.Node {
	g := x.Graph()
	h := m.Config.HiddenSize
	w := param(ctx, g, name+".weight", h)
	b := param(ctx, g, name+".bias", h)
	mean := graph.ReduceAndKeep(x, graph.ReduceMean, -1)
	xc := graph.Sub(x, mean)
	variance := graph.ReduceAndKeep(graph.Square(xc), graph.ReduceMean, -1)
	// Div+Sqrt rather than Rsqrt: GoMLX v0.26 defines no gradient for Rsqrt.
	y := graph.Div(xc, graph.Sqrt(graph.AddScalar(variance, m.Config.LayerNormEps)))
	dims := y.Shape().Dimensions
	return graph.Add(graph.Mul(y, bcast(w, dims)), bcast(b, dims))
}

// geluErf is the exact GELU of HF ACT2FN["gelu"]: 0.5·x·(1 + erf(x/√2)).
func geluErf(x *graph.Node) *graph.Node {
	return graph.Mul(graph.MulScalar(x, 0.5), graph.OnePlus(graph.Erf(graph.MulScalar(x, 1/math.Sqrt2))))
}

// trace receives the named intermediates of the encoder (parity tests).
type trace func(name string, x *graph.Node)

// EncoderGraphTraced is EncoderGraph that also hands fn each named
// intermediate, in order: "embeddings", then "layer.{i}.attention_output"
// and "layer.{i}.output" per layer (the fixtures' intermediates.* names), so
// a sibling architecture's parity test checks the shared stack layer by layer.
func (m *Model) EncoderGraphTraced(ctx *context.Context, ids, mask, typeIDs *graph.Node, fn func(name string, x *graph.Node)) *graph.Node {
	return m.encoderGraph(ctx, ids, mask, typeIDs, fn)
}

// EncoderGraph builds BertModel's encoder and returns last_hidden_state
// [B, L, HiddenSize] (float32) for
//
//	ids     [B, L] integer token ids (< VocabSize);
//	mask    [B, L] attention mask, 1 = real token, 0 = padding (any numeric dtype);
//	typeIDs [B, L] token type ids (< TypeVocabSize), or nil for all zeros.
//
// It follows transformers' BertModel: embeddings = LayerNorm(word + position
// + token_type) with positions 0..L-1 (m.Arch.PositionIDs when set: XLM-R's
// come from ids); each layer is post-LN
// self-attention (scores scaled by 1/sqrt(head_dim), additive key mask
// (1-m)·float32_min) then a GELU(erf) feed-forward. Variables are read from
// ctx (scopes mirror HF names, see package doc) and must exist; pass m.Ctx or
// a context sharing its variables. When ctx.IsTraining(g), dropout with
// hidden_dropout_prob / attention_probs_dropout_prob is applied as in HF.
// It panics (graph-building convention) on shape errors or L >
// m.MaxLength().
func (m *Model) EncoderGraph(ctx *context.Context, ids, mask, typeIDs *graph.Node) *graph.Node {
	return m.encoderGraph(ctx, ids, mask, typeIDs, nil)
}

func (m *Model) encoderGraph(ctx *context.Context, ids, mask, typeIDs *graph.Node, tr trace) *graph.Node {
	c := m.Config
	if ids.Rank() != 2 || !mask.Shape().Equal(shapes.Make(mask.DType(), ids.Shape().Dimensions...)) {
		panic(fmt.Errorf("%s: EncoderGraph: ids %s and mask %s must both be [batch, length]", m.Arch.ModelType, ids.Shape(), mask.Shape()))
	}
	length := ids.Shape().Dimensions[1]
	if length > m.MaxLength() {
		panic(fmt.Errorf("%s: EncoderGraph: length %d exceeds %d (max_position_embeddings %d)", m.Arch.ModelType, length, m.MaxLength(), c.MaxPositionEmbeddings))
	}
	x := m.embeddings(ctx, ids, typeIDs)
	if tr != nil {
		tr("embeddings", x)
	}
	return m.stack(ctx, x, mask, tr)
}

// embeddings is LayerNorm(word + position + token_type) [B, L, H], then
// dropout when training; the position ids are m.Arch's (0..L-1 for BERT).
func (m *Model) embeddings(ctx *context.Context, ids, typeIDs *graph.Node) *graph.Node {
	c := m.Config
	g := ids.Graph()
	batch, length, h := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1], c.HiddenSize
	dims := []int{batch, length, h}
	// Rows are gathered in the weights' dtype and widened after (nn.Lookup).
	word := storedParam(ctx, g, "embeddings.word_embeddings.weight", c.VocabSize, h)
	x := nn.Lookup(word, ids)
	pos := storedParam(ctx, g, "embeddings.position_embeddings.weight", c.MaxPositionEmbeddings, h)
	if m.Arch.PositionIDs == nil {
		x = graph.Add(x, bcast(nn.Lookup(pos, graph.Iota(g, shapes.Make(dtypes.Int32, length), 0)), dims))
	} else {
		x = graph.Add(x, nn.Lookup(pos, m.Arch.PositionIDs(c, ids)))
	}
	tt := storedParam(ctx, g, "embeddings.token_type_embeddings.weight", c.TypeVocabSize, h)
	if typeIDs == nil {
		x = graph.Add(x, bcast(nn.Lookup(tt, graph.Zeros(g, shapes.Make(dtypes.Int32, 1))), dims))
	} else {
		x = graph.Add(x, nn.Lookup(tt, typeIDs))
	}
	x = m.layerNorm(ctx, x, "embeddings.LayerNorm")
	return nn.Dropout(ctx, x, c.HiddenDropoutProb)
}

// stack is the encoder block stack every BERT-family model shares: for each
// layer, post-LN self-attention then post-LN erf-GELU feed-forward, over
// x [B, L, H] with the key mask from mask [B, L]; it returns
// last_hidden_state [B, L, H].
func (m *Model) stack(ctx *context.Context, x, mask *graph.Node, tr trace) *graph.Node {
	c := m.Config
	dims := x.Shape().Dimensions
	batch, length, h := dims[0], dims[1], dims[2]

	// Additive key mask [B, 1, 1, L]: (1 - m) * float32_min (HF get_extended_attention_mask).
	maskF := graph.ConvertDType(mask, dtypes.Float32)
	keyBias := graph.MulScalar(graph.OneMinus(maskF), -math.MaxFloat32)
	keyBias = graph.Reshape(keyBias, batch, 1, 1, length)

	for i := 0; i < c.NumHiddenLayers; i++ {
		p := fmt.Sprintf("encoder.layer.%d.", i)
		x = remat.If(m.GradientCheckpointing, ctx, x, func(x *graph.Node) *graph.Node {
			attn := m.selfAttention(ctx, x, keyBias, p+"attention.self.")
			attn = nn.Dropout(ctx, m.dense(ctx, attn, p+"attention.output.dense", h, h), c.HiddenDropoutProb)
			x = m.layerNorm(ctx, graph.Add(x, attn), p+"attention.output.LayerNorm")
			if tr != nil {
				tr(fmt.Sprintf("layer.%d.attention_output", i), x)
			}
			ff := geluErf(m.dense(ctx, x, p+"intermediate.dense", c.IntermediateSize, h))
			ff = nn.Dropout(ctx, m.dense(ctx, ff, p+"output.dense", h, c.IntermediateSize), c.HiddenDropoutProb)
			return m.layerNorm(ctx, graph.Add(x, ff), p+"output.LayerNorm")
		})
		if tr != nil {
			tr(fmt.Sprintf("layer.%d.output", i), x)
		}
	}
	return x
}

// selfAttention is BertSelfAttention: x [B,L,H], keyBias [B,1,1,L] →
// context [B,L,H] (heads concatenated, before attention.output.dense).
func (m *Model) selfAttention(ctx *context.Context, x, keyBias *graph.Node, prefix string) *graph.Node {
	c := m.Config
	dims := x.Shape().Dimensions
	batch, length, h := dims[0], dims[1], dims[2]
	nh, hd := c.NumAttentionHeads, c.HeadDim()
	split := func(name string) *graph.Node {
		return graph.Reshape(m.dense(ctx, x, prefix+name, h, h), batch, length, nh, hd)
	}
	q, k, v := split("query"), split("key"), split("value")
	scores := graph.Einsum("bqhd,bkhd->bhqk", q, k)
	scores = graph.MulScalar(scores, 1/math.Sqrt(float64(hd)))
	scores = graph.Add(scores, keyBias) // [B, 1, 1, L] broadcast implicitly
	probs := nn.Dropout(ctx, graph.Softmax(scores, -1), c.AttentionProbsDropoutProb)
	out := graph.Einsum("bhqk,bkhd->bqhd", probs, v)
	return graph.Reshape(out, batch, length, h)
}

// PoolGraph reduces hidden [B, L, H] to [B, H]:
//
//	PoolCLS:  hidden[:, 0];
//	PoolMean: Σ_t m[t]·h[t] / max(Σ_t m[t], 1e-9), padding excluded
//	          (sentence-transformers mean pooling); mask [B, L] is required.
//
// With normalize, the result is divided by max(‖x‖₂, 1e-12)
// (torch.nn.functional.normalize). It panics on an unknown Pooling.
func PoolGraph(hidden, mask *graph.Node, p Pooling, normalize bool) *graph.Node {
	dims := hidden.Shape().Dimensions
	var out *graph.Node
	switch p {
	case PoolCLS:
		out = firstOf(hidden)
	case PoolMean:
		mf := graph.ConvertDType(mask, hidden.DType())
		sum := graph.ReduceSum(graph.Mul(hidden, graph.BroadcastToDims(graph.ExpandAxes(mf, -1), dims...)), 1)
		count := graph.MaxScalar(graph.ReduceAndKeep(mf, graph.ReduceSum, 1), meanEps)
		out = graph.Div(sum, graph.BroadcastToDims(count, dims[0], dims[2]))
	default:
		panic(fmt.Errorf("bert: PoolGraph: unknown pooling %q (want %q or %q)", p, PoolCLS, PoolMean))
	}
	if normalize {
		norm := graph.MaxScalar(graph.Sqrt(graph.ReduceAndKeep(graph.Square(out), graph.ReduceSum, -1)), normEps)
		out = graph.Div(out, graph.BroadcastToDims(norm, out.Shape().Dimensions...))
	}
	return out
}

// firstOf returns x[:, 0] for x [B, N, ...] → [B, ...]. It gathers rows
// instead of slicing because the gradient of Slice needs the Pad op, which
// the simplego backend lacks; Gather's gradient (ScatterSum) it has.
func firstOf(x *graph.Node) *graph.Node {
	dims := x.Shape().Dimensions
	flat := graph.Reshape(x, append([]int{dims[0] * dims[1]}, dims[2:]...)...)
	rowStarts := graph.MulScalar(graph.Iota(x.Graph(), shapes.Make(dtypes.Int32, dims[0], 1), 0), dims[1])
	return graph.Gather(flat, rowStarts)
}

// PoolerGraph is BertPooler: tanh(pooler.dense(hidden[:, 0])), hidden
// [B, L, H] → [B, H]. It panics if the model has no pooler.
func (m *Model) PoolerGraph(ctx *context.Context, hidden *graph.Node) *graph.Node {
	if !m.HasPooler {
		panic(fmt.Errorf("bert: PoolerGraph: model has no pooler (pooler.dense.* absent from checkpoint)"))
	}
	h := m.Config.HiddenSize
	cls := PoolGraph(hidden, nil, PoolCLS, false)
	return graph.Tanh(m.dense(ctx, cls, "pooler.dense", h, h))
}

// ClassifierGraph is BertForSequenceClassification's head:
// classifier(dropout(pooler(hidden))) (dropout only when training, rate
// ClassifierDropout()), hidden [B, L, H] → logits
// [B, NumLabels]. For a MedCPT-style cross-encoder (num_labels 1) the
// relevance score is logits[:, 0]. It panics if the model has no pooler or
// no classifier.
func (m *Model) ClassifierGraph(ctx *context.Context, hidden *graph.Node) *graph.Node {
	if !m.HasClassifier {
		panic(fmt.Errorf("bert: ClassifierGraph: model has no classifier (classifier.* absent from checkpoint)"))
	}
	pooled := nn.Dropout(ctx, m.PoolerGraph(ctx, hidden), m.Config.ClassifierDropout())
	return m.dense(ctx, pooled, "classifier", m.Config.NumLabels, m.Config.HiddenSize)
}
