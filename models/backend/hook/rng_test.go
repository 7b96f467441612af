package hook

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// pcgAdvance(n) is n steps of math/rand/v2's PCG, for small n directly and
// for large n by composing jumps.
func TestPCGAdvance(t *testing.T) {
	hi, lo := uint64(0x0123456789abcdef), uint64(0xfedcba9876543210)
	p := rand.NewPCG(hi, lo)
	for n := uint64(1); n <= 1000; n++ {
		p.Uint64()
		var q rand.PCG
		q.Seed(pcgAdvance(hi, lo, n))
		if a, b := p.Uint64(), q.Uint64(); a != b {
			t.Fatalf("after %d steps: stepped PCG draws %x, advanced one %x", n, a, b)
		}
		p.Seed(pcgAdvance(hi, lo, n)) // rewind the extra draw
	}
	const a, b = 1<<40 + 12345, 987654321987
	h1, l1 := pcgAdvance(hi, lo, a)
	h2, l2 := pcgAdvance(h1, l1, b)
	h3, l3 := pcgAdvance(hi, lo, a+b)
	if h2 != h3 || l2 != l3 {
		t.Fatalf("advance(%d) then (%d) = %x:%x, advance(%d) = %x:%x", uint64(a), uint64(b), h2, l2, uint64(a+b), h3, l3)
	}
}

// TestRNGBitIdentical draws uniform floats, doubles and integers three times
// in a chain, on sizes whose byte counts are not multiples of 8, with the
// multi-core RNGBitGenerator and with simplego's, and requires the same
// values and the same final state.
func TestRNGBitIdentical(t *testing.T) {
	if !parallelOps[backends.OpTypeRNGBitGenerator] {
		t.Fatalf("the RNGBitGenerator executor is not installed (slot holds %s, want %s)",
			funcName(multiOutputExecutors[backends.OpTypeRNGBitGenerator]), nativeRNG)
	}
	be := newBackend(t)
	seed, err := graph.RNGStateFromSeed(42)
	must(t, err)
	draws := map[string]func(state *graph.Node) (*graph.Node, *graph.Node){
		"float32 odd": func(s *graph.Node) (*graph.Node, *graph.Node) {
			return graph.RandomUniform(s, shapes.Make(dtypes.Float32, 3, 5471)) // 65,652 bytes: a partial last word
		},
		"float32 attention": func(s *graph.Node) (*graph.Node, *graph.Node) {
			return graph.RandomUniform(s, shapes.Make(dtypes.Float32, 2, 4, 64, 129))
		},
		"float64": func(s *graph.Node) (*graph.Node, *graph.Node) {
			return graph.RandomUniform(s, shapes.Make(dtypes.Float64, 9001))
		},
		"int32": func(s *graph.Node) (*graph.Node, *graph.Node) {
			return graph.RandomIntN(s, 1000, shapes.Make(dtypes.Int32, 8193))
		},
		"below threshold": func(s *graph.Node) (*graph.Node, *graph.Node) {
			return graph.RandomUniform(s, shapes.Make(dtypes.Float32, 7))
		},
	}
	for name, draw := range draws {
		t.Run(name, func(t *testing.T) {
			var results [2][]any
			for i, par := range []bool{true, false} {
				prev := SetParallel(par)
				e := graph.MustNewExec(be, func(state *graph.Node) []*graph.Node {
					var out []*graph.Node
					for range 3 {
						var v *graph.Node
						state, v = draw(state)
						out = append(out, v)
					}
					return append(out, state)
				})
				for _, r := range e.MustExec(seed) {
					results[i] = append(results[i], r.Value())
				}
				e.Finalize()
				SetParallel(prev)
			}
			for k := range results[0] {
				if !equalFlat(results[0][k], results[1][k]) {
					t.Fatalf("output %d differs between the multi-core and simplego RNGBitGenerator: %v vs %v", k, results[0][k], results[1][k])
				}
			}
		})
	}
}

func equalFlat(a, b any) bool {
	ta, tb := tensors.FromAnyValue(a), tensors.FromAnyValue(b)
	if !ta.Shape().Equal(tb.Shape()) {
		return false
	}
	var eq bool
	ta.ConstBytes(func(x []byte) { tb.ConstBytes(func(y []byte) { eq = slices.Equal(x, y) }) })
	return eq
}
