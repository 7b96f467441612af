package nn

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"

	"github.com/ragforge/ragforge/models/backend"
)

// TestDropout: outside training and at rate 0 x comes back unchanged; while
// training, the elements dropped are exactly those GoMLX's layers.Dropout
// drops from the same RNG state, and each kept one is x/(1-rate) to the
// rounding of a multiplication by the reciprocal.
func TestDropout(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	const rows, cols = 64, 1031 // above the multi-core executors' threshold
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(i%97) - 40.5 // never zero
	}
	in := tensors.FromFlatDataAndDimensions(x, rows, cols)
	run := func(training bool, rate float64, f func(ctx *context.Context, x *graph.Node, rate float64) *graph.Node) []float32 {
		ctx := context.New()
		if err := ctx.SetRNGStateFromSeed(3); err != nil {
			t.Fatal(err)
		}
		e, err := context.NewExec(be, ctx, func(ctx *context.Context, x *graph.Node) *graph.Node {
			ctx.SetTraining(x.Graph(), training)
			return f(ctx, x, rate)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Finalize()
		return tensors.MustCopyFlatData[float32](e.MustExec(in)[0])
	}
	gomlx := func(ctx *context.Context, x *graph.Node, rate float64) *graph.Node {
		return layers.DropoutStatic(ctx, x, rate)
	}
	for _, c := range []struct {
		training bool
		rate     float64
	}{{false, 0.1}, {true, 0}} {
		for i, v := range run(c.training, c.rate, Dropout) {
			if v != x[i] {
				t.Fatalf("training %v rate %g: element %d is %g, want x = %g", c.training, c.rate, i, v, x[i])
			}
		}
	}
	for _, rate := range []float64{0.1, 0.5} {
		got, want := run(true, rate, Dropout), run(true, rate, gomlx)
		dropped := 0
		for i := range got {
			if (got[i] == 0) != (want[i] == 0) {
				t.Fatalf("rate %g: element %d is %g, layers.Dropout gives %g (different mask)", rate, i, got[i], want[i])
			}
			if got[i] == 0 {
				dropped++
				continue
			}
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*math.Abs(float64(want[i])) {
				t.Fatalf("rate %g: kept element %d is %g, want x/(1-rate) = %g", rate, i, got[i], want[i])
			}
		}
		if f := float64(dropped) / float64(len(got)); math.Abs(f-rate) > 0.01 {
			t.Fatalf("rate %g: dropped a fraction %.4f", rate, f)
		}
	}
}
