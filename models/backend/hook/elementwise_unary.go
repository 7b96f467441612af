package hook

import (
	"math"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

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
