package hook

import (
	"reflect"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26's Slice gradient is a Pad of the incoming gradient, and the
// pure-Go backend has no Pad: any training graph that slices (the decoders'
// RoPE rotate_half, the causal-LM loss's shift) fails there with "op Pad
// not implemented". For unit strides the same gradient is the incoming one
// with zero blocks concatenated before and after the slice on each axis,
// which every backend runs. Strided slices, or a node whose parameters
// cannot be read, keep GoMLX's VJP.
func init() {
	if orig, ok := graph.VJPRegistration[graph.NodeTypeSlice]; ok {
		padSliceVJP = orig
		graph.VJPRegistration[graph.NodeTypeSlice] = sliceVJP
	}
}

// padSliceVJP is GoMLX's own Slice VJP (Pad), the fallback.
var padSliceVJP graph.VJP

// sliceParams reads a Slice node's starts, limits and strides, which
// GoMLX v0.26 keeps in unexported fields of its inputs (nodeInputsSlice);
// ok is false when that layout is not found.
func sliceParams(node *graph.Node) (starts, limits, strides []int, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	in := reflect.ValueOf(node).Elem().FieldByName("inputs")
	if !in.IsValid() || in.Kind() != reflect.Interface || in.IsNil() {
		return nil, nil, nil, false
	}
	p := in.Elem()
	if p.Kind() != reflect.Pointer || p.IsNil() {
		return nil, nil, nil, false
	}
	p = p.Elem()
	read := func(name string) ([]int, bool) {
		f := p.FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Slice {
			return nil, false
		}
		out := make([]int, f.Len())
		for i := range out {
			out[i] = int(f.Index(i).Int())
		}
		return out, true
	}
	var ok1, ok2, ok3 bool
	starts, ok1 = read("starts")
	limits, ok2 = read("limits")
	strides, ok3 = read("strides")
	return starts, limits, strides, ok1 && ok2 && ok3
}

// sliceVJP places the incoming gradient v at the slice's position inside
// zeros of the input's shape, one Concatenate per axis that was cut.
func sliceVJP(node *graph.Node, v []*graph.Node, outShape shapes.Shape) []*graph.Node {
	starts, limits, strides, ok := sliceParams(node)
	if !ok || len(node.Inputs()) != 1 {
		return padSliceVJP(node, v, outShape)
	}
	x := node.Inputs()[0]
	dims := x.Shape().Dimensions
	if len(starts) != len(dims) || len(limits) != len(dims) {
		return padSliceVJP(node, v, outShape)
	}
	for _, s := range strides {
		if s > 1 {
			return padSliceVJP(node, v, outShape)
		}
	}
	g := v[0]
	for ax := range dims {
		before, after := starts[ax], dims[ax]-limits[ax]
		if before == 0 && after == 0 {
			continue
		}
		zeros := func(n int) *graph.Node {
			s := g.Shape().Clone()
			s.Dimensions[ax] = n
			return graph.Zeros(g.Graph(), s)
		}
		var parts []*graph.Node
		if before > 0 {
			parts = append(parts, zeros(before))
		}
		parts = append(parts, g)
		if after > 0 {
			parts = append(parts, zeros(after))
		}
		g = graph.Concatenate(parts, ax)
	}
	return []*graph.Node{g}
}
