package trainer

import (
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26 defines no gradient for Rsqrt, which the T5 RMS norm uses
// (models/t5 rmsNorm). Register d(x^-½)/dx = −½·x^-3/2 = −½·rsqrt(x)³
// through GoMLX's documented extension point, unless a later GoMLX has one.
func init() {
	if _, ok := graph.VJPRegistration[graph.NodeTypeRsqrt]; ok {
		return
	}
	graph.VJPRegistration[graph.NodeTypeRsqrt] = func(node *graph.Node, v []*graph.Node, _ shapes.Shape) []*graph.Node {
		cube := graph.Mul(node, graph.Square(node))
		return []*graph.Node{graph.Mul(v[0], graph.MulScalar(cube, -0.5))}
	}
}
