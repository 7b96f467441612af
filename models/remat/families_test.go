package remat_test

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/xlmr"
)

// family builds a tiny random model of one architecture, with dropout on,
// and its training loss; ckpt switches its GradientCheckpointing.
type family struct {
	name string
	// build returns the model's context and a loss over ids [2, 12] int32.
	build func(t *testing.T, ckpt bool) (*context.Context, func(ctx *context.Context, ids *graph.Node) *graph.Node)
}

const vocab = 96

func families() []family {
	be, _ := backend.New("go")
	mask := func(ids *graph.Node) *graph.Node { return graph.OnesLike(ids) }
	return []family{
		{"t5 (filter/pretrain)", func(t *testing.T, ckpt bool) (*context.Context, func(*context.Context, *graph.Node) *graph.Node) {
			c := t5.TinyConfig(vocab)
			c.DropoutRate = 0.1
			m, err := t5.NewRandom(be, c, 3)
			if err != nil {
				t.Fatal(err)
			}
			m.GradientCheckpointing = ckpt
			return m.Ctx, func(ctx *context.Context, ids *graph.Node) *graph.Node {
				dec := graph.Slice(ids, graph.AxisRange(), graph.AxisRange(0, 4))
				return t5.LossGraph(m.LogitsGraph(ctx, ids, mask(ids), dec), dec)
			}
		}},
		{"bert (retriever)", func(t *testing.T, ckpt bool) (*context.Context, func(*context.Context, *graph.Node) *graph.Node) {
			c := bert.TinyConfig(vocab)
			c.NumHiddenLayers = 3
			m, err := bert.NewRandom(be, c, false, 4)
			if err != nil {
				t.Fatal(err)
			}
			m.GradientCheckpointing = ckpt
			return m.Ctx, func(ctx *context.Context, ids *graph.Node) *graph.Node {
				h := m.EncoderGraph(ctx, ids, mask(ids), nil)
				e := bert.PoolGraph(h, mask(ids), bert.PoolCLS, true)
				return graph.ReduceAllSum(graph.Mul(e, graph.Sin(e)))
			}
		}},
		{"xlm-roberta (retriever)", func(t *testing.T, ckpt bool) (*context.Context, func(*context.Context, *graph.Node) *graph.Node) {
			m, err := xlmr.NewRandom(be, xlmr.TinyConfig(vocab), 5)
			if err != nil {
				t.Fatal(err)
			}
			m.GradientCheckpointing = ckpt
			return m.Ctx, func(ctx *context.Context, ids *graph.Node) *graph.Node {
				h := m.EncoderGraph(ctx, ids, mask(ids), nil)
				e := bert.PoolGraph(h, mask(ids), bert.PoolMean, true)
				return graph.ReduceAllSum(graph.Mul(e, graph.Sin(e)))
			}
		}},
		{"qwen2 + LoRA (lora/pretrain)", func(t *testing.T, ckpt bool) (*context.Context, func(*context.Context, *graph.Node) *graph.Node) {
			c, err := decoder.TinyConfig("qwen2", vocab)
			if err != nil {
				t.Fatal(err)
			}
			m, err := decoder.NewRandom(be, c, 6)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.AddLoRA(decoder.LoRA{R: 4, Alpha: 8, Dropout: 0.1, TargetModules: []string{"q_proj", "v_proj", "down_proj"}}, 7); err != nil {
				t.Fatal(err)
			}
			m.GradientCheckpointing = ckpt
			return m.Ctx, func(ctx *context.Context, ids *graph.Node) *graph.Node {
				pos := graph.Iota(ids.Graph(), ids.Shape(), 1)
				return m.LossGraph(ctx, ids, mask(ids), pos, ids)
			}
		}},
	}
}

// TestFamiliesGradients: one training graph of a tiny model of each family
// trained here gives the same loss and gradients (every trainable variable)
// with GradientCheckpointing as without, dropout on (the recomputation
// draws the same masks).
func TestFamiliesGradients(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, 2*12)
	for i := range ids {
		ids[i] = int32(2 + (i*37+5)%(vocab-2)) // past XLM-R's padding_idx 1
	}
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			nodes := map[bool]int{}
			run := func(ckpt bool) ([]string, []*tensors.Tensor) {
				mctx, loss := f.build(t, ckpt)
				if err := mctx.SetRNGStateFromSeed(9); err != nil {
					t.Fatal(err)
				}
				var names []string
				exec, err := context.NewExec(be, mctx, func(ctx *context.Context, ids *graph.Node) []*graph.Node {
					g := ids.Graph()
					ctx.SetTraining(g, true)
					l := loss(ctx, ids)
					var wrt []*graph.Node
					names = names[:0]
					for v := range ctx.IterVariables() {
						if v.Trainable && v.InUseByGraph(g) && v.DType() == dtypes.Float32 {
							wrt = append(wrt, v.ValueGraph(g))
							names = append(names, v.ScopeAndName())
						}
					}
					out := append([]*graph.Node{l}, graph.Gradient(l, wrt...)...)
					nodes[ckpt] = len(g.Nodes())
					return out
				})
				if err != nil {
					t.Fatal(err)
				}
				out, err := exec.Exec(tensors.FromFlatDataAndDimensions(ids, 2, 12))
				if err != nil {
					t.Fatal(err)
				}
				return append([]string{"loss"}, names...), out
			}
			names, want := run(false)
			gotNames, got := run(true)
			if nodes[true] <= nodes[false] {
				t.Fatalf("%d graph nodes with checkpointing, %d without: the blocks were not recomputed", nodes[true], nodes[false])
			}
			if len(names) != len(gotNames) || len(want) != len(got) {
				t.Fatalf("%d gradients with checkpointing, %d without", len(got), len(want))
			}
			worst, at := 0.0, ""
			for i := range want {
				w, _ := tensors.CopyFlatData[float32](want[i])
				g, _ := tensors.CopyFlatData[float32](got[i])
				for j := range w {
					if d := math.Abs(float64(w[j] - g[j])); d > worst || math.IsNaN(d) {
						worst, at = d, names[i]
					}
				}
			}
			if !(worst <= 1e-5) {
				t.Errorf("max |Δ| %g (at %s) over the loss and %d gradients; want ≤ 1e-5", worst, at, len(want)-1)
			}
			t.Logf("loss %g; %d gradients, max |Δ| %g; graph nodes %d → %d", tensors.ToScalar[float32](want[0]), len(want)-1, worst, nodes[false], nodes[true])
		})
	}
}
