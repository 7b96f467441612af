package hook

import (
	"math"
	"slices"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// execBinary handles float32 operands of the output's rank whose every axis
// is the output's or 1 (implicit broadcasting, as simplego allows), and
// scalars; other cases go to simplego. The output reuses an owned operand of
// the output's shape, the right one first, as simplego's
// binaryOperandsAndOutput does.
func execBinary(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	op := opOf(node)
	outShape := field[shapes.Shape](unsafe.Pointer(node), nodeShape)
	lhs, rhs := inputs[0], inputs[1]
	ls, rs := shapeOfBuf(lhs), shapeOfBuf(rhs)
	if outShape.DType != dtypes.Float32 || ls.DType != dtypes.Float32 || rs.DType != dtypes.Float32 ||
		!parallelEnabled(outShape.Size()) || !broadcastable(ls, outShape) || !broadcastable(rs, outShape) {
		return nativeOps[op](b, node, inputs, owned)
	}
	var out *simplego.Buffer
	switch {
	case owned[1] && rs.Equal(outShape):
		out, inputs[1] = rhs, nil
	case owned[0] && ls.Equal(outShape):
		out, inputs[0] = lhs, nil
	default:
		out = getBufferForShape(b, outShape)
	}
	l, r, o := flat32(lhs), flat32(rhs), flat32(out)
	if commutative[op] && ls.Size() == 1 && rs.Size() != 1 {
		// simplego swaps so that the scalar is on the right: x op c.
		l, r, ls, rs = r, l, rs, ls
	}
	dims := outShape.Dimensions
	inner := 1
	if len(dims) > 0 {
		inner = dims[len(dims)-1]
	}
	if inner == 0 {
		return out, nil
	}
	lInner, rInner := innerStep(ls, outShape), innerStep(rs, outShape)
	if flatOperand(ls, outShape) && flatOperand(rs, outShape) {
		// No axis broadcast: the whole tensor is one row, split in blocks,
		// with no per-row work (rows of d_kv = 16 floats made that count).
		parallelFor(len(o), len(o), func(lo, hi int) {
			binaryRow(op, o[lo:hi], l, lo*lInner, lInner, r, lo*rInner, rInner)
		})
		return out, nil
	}
	st := [][]int{broadcastStrides(ls, outShape), broadcastStrides(rs, outShape)}
	rows := len(o) / inner
	// Split by whole rows of the last axis: each row is one loop with each
	// operand either contiguous or constant.
	parallelFor(rows, len(o), func(lo, hi int) {
		walkRows(lo, hi, dims, st, func(row int, off []int) {
			binaryRow(op, o[row*inner:(row+1)*inner], l, off[0], lInner, r, off[1], rInner)
		})
	})
	return out, nil
}

// flatOperand reports whether s is read as a flat run along the output: a
// scalar (size 1) or the output's own dimensions.
func flatOperand(s, out shapes.Shape) bool {
	return s.Size() == 1 || slices.Equal(s.Dimensions, out.Dimensions)
}

// commutative ops are computed by simplego with a size-1 operand on the
// right; keeping that order keeps NaN payloads identical too.
var commutative = map[backends.OpType]bool{
	backends.OpTypeAdd: true, backends.OpTypeMul: true, backends.OpTypeMax: true, backends.OpTypeMin: true,
}

// broadcastable reports whether s broadcasts to out implicitly: a scalar
// (size 1), or the same rank with every axis equal or 1.
func broadcastable(s, out shapes.Shape) bool {
	if s.Size() == 1 {
		return true
	}
	if s.Rank() != out.Rank() {
		return false
	}
	for i, d := range s.Dimensions {
		if d != out.Dimensions[i] && d != 1 {
			return false
		}
	}
	return true
}

// broadcastStrides gives, per output axis, the operand's flat stride (0 on
// a broadcast axis or for a scalar).
func broadcastStrides(s, out shapes.Shape) []int {
	st := make([]int, out.Rank())
	if s.Size() == 1 {
		return st
	}
	step := 1
	for i := out.Rank() - 1; i >= 0; i-- {
		if s.Dimensions[i] != 1 {
			st[i] = step
		}
		step *= s.Dimensions[i]
	}
	return st
}

// innerStep is 1 when the operand runs along the output's last axis, 0 when
// it is constant along it.
func innerStep(s, out shapes.Shape) int {
	if s.Size() == 1 || out.Rank() == 0 || s.Dimensions[out.Rank()-1] == 1 {
		return 0
	}
	return 1
}

// rowOffset is the operand's flat offset of the first element of output row
// row (all axes but the last).
func rowOffset(row int, dims, strides []int) int {
	off := 0
	for ax := len(dims) - 2; ax >= 0 && row > 0; ax-- {
		off += (row % dims[ax]) * strides[ax]
		row /= dims[ax]
	}
	return off
}

// walkRows calls fn(row, off) for the output rows [lo, hi) of dims (every
// axis but the last), off[k] being the flat offset of the row's first
// element in operand k with per-axis strides st[k]. The offsets are carried
// from row to row like an odometer: rowOffset's divisions run once per
// block, not once per row.
func walkRows(lo, hi int, dims []int, st [][]int, fn func(row int, off []int)) {
	if lo >= hi {
		return
	}
	r := len(dims) - 1 // the row axes are 0 … r-1
	idx := make([]int, max(r, 0))
	off := make([]int, len(st))
	for k := range st {
		off[k] = rowOffset(lo, dims, st[k])
	}
	for ax, rem := r-1, lo; ax >= 0; ax-- {
		idx[ax] = rem % dims[ax]
		rem /= dims[ax]
	}
	for row := lo; ; {
		fn(row, off)
		if row++; row == hi {
			return
		}
		for ax := r - 1; ax >= 0; ax-- {
			idx[ax]++
			if idx[ax] < dims[ax] {
				for k := range st {
					off[k] += st[k][ax]
				}
				break
			}
			for k := range st {
				off[k] -= (dims[ax] - 1) * st[k][ax]
			}
			idx[ax] = 0
		}
	}
}

// binaryRow computes one output row; each operand is contiguous (step 1)
// or constant (step 0). The expressions are simplego v0.26's
// (gen_exec_binary.go) for float32.
func binaryRow(op backends.OpType, o, l []float32, lOff, lStep int, r []float32, rOff, rStep int) {
	n := len(o)
	switch {
	case lStep == 1 && rStep == 1:
		binarySlices(op, o, l[lOff:lOff+n], r[rOff:rOff+n])
	case lStep == 1:
		binaryScalarRight(op, o, l[lOff:lOff+n], r[rOff])
	case rStep == 1:
		binaryScalarLeft(op, o, l[lOff], r[rOff:rOff+n])
	default:
		binaryScalarRight(op, o[:1], l[lOff:lOff+1], r[rOff])
		for i := 1; i < n; i++ {
			o[i] = o[0]
		}
	}
}

func binarySlices(op backends.OpType, o, l, r []float32) {
	switch op {
	case backends.OpTypeAdd:
		for i := range o {
			o[i] = l[i] + r[i]
		}
	case backends.OpTypeSub:
		for i := range o {
			o[i] = l[i] - r[i]
		}
	case backends.OpTypeMul:
		for i := range o {
			o[i] = l[i] * r[i]
		}
	case backends.OpTypeDiv:
		for i := range o {
			o[i] = l[i] / r[i]
		}
	case backends.OpTypeMax:
		for i := range o {
			o[i] = max(l[i], r[i])
		}
	case backends.OpTypeMin:
		for i := range o {
			o[i] = min(l[i], r[i])
		}
	case backends.OpTypePow:
		for i := range o {
			o[i] = float32(math.Pow(float64(l[i]), float64(r[i])))
		}
	default:
		panic("hook: no parallel kernel for " + op.String())
	}
}

func binaryScalarRight(op backends.OpType, o, l []float32, c float32) {
	switch op {
	case backends.OpTypeAdd:
		for i, x := range l {
			o[i] = x + c
		}
	case backends.OpTypeSub:
		for i, x := range l {
			o[i] = x - c
		}
	case backends.OpTypeMul:
		for i, x := range l {
			o[i] = x * c
		}
	case backends.OpTypeDiv:
		for i, x := range l {
			o[i] = x / c
		}
	case backends.OpTypeMax:
		for i, x := range l {
			o[i] = max(x, c)
		}
	case backends.OpTypeMin:
		for i, x := range l {
			o[i] = min(x, c)
		}
	case backends.OpTypePow:
		for i, x := range l {
			o[i] = float32(math.Pow(float64(x), float64(c)))
		}
	default:
		panic("hook: no parallel kernel for " + op.String())
	}
}

func binaryScalarLeft(op backends.OpType, o []float32, c float32, r []float32) {
	switch op {
	case backends.OpTypeAdd:
		for i, x := range r {
			o[i] = c + x
		}
	case backends.OpTypeSub:
		for i, x := range r {
			o[i] = c - x
		}
	case backends.OpTypeMul:
		for i, x := range r {
			o[i] = c * x
		}
	case backends.OpTypeDiv:
		for i, x := range r {
			o[i] = c / x
		}
	case backends.OpTypeMax:
		for i, x := range r {
			o[i] = max(c, x)
		}
	case backends.OpTypeMin:
		for i, x := range r {
			o[i] = min(c, x)
		}
	case backends.OpTypePow:
		for i, x := range r {
			o[i] = float32(math.Pow(float64(c), float64(x)))
		}
	default:
		panic("hook: no parallel kernel for " + op.String())
	}
}
