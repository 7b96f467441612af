package hook

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// specials are mixed into the random inputs: the multi-core kernels must
// agree with simplego's bit for bit on them too.
var specials = []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-38, -3e38, 88.7, -104}

func randTensor(rng *rand.Rand, dims ...int) *tensors.Tensor {
	return randTensorSpecials(rng, 50, dims...)
}

// randTensorSpecials: about one element in every specials is a special value.
func randTensorSpecials(rng *rand.Rand, every int, dims ...int) *tensors.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		if rng.IntN(every) == 0 {
			v[i] = specials[rng.IntN(len(specials))]
		} else {
			v[i] = float32(rng.NormFloat64() * 3)
		}
	}
	if len(dims) == 0 {
		return tensors.FromScalar(v[0])
	}
	return tensors.FromFlatDataAndDimensions(v, dims...)
}

func bits(t *testing.T, x *tensors.Tensor) []uint32 {
	t.Helper()
	v := tensors.MustCopyFlatData[float32](x)
	out := make([]uint32, len(v))
	for i, f := range v {
		out[i] = math.Float32bits(f)
	}
	return out
}

// TestElementwiseBitIdentical runs every op with the multi-core executors on
// and off, on tensors above the parallel threshold, for plain, scalar and
// broadcast operands, with inputs as parameters and as owned intermediates
// (the in-place paths), and requires identical bits (any NaN for a NaN).
func TestElementwiseBitIdentical(t *testing.T) {
	if ParallelStatus() == "" || notInstalled != "" {
		t.Fatalf("hook not installed: %s", Status())
	}
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(5, 6))
	unary := map[string]func(x *graph.Node) *graph.Node{
		"Neg": graph.Neg, "Abs": graph.Abs, "Exp": graph.Exp, "Log": graph.Log, "Sqrt": graph.Sqrt,
		"Rsqrt": graph.Rsqrt, "Tanh": graph.Tanh, "Logistic": graph.Logistic, "Erf": graph.Erf,
	}
	binary := map[string]func(x, y *graph.Node) *graph.Node{
		"Add": graph.Add, "Sub": graph.Sub, "Mul": graph.Mul, "Div": graph.Div,
		"Max": graph.Max, "Min": graph.Min, "Pow": graph.Pow,
	}
	pairs := []struct {
		name string
		l, r []int
	}{
		{"same shape", []int{128, 512}, []int{128, 512}},
		{"rhs scalar", []int{128, 512}, nil},
		{"lhs scalar", nil, []int{128, 512}},
		{"lhs size 1", []int{1, 1}, []int{128, 512}},
		{"bias row", []int{128, 512}, []int{1, 512}},
		{"per-row", []int{128, 1}, []int{128, 512}},
		{"both broadcast", []int{128, 1}, []int{1, 512}},
		{"attention", []int{2, 4, 64, 128}, []int{2, 4, 64, 1}},
		{"odd sizes", []int{3, 7, 1601}, []int{3, 1, 1601}},
	}
	run := func(fn func(in []*graph.Node) *graph.Node, args ...*tensors.Tensor) (on, off []uint32) {
		for _, par := range []bool{true, false} {
			prev := SetParallel(par)
			e := graph.MustNewExec(be, func(in []*graph.Node) *graph.Node { return fn(in) })
			anyArgs := make([]any, len(args))
			for i, a := range args {
				anyArgs[i] = a
			}
			out := bits(t, e.MustExec(anyArgs...)[0])
			e.Finalize()
			SetParallel(prev)
			if par {
				on = out
			} else {
				off = out
			}
		}
		return on, off
	}
	same := func(on, off []uint32) error {
		if len(on) != len(off) {
			return fmt.Errorf("sizes %d vs %d", len(on), len(off))
		}
		for i := range on {
			if on[i] != off[i] && !(isNaN32(on[i]) && isNaN32(off[i])) {
				return fmt.Errorf("element %d: multi-core %08x, simplego %08x", i, on[i], off[i])
			}
		}
		return nil
	}
	for name, f := range unary {
		t.Run(name, func(t *testing.T) {
			x := randTensor(rng, 130, 509)
			must(t, same(run(func(in []*graph.Node) *graph.Node { return f(in[0]) }, x))) // parameter input
			must(t, same(run(func(in []*graph.Node) *graph.Node {                         // owned intermediate, in place
				return f(graph.MulScalar(in[0], 1))
			}, x)))
		})
	}
	for name, f := range binary {
		for _, p := range pairs {
			t.Run(name+"/"+p.name, func(t *testing.T) {
				l, r := randTensor(rng, p.l...), randTensor(rng, p.r...)
				must(t, same(run(func(in []*graph.Node) *graph.Node { return f(in[0], in[1]) }, l, r)))
				must(t, same(run(func(in []*graph.Node) *graph.Node {
					return f(graph.MulScalar(in[0], 1), graph.MulScalar(in[1], 1))
				}, l, r)))
			})
		}
	}
	layout := []struct {
		name string
		dims []int
		fn   func(x *graph.Node) *graph.Node
	}{
		{"transpose 2-D", []int{300, 257}, func(x *graph.Node) *graph.Node { return graph.TransposeAllAxes(x, 1, 0) }},
		{"transpose heads", []int{2, 64, 4, 128}, func(x *graph.Node) *graph.Node { return graph.TransposeAllAxes(x, 0, 2, 1, 3) }},
		{"transpose last axes", []int{2, 4, 64, 128}, func(x *graph.Node) *graph.Node { return graph.TransposeAllAxes(x, 0, 1, 3, 2) }},
		{"broadcast new leading", []int{512}, func(x *graph.Node) *graph.Node { return graph.BroadcastPrefix(x, 128) }},
		{"broadcast new trailing", []int{128, 64}, func(x *graph.Node) *graph.Node { return graph.BroadcastToDims(graph.InsertAxes(x, -1), 128, 64, 9) }},
		{"broadcast scalar", nil, func(x *graph.Node) *graph.Node { return graph.BroadcastToDims(x, 256, 256) }},
		{"sum last axis", []int{2, 4, 64, 128}, func(x *graph.Node) *graph.Node { return graph.ReduceSum(x, -1) }},
		{"sum first axis", []int{1536, 64}, func(x *graph.Node) *graph.Node { return graph.ReduceSum(x, 0) }},
		{"sum middle axes", []int{8, 32, 16, 33}, func(x *graph.Node) *graph.Node { return graph.ReduceSum(x, 1, 2) }},
		{"sum all", []int{300, 257}, func(x *graph.Node) *graph.Node { return graph.ReduceAllSum(x) }},
		{"max last axis", []int{2, 4, 64, 128}, func(x *graph.Node) *graph.Node { return graph.ReduceMax(x, -1) }},
		{"max first axis", []int{1536, 64}, func(x *graph.Node) *graph.Node { return graph.ReduceMax(x, 0) }},
		{"bfloat16 to float32", []int{300, 257}, func(x *graph.Node) *graph.Node {
			return graph.ConvertDType(graph.ConvertDType(x, dtypes.BFloat16), dtypes.Float32)
		}},
	}
	if !parallelOps[backends.OpTypeConvertDType] {
		t.Fatal("the bfloat16 → float32 executor is not installed")
	}
	for _, c := range layout {
		t.Run(c.name, func(t *testing.T) {
			x := randTensorSpecials(rng, 20000, c.dims...) // long reductions: keep most sums finite
			must(t, same(run(func(in []*graph.Node) *graph.Node { return c.fn(in[0]) }, x)))
		})
	}
	// Comparisons give bools, seen here as 0/1 floats; Where's branches are
	// parameters, owned intermediates (reused in place) or scalars.
	compare := map[string]func(x, y *graph.Node) *graph.Node{
		"GreaterThan": graph.GreaterThan, "GreaterOrEqual": graph.GreaterOrEqual,
		"LessThan": graph.LessThan, "LessOrEqual": graph.LessOrEqual,
	}
	asFloat := func(b *graph.Node) *graph.Node { return graph.ConvertDType(b, dtypes.Float32) }
	for name, f := range compare {
		for _, p := range pairs[:3] {
			t.Run(name+"/"+p.name, func(t *testing.T) {
				l, r := randTensorSpecials(rng, 5, p.l...), randTensorSpecials(rng, 5, p.r...)
				must(t, same(run(func(in []*graph.Node) *graph.Node { return asFloat(f(in[0], in[1])) }, l, r)))
			})
		}
	}
	half := func(g *graph.Graph) *graph.Node { return graph.Scalar(g, dtypes.Float32, 0.5) }
	where := map[string]func(in []*graph.Node) *graph.Node{
		"both tensors": func(in []*graph.Node) *graph.Node {
			return graph.Where(graph.GreaterThan(in[0], in[1]), in[0], in[1])
		},
		"owned onTrue": func(in []*graph.Node) *graph.Node {
			return graph.Where(graph.GreaterThan(in[0], in[1]), graph.MulScalar(in[0], 1), in[1])
		},
		"owned onFalse": func(in []*graph.Node) *graph.Node {
			return graph.Where(graph.GreaterThan(in[0], in[1]), in[0], graph.MulScalar(in[1], 1))
		},
		"scalar onFalse": func(in []*graph.Node) *graph.Node {
			return graph.Where(graph.GreaterThan(in[0], in[1]), in[0], half(in[0].Graph()))
		},
		"both scalars": func(in []*graph.Node) *graph.Node {
			return graph.Where(graph.LessOrEqual(in[0], in[1]), graph.ScalarZero(in[0].Graph(), dtypes.Float32), half(in[0].Graph()))
		},
	}
	for name, f := range where {
		t.Run("Where/"+name, func(t *testing.T) {
			l, r := randTensor(rng, 130, 509), randTensor(rng, 130, 509)
			must(t, same(run(f, l, r)))
		})
	}
	t.Run("uint32 to float32", func(t *testing.T) {
		v := make([]uint32, 300*257)
		for i := range v {
			v[i] = rng.Uint32() >> (i % 32)
		}
		x := tensors.FromFlatDataAndDimensions(v, 300, 257)
		must(t, same(run(func(in []*graph.Node) *graph.Node { return graph.ConvertDType(in[0], dtypes.Float32) }, x)))
	})
}

