package hook

import (
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// The Slice gradient runs on the pure-Go backend (GoMLX's Pad does not) and
// is the incoming gradient at the slice's position, zero elsewhere, for
// cuts on one or both axes, at either end or both.
func TestSliceVJP(t *testing.T) {
	be := newBackend(t)
	for _, c := range []struct {
		name           string
		r0, r1, c0, c1 int // rows [r0, r1) and columns [c0, c1) of a 3×4 input
	}{
		{"columns, first half", 0, 3, 0, 2},
		{"columns, second half", 0, 3, 2, 4},
		{"inner block", 1, 2, 1, 3},
		{"rows, all but last", 0, 2, 0, 4},
		{"nothing cut", 0, 3, 0, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := tensors.FromFlatDataAndDimensions(make([]float32, 12), 3, 4)
			outs := graph.MustExecOnceN(be, func(x *graph.Node) []*graph.Node {
				s := graph.Slice(x, graph.AxisRange(c.r0, c.r1), graph.AxisRange(c.c0, c.c1))
				// Distinct weights over the slice: d loss/d x is the weight where x was kept.
				w := graph.AddScalar(graph.Iota(x.Graph(), s.Shape(), 1), 1)
				w = graph.Add(w, graph.MulScalar(graph.Iota(x.Graph(), s.Shape(), 0), 10))
				return []*graph.Node{graph.Gradient(graph.ReduceAllSum(graph.Mul(s, w)), x)[0], w}
			}, x)
			got := tensors.MustCopyFlatData[float32](outs[0])
			w := tensors.MustCopyFlatData[float32](outs[1])
			want := make([]float32, 12)
			k := 0
			for r := c.r0; r < c.r1; r++ {
				for col := c.c0; col < c.c1; col++ {
					want[r*4+col] = w[k]
					k++
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("gradient %v, want %v", got, want)
			}
		})
	}
}
