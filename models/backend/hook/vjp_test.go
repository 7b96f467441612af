package hook

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// The DotGeneral VJP registered by this package agrees with GoMLX's own
// (broadcast-and-reduce) VJP and with a hand-computed case, for every layout
// the models use: plain and transposed 2-D products, batched attention with
// contracting axes before or after the free ones, several contracting and
// batch axes in permuted orders.
func TestDotGeneralVJP(t *testing.T) {
	be := newBackend(t)
	cases := []struct {
		name           string
		a, b           []int
		lc, lb, rc, rb []int
	}{
		{"x·Wᵀ", []int{5, 3}, []int{4, 3}, []int{1}, nil, []int{1}, nil},
		{"x·W", []int{5, 3}, []int{3, 4}, []int{1}, nil, []int{0}, nil},
		{"xᵀ·y", []int{3, 5}, []int{3, 4}, []int{0}, nil, []int{0}, nil},
		{"rank-3 linear", []int{2, 5, 3}, []int{4, 3}, []int{2}, nil, []int{1}, nil},
		{"attention q·kᵀ", []int{2, 3, 4, 5}, []int{2, 3, 6, 5}, []int{3}, []int{0, 1}, []int{3}, []int{0, 1}},
		{"attention w·v", []int{2, 3, 4, 6}, []int{2, 3, 6, 5}, []int{3}, []int{0, 1}, []int{2}, []int{0, 1}},
		{"head-batched weight", []int{2, 3, 4, 5}, []int{3, 5, 6}, []int{3}, []int{1}, []int{1}, []int{0}},
		{"permuted contracting and batch", []int{3, 2, 4, 5}, []int{5, 6, 4, 2}, []int{3, 2}, []int{1}, []int{0, 2}, []int{3}},
		{"no free axis", []int{3, 4}, []int{3, 4}, []int{1}, []int{0}, []int{1}, []int{0}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	randT := func(dims []int) *tensors.Tensor {
		n := 1
		for _, d := range dims {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return tensors.FromFlatDataAndDimensions(v, dims...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := randT(c.a), randT(c.b)
			var usedFast bool
			grads := func(ref bool) []*tensors.Tensor {
				e := graph.MustNewExec(be, func(a, b *graph.Node) []*graph.Node {
					out := graph.DotGeneral(a, c.lc, c.lb, b, c.rc, c.rb)
					// A non-uniform output weighting so every output element matters.
					w := graph.Sin(graph.Iota(a.Graph(), out.Shape(), out.Rank()-1))
					loss := graph.ReduceAllSum(graph.Mul(out, w))
					if ref {
						saved := graph.VJPRegistration[graph.NodeTypeDotGeneral]
						graph.VJPRegistration[graph.NodeTypeDotGeneral] = broadcastDotGeneralVJP
						defer func() { graph.VJPRegistration[graph.NodeTypeDotGeneral] = saved }()
					} else {
						for _, n := range out.Graph().Nodes() {
							if n.Type() == graph.NodeTypeDotGeneral {
								_, _, _, _, usedFast = dotGeneralAxes(n)
							}
						}
					}
					return graph.Gradient(loss, a, b)
				})
				return e.MustExec(a, b)
			}
			got, want := grads(false), grads(true)
			if !usedFast {
				t.Fatal("DotGeneral axes not readable: the fast VJP would fall back")
			}
			for i, name := range []string{"lhs", "rhs"} {
				g, w := tensors.MustCopyFlatData[float32](got[i]), tensors.MustCopyFlatData[float32](want[i])
				if !got[i].Shape().Equal(want[i].Shape()) {
					t.Fatalf("%s gradient shape %s, reference %s", name, got[i].Shape(), want[i].Shape())
				}
				for j := range g {
					if math.Abs(float64(g[j]-w[j])) > 1e-4*(1+math.Abs(float64(w[j]))) {
						t.Fatalf("%s gradient[%d] = %g, reference %g", name, j, g[j], w[j])
					}
				}
			}
		})
	}
}

// Hand-computed: loss = Σ (A·B) for A [2,2], B [2,2] gives ∂A = 1·Bᵀ (row sums
// of B), ∂B = Aᵀ·1 (column sums of A).
func TestDotGeneralVJPHand(t *testing.T) {
	be := newBackend(t)
	e := graph.MustNewExec(be, func(a, b *graph.Node) []*graph.Node {
		loss := graph.ReduceAllSum(graph.DotGeneral(a, []int{1}, nil, b, []int{0}, nil))
		return graph.Gradient(loss, a, b)
	})
	out := e.MustExec([][]float32{{1, 2}, {3, 4}}, [][]float32{{5, 6}, {7, 8}})
	want := [][]float32{{11, 15, 11, 15}, {4, 4, 6, 6}}
	for i := range want {
		got := tensors.MustCopyFlatData[float32](out[i])
		for j := range got {
			if got[j] != want[i][j] {
				t.Fatalf("gradient %d = %v, want %v", i, got, want[i])
			}
		}
	}
}

// BenchmarkDotGeneralGradient: gradient of a linear layer x [1536, 64]·Wᵀ,
// W [160, 64] (the tiny T5's FF at batch 8 × 192), with this package's VJP
// ("matmul") and GoMLX v0.26's broadcast-and-reduce one ("broadcast").
func BenchmarkDotGeneralGradient(b *testing.B) {
	be := newBackend(b)
	x := tensors.FromShape(shapes.Make(dtypes.Float32, 1536, 64))
	w := tensors.FromShape(shapes.Make(dtypes.Float32, 160, 64))
	for _, c := range []struct {
		name string
		vjp  graph.VJP
	}{{"matmul", dotGeneralVJP}, {"broadcast", broadcastDotGeneralVJP}} {
		b.Run(c.name, func(b *testing.B) {
			e := graph.MustNewExec(be, func(x, w *graph.Node) []*graph.Node {
				saved := graph.VJPRegistration[graph.NodeTypeDotGeneral]
				graph.VJPRegistration[graph.NodeTypeDotGeneral] = c.vjp
				defer func() { graph.VJPRegistration[graph.NodeTypeDotGeneral] = saved }()
				loss := graph.ReduceAllSum(graph.DotGeneral(x, []int{1}, nil, w, []int{1}, nil))
				return graph.Gradient(loss, x, w)
			})
			e.MustExec(x, w)
			b.ResetTimer()
			for range b.N {
				e.MustExec(x, w)
			}
		})
	}
}

// The Where VJP registered by this package gives GoMLX's own gradients for
// branches of the output's shape and scalar ones, bit for bit (both select
// the incoming gradient; a scalar branch sums it).
func TestWhereVJP(t *testing.T) {
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(3, 4))
	full := randTensorSpecials(rng, 1<<30, 64, 601)
	cases := []struct {
		name string
		a, b *tensors.Tensor
		cond func(a, b *graph.Node) *graph.Node
	}{
		{"both tensors", full, randTensorSpecials(rng, 1<<30, 64, 601), graph.GreaterThan},
		{"scalar onFalse", full, tensors.FromScalar(float32(0.25)), graph.GreaterThan},
		{"scalar onTrue", tensors.FromScalar(float32(-1)), full, graph.LessThan},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			grads := func(ref bool) []*tensors.Tensor {
				e := graph.MustNewExec(be, func(a, b *graph.Node) []*graph.Node {
					if ref {
						graph.VJPRegistration[graph.NodeTypeWhere] = broadcastWhereVJP
						defer func() { graph.VJPRegistration[graph.NodeTypeWhere] = whereVJP }()
					}
					x := graph.MulScalar(graph.OnesLike(full0(a, b)), 1)
					cond := c.cond(graph.Add(x, a), graph.Add(x, b))
					out := graph.Where(cond, a, b)
					w := graph.Sin(graph.Iota(a.Graph(), out.Shape(), out.Rank()-1))
					return graph.Gradient(graph.ReduceAllSum(graph.Mul(out, w)), a, b)
				})
				defer e.Finalize()
				return e.MustExec(c.a, c.b)
			}
			got, want := grads(false), grads(true)
			for i, name := range []string{"onTrue", "onFalse"} {
				if !got[i].Shape().Equal(want[i].Shape()) {
					t.Fatalf("%s gradient shape %s, GoMLX's %s", name, got[i].Shape(), want[i].Shape())
				}
				g, w := bits(t, got[i]), bits(t, want[i])
				for j := range g {
					if g[j] != w[j] {
						t.Fatalf("%s gradient[%d] = %g, GoMLX's %g", name, j, math.Float32frombits(g[j]), math.Float32frombits(w[j]))
					}
				}
			}
		})
	}
}

// full0 is whichever of a, b is not a scalar.
func full0(a, b *graph.Node) *graph.Node {
	if a.IsScalar() {
		return b
	}
	return a
}
