// DotGeneral on OpenBLAS: simplego's executor signature, operands read in
// place when they are [batch, rows, cols] or evenly strided views of it
// (heads inside [B, L, H, d]), else transposed once, and cblas_sgemm /
// cblas_dgemm called; any other dtype goes to simplego's own executor.

package hook

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

var paramsLayouts sync.Map // reflect.Type of node data -> *paramsLayout (nil when unusable)

// fieldOffset returns the offset of an unexported field after checking its
// type, so a changed layout is detected instead of misread.
func fieldOffset(t reflect.Type, name string, want reflect.Type) (uintptr, error) {
	f, ok := t.FieldByName(name)
	if !ok {
		return 0, fmt.Errorf("%s has no field %q", t, name)
	}
	if f.Type != want {
		return 0, fmt.Errorf("%s.%s is %s, want %s", t, name, f.Type, want)
	}
	return f.Offset, nil
}

// paramsLayout locates simplego's dotGeneralNodeData fields.
type paramsLayout struct {
	lhsContracting, lhsBatch, rhsContracting, rhsBatch uintptr
	batch, lhsCross, rhsCross, contracting             uintptr
}

// dotParams are the DotGeneral attributes: axes of the original operands and
// the normalized sizes of the [batch, lhsCross, rhsCross] output.
type dotParams struct {
	lhsContracting, lhsBatch, rhsContracting, rhsBatch []int
	batch, lhsCross, rhsCross, contracting             int
}

func layoutOf(t reflect.Type) *paramsLayout {
	if v, ok := paramsLayouts.Load(t); ok {
		return v.(*paramsLayout)
	}
	var l *paramsLayout
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		s := t.Elem()
		ints, slice := reflect.TypeFor[int](), reflect.TypeFor[[]int]()
		l = &paramsLayout{}
		for _, f := range []struct {
			name string
			typ  reflect.Type
			dst  *uintptr
		}{
			{"lhsContractingAxes", slice, &l.lhsContracting}, {"lhsBatchAxes", slice, &l.lhsBatch},
			{"rhsContractingAxes", slice, &l.rhsContracting}, {"rhsBatchAxes", slice, &l.rhsBatch},
			{"batchSize", ints, &l.batch}, {"lhsCrossSize", ints, &l.lhsCross},
			{"rhsCrossSize", ints, &l.rhsCross}, {"contractingSize", ints, &l.contracting},
		} {
			off, err := fieldOffset(s, f.name, f.typ)
			if err != nil {
				l = nil
				break
			}
			*f.dst = off
		}
	}
	paramsLayouts.Store(t, l)
	return l
}

func field[T any](p unsafe.Pointer, off uintptr) T { return *(*T)(unsafe.Add(p, off)) }

func paramsOf(node *simplego.Node) (dotParams, bool) {
	data := field[any](unsafe.Pointer(node), nodeData)
	if data == nil {
		return dotParams{}, false
	}
	l := layoutOf(reflect.TypeOf(data))
	if l == nil {
		return dotParams{}, false
	}
	p := reflect.ValueOf(data).UnsafePointer()
	return dotParams{
		lhsContracting: field[[]int](p, l.lhsContracting), lhsBatch: field[[]int](p, l.lhsBatch),
		rhsContracting: field[[]int](p, l.rhsContracting), rhsBatch: field[[]int](p, l.rhsBatch),
		batch: field[int](p, l.batch), lhsCross: field[int](p, l.lhsCross),
		rhsCross: field[int](p, l.rhsCross), contracting: field[int](p, l.contracting),
	}, true
}

