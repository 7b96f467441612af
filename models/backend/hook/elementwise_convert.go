package hook

import (
	"math"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// execConvert widens bfloat16 to float32 on every core: a weight held in
// bfloat16 (models/nn.DType) is converted at each use, every weight of the
// model once per call, and simplego converts in one goroutine. A bfloat16
// is the upper half of a float32, so the result is simplego's
// (bfloat16.Float32) bit for bit. It also converts uint32 to float32 (the
// random bits of graph.RandomUniform, one per dropout-mask element) with
// Go's conversion, as simplego's execConvertDTypeGeneric does. Other dtype
// pairs and small tensors go to simplego's executor.
func execConvert(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) (*simplego.Buffer, error) {
	in := inputs[0]
	s := shapeOfBuf(in)
	out := field[shapes.Shape](unsafe.Pointer(node), nodeShape)
	if out.DType != dtypes.Float32 || !parallelEnabled(s.Size()) {
		return nativeOps[backends.OpTypeConvertDType](b, node, inputs, owned)
	}
	switch src := field[any](unsafe.Pointer(in), bufFlat).(type) {
	case []bfloat16.BFloat16:
		buf := getBufferForShape(b, out)
		dst := flat32(buf)
		parallelFor(len(dst), len(dst), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dst[i] = math.Float32frombits(uint32(src[i]) << 16)
			}
		})
		return buf, nil
	case []uint32:
		buf := getBufferForShape(b, out)
		dst := flat32(buf)
		parallelFor(len(dst), len(dst), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dst[i] = float32(src[i])
			}
		})
		return buf, nil
	}
	return nativeOps[backends.OpTypeConvertDType](b, node, inputs, owned)
}
