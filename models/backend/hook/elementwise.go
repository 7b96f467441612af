// Element-wise ops across all cores. GoMLX v0.26's simplego runs them in one
// goroutine (its own parallel scheduling deadlocks on 2 cores, see
// models/backend.DefaultGoOptions), and with matrix products on OpenBLAS they
// take most of a training step. For float32 tensors of at least
// parallelMin elements, the executors below split the output into one
// contiguous block per core, each computed by its own goroutine (never
// waiting on simplego's worker pool, so they cannot deadlock). Every
// element is computed with exactly simplego's expression (the same float64
// round trip for transcendental functions, the same accumulation order for
// reductions), so results are bit-identical to simplego's whatever the split
// (a NaN may differ in sign and payload); TestElementwiseBitIdentical checks
// it against simplego's own executors. Smaller tensors, other dtypes and
// operands of different ranks go to simplego's executor.

package hook

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// parallelMin is the size from which an op is split across cores: below it
// the goroutine hand-off costs more than it saves.
const parallelMin = 1 << 15

// EnvVarParallel turns the multi-core element-wise executors off when set to
// "off" (simplego's single-threaded ones then run).
const EnvVarParallel = "RAGFORGE_PARALLEL_OPS"

var (
	parallelOn  atomic.Bool
	nativeOps   [backends.OpTypeLast]executor // simplego's executors that the parallel ones replace
	parallelOps = map[backends.OpType]bool{}  // the op types installed
)

var unaryOpTypes = []backends.OpType{
	backends.OpTypeNeg, backends.OpTypeAbs, backends.OpTypeExp, backends.OpTypeLog,
	backends.OpTypeSqrt, backends.OpTypeRsqrt, backends.OpTypeTanh, backends.OpTypeLogistic, backends.OpTypeErf,
}

var binaryOpTypes = []backends.OpType{
	backends.OpTypeAdd, backends.OpTypeSub, backends.OpTypeMul, backends.OpTypeDiv,
	backends.OpTypeMax, backends.OpTypeMin, backends.OpTypePow,
}

// installParallel puts the parallel executors in simplego's table; called
// from init after the layout checks passed.
func installParallel() {
	installLayoutOps()
	for _, op := range unaryOpTypes {
		installOp(op, execUnary)
	}
	for _, op := range binaryOpTypes {
		installOp(op, execBinary)
	}
}

func installOp(op backends.OpType, exec executor) {
	if nodeExecutors[op] == nil {
		return
	}
	nativeOps[op] = nodeExecutors[op]
	nodeExecutors[op] = exec
	parallelOps[op] = true
}

// parallelFor runs fn over the items [0, n) split into one contiguous block
// per core, the last block in this goroutine, when the op touches at least
// parallelMin elements (work); else in one call.
func parallelFor(n, work int, fn func(lo, hi int)) {
	p := min(runtime.GOMAXPROCS(0), n)
	if p < 2 || work < parallelMin {
		fn(0, n)
		return
	}
	block := (n + p - 1) / p
	var wg sync.WaitGroup
	lo := 0
	for ; lo+block < n; lo += block {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, lo+block)
	}
	fn(lo, n)
	wg.Wait()
}

func opOf(node *simplego.Node) backends.OpType {
	return field[backends.OpType](unsafe.Pointer(node), nodeOpType)
}

func shapeOfBuf(b *simplego.Buffer) shapes.Shape {
	return field[shapes.Shape](unsafe.Pointer(b), bufShape)
}

func flat32(b *simplego.Buffer) []float32 {
	f, _ := field[any](unsafe.Pointer(b), bufFlat).([]float32)
	return f
}

func parallelEnabled(n int) bool {
	return parallelOn.Load() && n >= parallelMin && runtime.GOMAXPROCS(0) > 1
}

// execUnary has simplego's executor signature: output in place when the
// input is owned (as simplego's unaryOperandAndOutput does), else a new
// buffer from simplego's pool.
func execUnary(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	op := opOf(node)
	in := inputs[0]
	s := shapeOfBuf(in)
	if s.DType != dtypes.Float32 || !parallelEnabled(s.Size()) {
		return nativeOps[op](b, node, inputs, owned)
	}
	out := in
	if owned[0] {
		inputs[0] = nil // tells the executor loop the buffer was taken over
	} else {
		out = getBufferForShape(b, s)
	}
	src, dst := flat32(in), flat32(out)
	parallelFor(len(dst), len(dst), func(lo, hi int) { unary32(op, src[lo:hi], dst[lo:hi]) })
	return out, nil
}

