package retriever

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/retrieval/hyde"
)

// Eq. 10 has two homes: hyde.Fuse on the host (serving, mining, evaluation)
// and FuseGraph in the training graph. They agree, normalised or not, for
// queries with every, some and none of their hypothetical documents (the
// missing ones padded with weight 0 in the graph, absent on the host).
func TestFuseGraphMatchesHydeFuse(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	const b, nh, h = 4, 3, 8
	present := []int{3, 1, 0, 2} // documents query i has
	rng := rand.New(rand.NewPCG(10, 11))
	vec := func() []float32 {
		v := make([]float32, h)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	q := make([][]float32, b)
	docs := make([][][]float32, b)
	var flatQ, flatH, flatW []float32
	for i := range b {
		q[i] = vec()
		flatQ = append(flatQ, q[i]...)
		for k := range nh {
			d := vec()
			if k < present[i] {
				docs[i] = append(docs[i], d)
				flatW = append(flatW, 1)
			} else {
				flatW = append(flatW, 0)
			}
			flatH = append(flatH, d...) // padding rows hold noise: weight 0 must drop them
		}
	}
	for _, normalize := range []bool{false, true} {
		exec := graph.MustNewExec(be, func(q, hy, w *graph.Node) *graph.Node { return FuseGraph(q, hy, w, normalize) })
		out := exec.MustExec(tensors.FromFlatDataAndDimensions(flatQ, b, h),
			tensors.FromFlatDataAndDimensions(flatH, b*nh, h), tensors.FromFlatDataAndDimensions(flatW, b, nh))
		got, err := tensors.CopyFlatData[float32](out[0])
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			want, err := hyde.Fuse(q[i], docs[i], hyde.ModeFusion, normalize)
			if err != nil {
				t.Fatal(err)
			}
			for j := range h {
				if g := got[i*h+j]; math.Abs(float64(g-want[j])) > 1e-5 {
					t.Errorf("normalize %v, query %d (%d documents), dim %d: graph %v, hyde.Fuse %v", normalize, i, present[i], j, g, want[j])
				}
			}
		}
	}
}