// execDotGeneral has simplego's executor signature. Its output is the
// normalized [batch, lhsCross, rhsCross] tensor simplego's DotGeneral node
// produces (the builder reshapes it afterwards), row-major.
func execDotGeneral(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	if !enabled.Load() {
		return native(b, node, inputs, owned)
	}
	p, ok := paramsOf(node)
	if !ok {
		return native(b, node, inputs, owned)
	}
	lhs, rhs := inputs[0], inputs[1]
	ls := field[shapes.Shape](unsafe.Pointer(lhs), bufShape)
	rs := field[shapes.Shape](unsafe.Pointer(rhs), bufShape)
	out := field[shapes.Shape](unsafe.Pointer(node), nodeShape)
	if ls.DType != rs.DType || out.DType != ls.DType || out.Rank() != 3 ||
		out.Dimensions[0] != p.batch || out.Dimensions[1] != p.lhsCross || out.Dimensions[2] != p.rhsCross {
		return native(b, node, inputs, owned)
	}
	lflat := field[any](unsafe.Pointer(lhs), bufFlat)
	rflat := field[any](unsafe.Pointer(rhs), bufFlat)
	switch ls.DType {
	case dtypes.Float32:
		buf := getBufferForShape(b, out)
		dot(p, ls.Dimensions, lflat.([]float32), rs.Dimensions, rflat.([]float32),
			field[any](unsafe.Pointer(buf), bufFlat).([]float32), sgemm)
		return buf, nil
	case dtypes.Float64:
		buf := getBufferForShape(b, out)
		dot(p, ls.Dimensions, lflat.([]float64), rs.Dimensions, rflat.([]float64),
			field[any](unsafe.Pointer(buf), bufFlat).([]float64), dgemm)
		return buf, nil
	}
	return native(b, node, inputs, owned)
}

type gemmFunc[T float32 | float64] func(batch, m, n, k int, a []T, oa operand, b []T, ob operand, c []T)

// dot computes out[b, i, j] = Σ_k lhs[b, i, k]·rhs[b, j, k] over the
// normalized views of the operands (XLA DotGeneral semantics: batch axes in
// the order given, then the lhs free axes, then the rhs free axes, each in
// increasing axis order).
//
// An operand already laid out as [batch, rows, cols] is used as it is. Any
// other layout whose free axes and contracting axes each form one evenly
// strided run, one of them with unit stride, is used in place too (gemm's
// leading dimension skips the other axes, each batch matrix starts at its
// own offset): that covers the attention products of models whose heads
// stay inside [B, L, H, d] (Einsum "bqhd,bkhd->bhqk"). Only the rest is
// transposed into a fresh [batch, rows, cols] copy first.
func dot[T float32 | float64](p dotParams, ldims []int, lhs []T, rdims []int, rhs []T, out []T, gemm gemmFunc[T]) {
	m, n, k := p.lhsCross, p.rhsCross, p.contracting
	lcross := freeAxes(len(ldims), p.lhsContracting, p.lhsBatch)
	rcross := freeAxes(len(rdims), p.rhsContracting, p.rhsBatch)

	// op(A) must be m×k: stored as [m, k], or as [k, m] used transposed.
	var a []T
	var oa operand
	switch {
	case isIdentity(p.lhsBatch, lcross, p.lhsContracting):
		a, oa = lhs, operand{rows: m, cols: k, ld: k}
	case isIdentity(p.lhsBatch, p.lhsContracting, lcross):
		a, oa = lhs, operand{trans: true, rows: k, cols: m, ld: m}
	default:
		var ok bool
		if oa, ok = stridedOperand(ldims, p.lhsBatch, lcross, p.lhsContracting, m, k); ok {
			a = lhs
			break
		}
		a, oa = transpose(lhs, ldims, concat(p.lhsBatch, lcross, p.lhsContracting)), operand{rows: m, cols: k, ld: k}
	}
	// op(B) must be k×n: stored as [k, n], or as [n, k] used transposed.
	var bb []T
	var ob operand
	switch {
	case isIdentity(p.rhsBatch, p.rhsContracting, rcross):
		bb, ob = rhs, operand{rows: k, cols: n, ld: n}
	case isIdentity(p.rhsBatch, rcross, p.rhsContracting):
		bb, ob = rhs, operand{trans: true, rows: n, cols: k, ld: k}
	default:
		var ok bool
		if ob, ok = stridedOperand(rdims, p.rhsBatch, rcross, p.rhsContracting, n, k); ok {
			// stridedOperand describes op(B)ᵀ (n×k, like op(A)'s m×k):
			// flip it to the k×n view gemm wants.
			ob.trans = !ob.trans
			bb = rhs
			break
		}
		bb, ob = transpose(rhs, rdims, concat(p.rhsBatch, rcross, p.rhsContracting)), operand{trans: true, rows: n, cols: k, ld: k}
	}
	gemm(p.batch, m, n, k, a, oa, bb, ob, out)
}

// stridedOn lets tests force the transposing path, to compare the two.
var stridedOn = true

