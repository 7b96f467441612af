package nn

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Dropout zeroes each element of x with probability rate while ctx is
// training and scales the kept ones by 1/(1-rate) (torch.nn.Dropout); at
// rate ≤ 0 or outside training it returns x. The mask is GoMLX's
// layers.Dropout one, drawn the same way from ctx's RNG state (a float32
// uniform u, dropped when u ≤ rate), so models/remat replays it. It is
// Where(u > rate, x, 0)·1/(1-rate): layers.Dropout also materialises the
// broadcast rate and a tensor of zeros, and divides, on tensors as large as
// the attention probabilities; the backward pass keeps only the boolean
// mask (a float mask would be four times its size).
func Dropout(ctx *context.Context, x *graph.Node, rate float64) *graph.Node {
	g := x.Graph()
	if rate <= 0 || !ctx.IsTraining(g) {
		return x
	}
	u := ctx.RandomUniform(g, shapes.Make(dtypes.Float32, x.Shape().Dimensions...))
	keep := graph.GreaterThan(u, graph.Scalar(g, dtypes.Float32, rate))
	return graph.MulScalar(graph.Where(keep, x, graph.ScalarZero(g, x.DType())), 1/(1-rate))
}