// unary32 is simplego v0.26's float32 kernel of op (exec_unary.go).
func unary32(op backends.OpType, in, out []float32) {
	switch op {
	case backends.OpTypeNeg:
		for i, x := range in {
			out[i] = -x
		}
	case backends.OpTypeAbs:
		for i, x := range in {
			if x < 0 {
				out[i] = -x
			} else {
				out[i] = x
			}
		}
	case backends.OpTypeExp:
		for i, x := range in {
			out[i] = float32(math.Exp(float64(x)))
		}
	case backends.OpTypeLog:
		for i, x := range in {
			out[i] = float32(math.Log(float64(x)))
		}
	case backends.OpTypeSqrt:
		for i, x := range in {
			out[i] = float32(math.Sqrt(float64(x)))
		}
	case backends.OpTypeRsqrt:
		for i, x := range in {
			out[i] = float32(1.0 / math.Sqrt(float64(x)))
		}
	case backends.OpTypeTanh:
		for i, x := range in {
			out[i] = float32(math.Tanh(float64(x)))
		}
	case backends.OpTypeErf:
		for i, x := range in {
			out[i] = float32(math.Erf(float64(x)))
		}
	case backends.OpTypeLogistic:
		for i, x := range in {
			if x >= 0 {
				out[i] = float32(1.0 / (1.0 + math.Exp(-float64(x))))
			} else {
				e := math.Exp(float64(x))
				out[i] = float32(e / (1.0 + e))
			}
		}
	default:
		panic("hook: no parallel kernel for " + op.String())
	}
}

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
	lStrides, rStrides := broadcastStrides(ls, outShape), broadcastStrides(rs, outShape)
	lInner, rInner := innerStep(ls, outShape), innerStep(rs, outShape)
	rows := len(o) / inner
	// Split by whole rows of the last axis: each row is one loop with each
	// operand either contiguous or constant.
	parallelFor(rows, len(o), func(lo, hi int) {
		for row := lo; row < hi; row++ {
			lOff, rOff := rowOffset(row, dims, lStrides), rowOffset(row, dims, rStrides)
			binaryRow(op, o[row*inner:(row+1)*inner], l, lOff, lInner, r, rOff, rInner)
		}
	})
	return out, nil
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

// installLayoutOps adds the data-movement and reduction executors.
func installLayoutOps() {
	installOp(backends.OpTypeTranspose, execTranspose)
	installOp(backends.OpTypeBroadcastInDim, execBroadcastInDim)
	installOp(backends.OpTypeReduceSum, execReduce)
	installOp(backends.OpTypeReduceMax, execReduce)
}

func nodeIntsData(node *simplego.Node) ([]int, bool) {
	v, ok := field[any](unsafe.Pointer(node), nodeData).([]int)
	return v, ok
}

// execTranspose copies float32 operands with permuted axes (node data: the
// permutation, output axis i = operand axis perm[i]), split by output blocks.
func execTranspose(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	op := opOf(node)
	in := inputs[0]
	s := shapeOfBuf(in)
	perm, ok := nodeIntsData(node)
	if s.DType != dtypes.Float32 || !ok || len(perm) != s.Rank() || !parallelEnabled(s.Size()) {
		return nativeOps[op](b, node, inputs, owned)
	}
	outShape := field[shapes.Shape](unsafe.Pointer(node), nodeShape)
	out := getBufferForShape(b, outShape)
	src, dst := flat32(in), flat32(out)
	strides := rowMajorStrides(s.Dimensions)
	ps := make([]int, len(perm)) // operand stride of each output axis
	for i, a := range perm {
		ps[i] = strides[a]
	}
	stridedCopy(dst, src, outShape.Dimensions, ps)
	return out, nil
}

// execBroadcastInDim repeats a float32 operand along the new axes (node
// data: the output axis of each operand axis, increasing), split by rows.
func execBroadcastInDim(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	op := opOf(node)
	in := inputs[0]
	s := shapeOfBuf(in)
	outShape := field[shapes.Shape](unsafe.Pointer(node), nodeShape)
	axes, ok := nodeIntsData(node)
	if s.DType != dtypes.Float32 || !ok || len(axes) != s.Rank() || !parallelEnabled(outShape.Size()) {
		return nativeOps[op](b, node, inputs, owned)
	}
	for i := 1; i < len(axes); i++ {
		if axes[i] <= axes[i-1] {
			return nativeOps[op](b, node, inputs, owned)
		}
	}
	// The operand viewed at the output's rank, 1 on the new axes.
	dims := make([]int, outShape.Rank())
	for i := range dims {
		dims[i] = 1
	}
	for i, a := range axes {
		dims[a] = s.Dimensions[i]
	}
	st := broadcastStrides(shapes.Make(s.DType, dims...), outShape)
	out := getBufferForShape(b, outShape)
	stridedCopy(flat32(out), flat32(in), outShape.Dimensions, st)
	return out, nil
}