// stridedOperand describes an operand of row-major dims, used in place, as
// the rows×k matrix op(X) of each batch (rows = product of the cross axes,
// in increasing order; k = product of the contracting axes, in the order
// given): no copy when the cross axes and the contracting axes each form
// one evenly strided run and one of the two runs has unit stride. ok is
// false otherwise.
func stridedOperand(dims, batch, cross, contracting []int, rows, k int) (operand, bool) {
	if !stridedOn {
		return operand{}, false
	}
	st := make([]int, len(dims))
	s := 1
	for i := len(dims) - 1; i >= 0; i-- {
		st[i] = s
		s *= dims[i]
	}
	cs, okC := runStride(dims, st, cross)
	ks, okK := runStride(dims, st, contracting)
	if !okC || !okK {
		return operand{}, false
	}
	var o operand
	switch {
	case (ks == 1 || k == 1) && (rows == 1 || cs >= k):
		// Stored as rows×k with leading dimension cs.
		o = operand{rows: rows, cols: k, ld: max(cs, k, 1)}
		if rows == 1 {
			o.ld = max(k, 1)
		}
	case (cs == 1 || rows == 1) && (k == 1 || ks >= rows):
		// Stored as k×rows, used transposed.
		o = operand{trans: true, rows: k, cols: rows, ld: max(ks, rows, 1)}
		if k == 1 {
			o.ld = max(rows, 1)
		}
	default:
		return operand{}, false
	}
	// Start of each batch matrix: the batch axes in the order given.
	nb := 1
	for _, a := range batch {
		nb *= dims[a]
	}
	o.offs = make([]int, nb)
	idx := make([]int, len(batch))
	for i := range nb {
		off := 0
		for j, a := range batch {
			off += idx[j] * st[a]
		}
		o.offs[i] = off
		for j := len(batch) - 1; j >= 0; j-- {
			idx[j]++
			if idx[j] < dims[batch[j]] {
				break
			}
			idx[j] = 0
		}
	}
	return o, true
}

// runStride reports whether axes (size-1 axes ignored) index memory as one
// run of evenly spaced elements, and that spacing (1 for no axis).
func runStride(dims, st, axes []int) (int, bool) {
	stride, prev := 1, -1
	for _, a := range axes {
		if dims[a] == 1 {
			continue
		}
		if prev >= 0 && st[prev] != st[a]*dims[a] {
			return 0, false
		}
		prev, stride = a, st[a]
	}
	return stride, true
}

// freeAxes lists, in increasing order, the axes that are neither contracting
// nor batch.
func freeAxes(rank int, contracting, batch []int) []int {
	used := make([]bool, rank)
	for _, a := range contracting {
		used[a] = true
	}
	for _, a := range batch {
		used[a] = true
	}
	var free []int
	for a := range rank {
		if !used[a] {
			free = append(free, a)
		}
	}
	return free
}

func concat(parts ...[]int) []int {
	var out []int
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// isIdentity reports whether the axes, concatenated, are 0, 1, 2, ….
func isIdentity(parts ...[]int) bool {
	i := 0
	for _, p := range parts {
		for _, a := range p {
			if a != i {
				return false
			}
			i++
		}
	}
	return true
}

// transpose returns src (row-major, dims) with its axes permuted: axis i of
// the result is axis perm[i] of src.
func transpose[T any](src []T, dims, perm []int) []T {
	r := len(dims)
	dst := make([]T, len(src))
	if r == 0 || len(src) == 0 {
		copy(dst, src)
		return dst
	}
	strides := make([]int, r)
	s := 1
	for i := r - 1; i >= 0; i-- {
		strides[i] = s
		s *= dims[i]
	}
	nd, ns := make([]int, r), make([]int, r)
	for i, a := range perm {
		nd[i], ns[i] = dims[a], strides[a]
	}
	idx := make([]int, r)
	inner, innerStride := nd[r-1], ns[r-1]
	off := 0
	for d := 0; d < len(dst); d += inner {
		o := off
		for j := range inner {
			dst[d+j] = src[o]
			o += innerStride
		}
		for ax := r - 2; ax >= 0; ax-- {
			idx[ax]++
			off += ns[ax]
			if idx[ax] < nd[ax] {
				break
			}
			off -= ns[ax] * nd[ax]
			idx[ax] = 0
		}
	}
	return dst
}