// isNaN32: a NaN's sign and payload after a sum of +Inf and -Inf depend on
// the operand order the compiler picked for the addition, so two NaNs count
// as the same result; every other value must match bit for bit.
func isNaN32(b uint32) bool { return math.IsNaN(float64(math.Float32frombits(b))) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// parallelFor covers [0, n) exactly once for sizes around the threshold.
func TestParallelForCoversOnce(t *testing.T) {
	for _, n := range []int{0, 1, parallelMin - 1, parallelMin, parallelMin + 1, 3*parallelMin + 7} {
		hits := make([]int32, n)
		parallelFor(n, n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				hits[i]++
			}
		})
		for i, h := range hits {
			if h != 1 {
				t.Fatalf("n %d: index %d covered %d times", n, i, h)
			}
		}
	}
}

// walkRows' carried offsets equal rowOffset's for every row of every block,
// including wraps of several axes at once and broadcast (stride 0) axes.
func TestWalkRowsMatchesRowOffset(t *testing.T) {
	tests := []struct {
		dims    []int
		strides [][]int
	}{
		{[]int{7}, [][]int{{1}}},
		{[]int{5, 3}, [][]int{{3, 1}, {0, 1}}},
		{[]int{2, 3, 4, 16}, [][]int{{192, 64, 16, 1}, {0, 4, 1, 0}, {12, 1, 3, 0}}},
		{[]int{3, 1, 5, 2}, [][]int{{10, 10, 2, 1}, {0, 0, 1, 0}}},
	}
	for _, tt := range tests {
		rows := 1
		for _, d := range tt.dims[:len(tt.dims)-1] {
			rows *= d
		}
		for lo := 0; lo <= rows; lo++ {
			for hi := lo; hi <= rows; hi++ {
				next := lo
				walkRows(lo, hi, tt.dims, tt.strides, func(row int, off []int) {
					if row != next {
						t.Fatalf("dims %v [%d,%d): row %d, want %d", tt.dims, lo, hi, row, next)
					}
					next++
					for k, st := range tt.strides {
						if want := rowOffset(row, tt.dims, st); off[k] != want {
							t.Fatalf("dims %v strides %v [%d,%d) row %d: offset %d, want %d", tt.dims, st, lo, hi, row, off[k], want)
						}
					}
				})
				if next != hi {
					t.Fatalf("dims %v [%d,%d): stopped at row %d", tt.dims, lo, hi, next)
				}
			}
		}
	}
}
