package hook

import (
	"runtime"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

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
