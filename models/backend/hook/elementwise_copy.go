package hook

import (
	"unsafe"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

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
	st := [][]int{strides}
	parallelFor(rows, len(dst), func(lo, hi int) {
		walkRows(lo, hi, dims, st, func(row int, offs []int) {
			off := offs[0]
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
		})
	})
}
