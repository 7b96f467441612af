// Package nn holds the GoMLX pieces ragforge's HF architectures share
// (models/t5, models/decoder, models/bert): variables named by HF parameter
// names, the dtype their weights are held in for inference (DType, HF's
// torch_dtype; widened to float32 where used, dtype.go), the
// nn.Linear product in the backend's preferred layout, RMSNorm, dropout, packing
// host batches into padded int32 tensors and cropping results back, and
// choosing a token from a row of logits (greedy or HF's sampling warpers).
package nn

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// ScopeOf splits an HF parameter name at its dots into a context (relative
// to ctx) and a variable name: "model.layers.0.mlp.up_proj.weight" is the
// variable "weight" in scope ctx/model/layers/0/mlp/up_proj, so that
// checkpoints map to variables one to one.
func ScopeOf(ctx *context.Context, hfName string) (*context.Context, string) {
	parts := strings.Split(hfName, ".")
	for _, p := range parts[:len(parts)-1] {
		ctx = ctx.In(p)
	}
	return ctx, parts[len(parts)-1]
}

// Param returns the value in graph g of the variable for an HF parameter
// name, looked up relative to ctx, as float32: a weight held in bfloat16 or
// float16 (DType) is converted here, at its use. It panics (graph-building
// time) when the variable is missing.
func Param(ctx *context.Context, g *graph.Graph, hfName string) *graph.Node {
	return Widen(StoredParam(ctx, g, hfName))
}

// StoredParam is Param in the dtype the weight is held in: for lookups
// (Gather of embedding rows) that convert only the rows they read, not the
// whole table.
func StoredParam(ctx *context.Context, g *graph.Graph, hfName string) *graph.Node {
	c, vn := ScopeOf(ctx, hfName)
	v := c.GetVariable(vn)
	if v == nil {
		panic(fmt.Errorf("variable %q missing in scope %q", vn, c.Scope()))
	}
	return v.ValueGraph(g)
}

// Lookup gathers rows ids [...] of the embedding table [V, d] held in any
// float dtype and returns them as float32 [..., d]: only the gathered rows
// are converted (bge-m3's 250,002-row table is never widened whole).
func Lookup(table, ids *graph.Node) *graph.Node {
	return Widen(graph.Gather(table, graph.ExpandAxes(graph.ConvertDType(ids, dtypes.Int32), -1)))
}

// ParamValues returns the float32 data and shape of the variable for an HF
// parameter name, looked up relative to ctx (on the host, outside graphs);
// a bfloat16 or float16 weight is widened exactly.
func ParamValues(ctx *context.Context, hfName string) ([]float32, []int, error) {
	c, vn := ScopeOf(ctx, hfName)
	v := c.GetVariable(vn)
	if v == nil {
		return nil, nil, fmt.Errorf("variable %q missing", hfName)
	}
	t, err := v.Value()
	if err != nil {
		return nil, nil, fmt.Errorf("variable %q: %w", hfName, err)
	}
	data, err := TensorFloat32(t)
	if err != nil {
		return nil, nil, fmt.Errorf("variable %q: %w", hfName, err)
	}
	return data, t.Shape().Dimensions, nil
}

// MatmulT is nn.Linear without bias: x [..., in] · wᵀ with w [out, in] →
// [..., out]. It is one 2-D DotGeneral [N, in]×[out, in] (N = product of
// the leading axes), the layout the pure-Go backend multiplies without
// re-laying out either operand.
func MatmulT(x, w *graph.Node) *graph.Node {
	d := x.Shape().Dimensions
	n := 1
	for _, v := range d[:len(d)-1] {
		n *= v
	}
	y := graph.DotGeneral(graph.Reshape(x, n, d[len(d)-1]), []int{1}, nil, w, []int{1}, nil)
	out := append(append([]int(nil), d[:len(d)-1]...), w.Shape().Dimensions[0])
	return graph.Reshape(y, out...)
}

// RMSNorm is T5LayerNorm / LlamaRMSNorm: w · x / sqrt(mean(x²) + eps) over
// the last axis, no mean subtraction, no bias, in x's dtype (float32).
// x [..., d], w [d].
func RMSNorm(x, w *graph.Node, eps float64) *graph.Node {
	variance := graph.ReduceAndKeep(graph.Square(x), graph.ReduceMean, -1)
	// x / sqrt(·) rather than x·rsqrt(·): GoMLX v0.26 has no gradient for Rsqrt.
	y := graph.Div(x, graph.Sqrt(graph.AddScalar(variance, eps)))
	return graph.Mul(y, graph.ExpandLeftToRank(w, x.Rank())) // w broadcast implicitly, read in place
}

// IntTensor packs rows v [B, ≤Lp] into an int32 tensor [B, Lp]; entries
// past a row's end are fill.
func IntTensor(v [][]int, Lp, fill int) *tensors.Tensor {
	B := len(v)
	out := make([]int32, B*Lp)
	for r, row := range v {
		for c := range Lp {
			x := fill
			if c < len(row) {
				x = row[c]
			}
			out[r*Lp+c] = int32(x)
		}
	}
	return tensors.FromFlatDataAndDimensions(out, B, Lp)
}

// CropAxis1 returns a float32 tensor t [B, Lp, rest...] cut to [B, L, rest...]
// (t itself when Lp == L).
func CropAxis1(t *tensors.Tensor, L int) (*tensors.Tensor, error) {
	dims := t.Shape().Dimensions
	if dims[1] == L {
		return t, nil
	}
	flat, err := tensors.CopyFlatData[float32](t)
	if err != nil {
		return nil, err
	}
	inner := 1
	for _, d := range dims[2:] {
		inner *= d
	}
	out := make([]float32, 0, dims[0]*L*inner)
	for b := range dims[0] {
		off := b * dims[1] * inner
		out = append(out, flat[off:off+L*inner]...)
	}
	return tensors.FromFlatDataAndDimensions(out, append([]int{dims[0], L}, dims[2:]...)...), nil
}
