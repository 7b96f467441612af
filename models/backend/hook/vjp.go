package hook

import (
	"reflect"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26 defines no gradient for Rsqrt, which the T5 RMS norm uses
// (models/t5 rmsNorm). Register d(x^-½)/dx = −½·x^-3/2 = −½·rsqrt(x)³
// through GoMLX's documented extension point, unless a later GoMLX has one.
//
// GoMLX v0.26's DotGeneral gradient multiplies the incoming gradient by the
// other operand with implicit broadcasting and then reduces, materialising
// a tensor of every (cross × cross × contracting) product: for a linear layer
// x [B, L, in]·Wᵀ it builds [B, L, out, in]. On the pure-Go backend that is
// ~100× slower than a matmul and dominated T5 training (see
// BenchmarkDotGeneralGradient). It is replaced by the textbook VJP written
// with two DotGenerals (the jax.lax.dot_general transpose rule).
//
// GoMLX v0.26's Where gradient selects between the incoming gradient and a
// tensor of zeros it broadcasts to the full shape (ZerosLike), one more pass
// over every dropout mask in the backward pass; whereVJP selects against a
// scalar zero, which Where takes as it is.
func init() {
	if _, ok := graph.VJPRegistration[graph.NodeTypeRsqrt]; !ok {
		graph.VJPRegistration[graph.NodeTypeRsqrt] = func(node *graph.Node, v []*graph.Node, _ shapes.Shape) []*graph.Node {
			cube := graph.Mul(node, graph.Square(node))
			return []*graph.Node{graph.Mul(v[0], graph.MulScalar(cube, -0.5))}
		}
	}
	if orig, ok := graph.VJPRegistration[graph.NodeTypeDotGeneral]; ok {
		broadcastDotGeneralVJP = orig
	}
	graph.VJPRegistration[graph.NodeTypeDotGeneral] = dotGeneralVJP
	if orig, ok := graph.VJPRegistration[graph.NodeTypeWhere]; ok {
		broadcastWhereVJP = orig
		graph.VJPRegistration[graph.NodeTypeWhere] = whereVJP
	}
}

// broadcastWhereVJP is GoMLX's own Where VJP: the fallback for branches
// broadcast other than from a scalar, and the tests' reference.
var broadcastWhereVJP graph.VJP

// whereVJP: the gradient of Where(c, a, b) is Where(c, v, 0) for a and
// Where(c, 0, v) for b, summed over all elements for a scalar branch.
func whereVJP(node *graph.Node, v []*graph.Node, outShape shapes.Shape) []*graph.Node {
	in := node.Inputs()
	cond, onTrue, onFalse := in[0], in[1], in[2]
	out := node.Shape()
	for _, b := range in[1:] {
		if !b.IsScalar() && !b.Shape().Equal(out) {
			return broadcastWhereVJP(node, v, outShape)
		}
	}
	zero := graph.ScalarZero(node.Graph(), v[0].DType())
	branch := func(x, grad *graph.Node) *graph.Node {
		if x.IsScalar() && !out.IsScalar() {
			return graph.ReduceAllSum(grad)
		}
		return grad
	}
	return []*graph.Node{
		nil, // the condition has no gradient
		branch(onTrue, graph.Where(cond, v[0], zero)),
		branch(onFalse, graph.Where(cond, zero, v[0])),
	}
}

// broadcastDotGeneralVJP is GoMLX's own DotGeneral VJP, kept as the fallback
// (and as the reference the tests compare against).
var broadcastDotGeneralVJP graph.VJP

// dotGeneralAxes reads the contracting and batch axes of a DotGeneral node.
// GoMLX v0.26 keeps them in unexported fields of the node's inputs
// (nodeInputsDotGeneral), so they are read by reflection; ok is false when
// that layout is not found (another GoMLX version), and callers fall back.
func dotGeneralAxes(node *graph.Node) (lc, lb, rc, rb []int, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	in := reflect.ValueOf(node).Elem().FieldByName("inputs")
	if !in.IsValid() || in.Kind() != reflect.Interface || in.IsNil() {
		return nil, nil, nil, nil, false
	}
	p := in.Elem()
	if p.Kind() != reflect.Pointer || p.IsNil() {
		return nil, nil, nil, nil, false
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
	var ok1, ok2, ok3, ok4 bool
	lc, ok1 = read("lhsContractingAxes")
	lb, ok2 = read("lhsBatchAxes")
	rc, ok3 = read("rhsContractingAxes")
	rb, ok4 = read("rhsBatchAxes")
	return lc, lb, rc, rb, ok1 && ok2 && ok3 && ok4 && len(lc) == len(rc) && len(lb) == len(rb)
}

func axisSeq(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// dotGeneralVJP: for out = DotGeneral(lhs, lc, lb, rhs, rc, rb) with output
// axes [batch..., lhs free..., rhs free...] and incoming gradient v,
//
//	∂lhs = v contracted with rhs over the rhs free axes  → [batch, lhs free, rc sorted]
//	∂rhs = lhs contracted with v over the lhs free axes  → [batch, lc sorted, rhs free]
//
// each one DotGeneral (operands ordered so that the result is already in
// the operand's axis order when possible) plus, otherwise, a transpose back
// to it. Falls back to GoMLX's VJP when the axes cannot be read.
func dotGeneralVJP(node *graph.Node, v []*graph.Node, outShape shapes.Shape) []*graph.Node {
	lc, lb, rc, rb, ok := dotGeneralAxes(node)
	if !ok || len(node.Inputs()) != 2 {
		return broadcastDotGeneralVJP(node, v, outShape)
	}
	lhs, rhs := node.Inputs()[0], node.Inputs()[1]
	g := v[0]
	lf := freeAxes(lhs.Rank(), lc, lb)
	rf := freeAxes(rhs.Rank(), rc, rb)
	nb := len(lb)
	vBatch := axisSeq(0, nb)
	vL := axisSeq(nb, len(lf))
	vR := axisSeq(nb+len(lf), len(rf))

	// ∂lhs = v·rhs contracted over the rhs free axes. DotGeneral(v, rhs)
	// yields [batch, lf..., sorted(rc)...], DotGeneral(rhs, v) yields
	// [batch, sorted(rc)..., lf...]: take the one already in lhs order when
	// there is one (no transpose copy).
	rcSorted := slices.Sorted(slices.Values(rc))
	permA := make([]int, lhs.Rank()) // from [batch, lf, rc sorted]
	permB := make([]int, lhs.Rank()) // from [batch, rc sorted, lf]
	for i, a := range lb {
		permA[a], permB[a] = i, i
	}
	for j, a := range lf {
		permA[a], permB[a] = nb+j, nb+len(rc)+j
	}
	for k, a := range lc {
		pos := slices.Index(rcSorted, rc[k])
		permA[a], permB[a] = nb+len(lf)+pos, nb+pos
	}
	var gl *graph.Node
	if isIdentity(permB) && !isIdentity(permA) {
		gl = graph.DotGeneral(rhs, rf, rb, g, vR, vBatch)
	} else {
		gl = transposeIfNeeded(graph.DotGeneral(g, vR, vBatch, rhs, rf, rb), permA)
	}

	// ∂rhs = lhsᵀ·v contracted over the lhs free axes: DotGeneral(lhs, v)
	// yields [batch, sorted(lc)..., rf...], DotGeneral(v, lhs) yields
	// [batch, rf..., sorted(lc)...].
	lcSorted := slices.Sorted(slices.Values(lc))
	permA = make([]int, rhs.Rank()) // from [batch, lc sorted, rf]
	permB = make([]int, rhs.Rank()) // from [batch, rf, lc sorted]
	for i, a := range rb {
		permA[a], permB[a] = i, i
	}
	for k, a := range rc {
		pos := slices.Index(lcSorted, lc[k])
		permA[a], permB[a] = nb+pos, nb+len(rf)+pos
	}
	for j, a := range rf {
		permA[a], permB[a] = nb+len(lc)+j, nb+j
	}
	var gr *graph.Node
	if isIdentity(permB) && !isIdentity(permA) {
		gr = graph.DotGeneral(g, vL, vBatch, lhs, lf, lb)
	} else {
		gr = transposeIfNeeded(graph.DotGeneral(lhs, lf, lb, g, vL, vBatch), permA)
	}
	return []*graph.Node{gl, gr}
}

func transposeIfNeeded(x *graph.Node, perm []int) *graph.Node {
	if isIdentity(perm) {
		return x
	}
	return graph.TransposeAllAxes(x, perm...)
}