func rowMajorStrides(dims []int) []int {
	st := make([]int, len(dims))
	s := 1
	for i := len(dims) - 1; i >= 0; i-- {
		st[i] = s
		s *= dims[i]
	}
	return st
}

// stridedCopy sets dst[i] = src[Σ idx_k·strides[k]] for every row-major
// multi-index idx of dims, in parallel blocks of whole rows.
func stridedCopy(dst, src []float32, dims, strides []int) {
	r := len(dims)
	if r == 0 || len(dst) == 0 {
		copy(dst, src[:len(dst)])
		return
	}
	inner, innerStride := dims[r-1], strides[r-1]
	rows := len(dst) / inner
	parallelFor(rows, len(dst), func(lo, hi int) {
		for row := lo; row < hi; row++ {
			off := rowOffset(row, dims, strides)
			d := dst[row*inner : (row+1)*inner]
			switch innerStride {
			case 0:
				v := src[off]
				for j := range d {
					d[j] = v
				}
			case 1:
				copy(d, src[off:off+inner])
			default:
				for j := range d {
					d[j] = src[off]
					off += innerStride
				}
			}
		}
	})
}

// execReduce computes ReduceSum and ReduceMax of float32 operands over one
// contiguous block of axes (operand viewed as [A, R, C], output [A, C]),
// accumulating each output element in simplego's order: from 0 (Sum) or
// the dtype's lowest value (Max), over r ascending.
func execReduce(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	op := opOf(node)
	in := inputs[0]
	s := shapeOfBuf(in)
	axes, ok := nodeIntsData(node)
	if s.DType != dtypes.Float32 || !ok || len(axes) == 0 || !parallelEnabled(s.Size()) {
		return nativeOps[op](b, node, inputs, owned)
	}
	for i := 1; i < len(axes); i++ {
		if axes[i] != axes[i-1]+1 {
			return nativeOps[op](b, node, inputs, owned)
		}
	}
	A, R, C := 1, 1, 1
	for i, d := range s.Dimensions {
		switch {
		case i < axes[0]:
			A *= d
		case i <= axes[len(axes)-1]:
			R *= d
		default:
			C *= d
		}
	}
	outShape := field[shapes.Shape](unsafe.Pointer(node), nodeShape)
	out := getBufferForShape(b, outShape)
	src, dst := flat32(in), flat32(out)
	init := float32(0)
	if op == backends.OpTypeReduceMax {
		init = dtypes.Float32.LowestValue().(float32)
	}
	reduceRows := func(lo, hi int) { // output rows a in [lo, hi), all C columns
		if C == 1 { // reducing the last axes: one contiguous run per output
			for a := lo; a < hi; a++ {
				acc := init
				if op == backends.OpTypeReduceMax {
					for _, v := range src[a*R : (a+1)*R] {
						acc = max(acc, v)
					}
				} else {
					for _, v := range src[a*R : (a+1)*R] {
						acc += v
					}
				}
				dst[a] = acc
			}
			return
		}
		for a := lo; a < hi; a++ {
			o := dst[a*C : (a+1)*C]
			for c := range o {
				o[c] = init
			}
			for r := range R {
				x := src[(a*R+r)*C : (a*R+r+1)*C]
				if op == backends.OpTypeReduceMax {
					for c, v := range x {
						o[c] = max(o[c], v)
					}
				} else {
					for c, v := range x {
						o[c] += v
					}
				}
			}
		}
	}
	if A >= runtime.GOMAXPROCS(0) || C == 1 {
		parallelFor(A, len(src), reduceRows)
		return out, nil
	}
	// Few output rows (e.g. a bias gradient summed over the batch): split the columns.
	parallelFor(C, len(src), func(lo, hi int) {
		for a := range A {
			o := dst[a*C+lo : a*C+hi]
			for c := range o {
				o[c] = init
			}
			for r := range R {
				x := src[(a*R+r)*C+lo : (a*R+r)*C+hi]
				if op == backends.OpTypeReduceMax {
					for c, v := range x {
						o[c] = max(o[c], v)
					}
				} else {
					for c, v := range x {
						o[c] += v
					}
				}
			}
		}
	})
	return out, nil
}
