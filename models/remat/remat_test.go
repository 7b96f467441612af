package remat

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
	"github.com/ragforge/ragforge/models/nn"

	"github.com/ragforge/ragforge/models/backend"
	_ "github.com/ragforge/ragforge/models/backend/hook"
)

// toyBlock is a residual tanh MLP with dropout reading a bias built outside
// the block (like T5's shared position bias) and variables of its layer.
func toyBlock(ctx *context.Context, i int, x, shared *graph.Node) *graph.Node {
	c := ctx.In("layer").In(string(rune('a' + i)))
	w := c.VariableWithShape("w", shapes.Make(dtypes.Float32, 6, 6)).ValueGraph(x.Graph())
	h := graph.Tanh(graph.Add(graph.Einsum("bld,de->ble", x, w), shared))
	h = nn.Dropout(c, h, 0.25)
	return graph.Add(x, h)
}

// TestBlockGradients: loss and gradients (variables, the outside bias's own
// variable, the input) equal with and without recomputation, dropout on.
func TestBlockGradients(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	run := func(checkpoint bool) []*tensors.Tensor {
		ctx := context.New().Checked(false)
		ctx.SetParam(context.ParamInitialSeed, int64(7))
		ctx = ctx.WithInitializer(initializers.RandomNormalFn(ctx, 0.5))
		if err := ctx.SetRNGStateFromSeed(11); err != nil {
			t.Fatal(err)
		}
		exec, err := context.NewExec(be, ctx, func(ctx *context.Context, x *graph.Node) []*graph.Node {
			g := x.Graph()
			ctx.SetTraining(g, true)
			b := ctx.VariableWithShape("bias", shapes.Make(dtypes.Float32, 6)).ValueGraph(g)
			shared := graph.Reshape(graph.Sin(b), 1, 1, 6)
			h := graph.Mul(x, graph.Const(g, float32(1.5))) // x's own gradient path
			for i := range 3 {
				if checkpoint {
					h = Block(ctx, h, func(h *graph.Node) *graph.Node { return toyBlock(ctx, i, h, shared) })
				} else {
					h = toyBlock(ctx, i, h, shared)
				}
			}
			loss := graph.ReduceAllSum(graph.Square(h))
			var wrt []*graph.Node
			for v := range ctx.IterVariables() {
				if v.Trainable && v.InUseByGraph(g) {
					wrt = append(wrt, v.ValueGraph(g))
				}
			}
			wrt = append(wrt, x)
			return append([]*graph.Node{loss}, graph.Gradient(loss, wrt...)...)
		})
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, 4*5*6)
		for i := range x {
			x[i] = float32(math.Sin(float64(i)))
		}
		return exec.MustExec(tensors.FromFlatDataAndDimensions(x, 4, 5, 6))
	}
	want, got := run(false), run(true)
	if len(want) != len(got) || len(want) != 1+3+1+1 {
		t.Fatalf("%d outputs with checkpointing, %d without; want 6", len(got), len(want))
	}
	for i := range want {
		w, g := want[i].Value(), got[i].Value()
		wf, gf := flat(w), flat(g)
		worst := 0.0
		for j := range wf {
			worst = max(worst, math.Abs(float64(wf[j]-gf[j])))
		}
		if worst > 1e-5 {
			t.Errorf("output %d: max |Δ| %g with checkpointing", i, worst)
		}
	}
}

func flat(v any) []float32 {
	switch x := v.(type) {
	case float32:
		return []float32{x}
	case [][]float32:
		var out []float32
		for _, r := range x {
			out = append(out, r...)
		}
		return out
	case []float32:
		return x
	case [][][]float32:
		var out []float32
		for _, r := range x {
			for _, c := range r {
				out = append(out, c...)
			}
		}
		return out
	}
	panic("unexpected value type")
}
