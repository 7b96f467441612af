package hook

import (
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Comparisons and Where, the rest of a dropout mask (u ≤ rate, then a
// select) over tensors as large as the attention probabilities.

var compareOpTypes = []backends.OpType{
	backends.OpTypeGreaterThan, backends.OpTypeGreaterOrEqual, backends.OpTypeLessThan, backends.OpTypeLessOrEqual,
}

// execCompare handles float32 operands of the output's shape or of size 1
// (simplego's gen_exec_binary.go loops, which compare with Go's operators,
// so a NaN compares false); other cases go to simplego.
func execCompare(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	op := opOf(node)
	outShape := field[shapes.Shape](unsafe.Pointer(node), nodeShape)
	ls, rs := shapeOfBuf(inputs[0]), shapeOfBuf(inputs[1])
	n := outShape.Size()
	if ls.DType != dtypes.Float32 || rs.DType != dtypes.Float32 || !parallelEnabled(n) ||
		(ls.Size() != n && ls.Size() != 1) || (rs.Size() != n && rs.Size() != 1) {
		return nativeOps[op](b, node, inputs, owned)
	}
	out := getBufferForShape(b, outShape)
	l, r := flat32(inputs[0]), flat32(inputs[1])
	o := field[any](unsafe.Pointer(out), bufFlat).([]bool)
	lStep, rStep := stepOf(len(l), n), stepOf(len(r), n)
	parallelFor(n, n, func(lo, hi int) { compare32(op, o[lo:hi], l, lo*lStep, lStep, r, lo*rStep, rStep) })
	return out, nil
}

// stepOf is 1 for an operand read element by element, 0 for a size-1 one.
func stepOf(size, n int) int {
	if size == n {
		return 1
	}
	return 0
}

func compare32(op backends.OpType, out []bool, l []float32, li, ls int, r []float32, ri, rs int) {
	switch op {
	case backends.OpTypeGreaterThan:
		for i := range out {
			out[i] = l[li] > r[ri]
			li, ri = li+ls, ri+rs
		}
	case backends.OpTypeGreaterOrEqual:
		for i := range out {
			out[i] = l[li] >= r[ri]
			li, ri = li+ls, ri+rs
		}
	case backends.OpTypeLessThan:
		for i := range out {
			out[i] = l[li] < r[ri]
			li, ri = li+ls, ri+rs
		}
	case backends.OpTypeLessOrEqual:
		for i := range out {
			out[i] = l[li] <= r[ri]
			li, ri = li+ls, ri+rs
		}
	default:
		panic("hook: no parallel kernel for " + op.String())
	}
}

// execWhere handles a bool condition of the output's shape with float32
// branches of the output's shape or scalars; the output reuses an owned
// branch as simplego's execWhere does (onTrue first). A scalar condition and
// other dtypes go to simplego.
func execWhere(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	outShape := field[shapes.Shape](unsafe.Pointer(node), nodeShape)
	cond, onTrue, onFalse := inputs[0], inputs[1], inputs[2]
	cs, ts, fs := shapeOfBuf(cond), shapeOfBuf(onTrue), shapeOfBuf(onFalse)
	n := outShape.Size()
	c, ok := field[any](unsafe.Pointer(cond), bufFlat).([]bool)
	if !ok || outShape.DType != dtypes.Float32 || ts.DType != dtypes.Float32 || fs.DType != dtypes.Float32 ||
		cs.IsScalar() || len(c) != n || !parallelEnabled(n) ||
		!(ts.IsScalar() || ts.Equal(outShape)) || !(fs.IsScalar() || fs.Equal(outShape)) {
		return nativeOps[backends.OpTypeWhere](b, node, inputs, owned)
	}
	var out *simplego.Buffer
	switch {
	case ts.Equal(outShape) && owned[1]:
		out, inputs[1] = onTrue, nil
	case fs.Equal(outShape) && owned[2]:
		out, inputs[2] = onFalse, nil
	default:
		out = getBufferForShape(b, outShape)
	}
	t, f, o := flat32(onTrue), flat32(onFalse), flat32(out)
	tStep, fStep := stepOf(len(t), n), stepOf(len(f), n)
	parallelFor(n, n, func(lo, hi int) {
		ti, fi := lo*tStep, lo*fStep
		for i := lo; i < hi; i++ {
			if c[i] {
				o[i] = t[ti]
			} else {
				o[i] = f[fi]
			}
			ti, fi = ti+tStep, fi+fStep
		}
	})
	return out, nil
}
