// Package remat is per-block gradient checkpointing (HF
// gradient_checkpointing, torch.utils.checkpoint) inside one GoMLX v0.26
// graph: a block's forward activations are freed as soon as its output is
// computed, and the backward pass recomputes the block from its input, once
// the gradient of its output has arrived, to take the block's
// vector-Jacobian product. The training step then keeps only the block
// inputs ([B, L, H] per layer) plus one block's activations at a time.
//
// GoMLX v0.26 has no rematerialisation (v0.28's Node.Checkpoint clones the
// block's nodes during autodiff, behind a SchedulingBarrier). It works here
// because the simplego executor frees every buffer at its last use and runs
// an op only when its inputs are ready: the recomputed block reads its input
// through a select that depends on the incoming gradient, so it cannot run
// before the later blocks' backward pass (sequential or parallel execution).
//
// The block is wired into the autodiff with public API only
// (graph.IdentityWithCustomGradient): its output is StopGradient(f(x)) plus
// an exact zero that carries the gradient to a connector on x, and each
// other float input of the block (weights, attention bias, encoder states)
// gets an identity whose custom gradient returns what the connector's
// recomputation found for it.
package remat

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Block returns f(x) for a block whose output has x's shape (a transformer
// layer's residual stream [B, L, H]), computed so that the backward pass
// recomputes f instead of keeping its activations. f may read context
// variables and any node built before the call (masks, position bias,
// encoder output); gradients reach all of them as without checkpointing.
// Dropout inside f draws the same bits when recomputed: the context's RNG
// state (which must exist before the call when f uses it) is rewound for
// the recomputation. Values are identical to f(x); gradients equal up to
// float32 summation order.
//
// Use it only in graphs whose gradient is taken (training); it panics when
// f's output shape differs from x's.
func Block(ctx *context.Context, x *graph.Node, f func(x *graph.Node) *graph.Node) *graph.Node {
	g := x.Graph()
	rng := ctx.GetVariableByScopeAndName(context.RootScope, context.RNGStateVariableName)
	var rngStart *graph.Node
	if rng != nil {
		rngStart = rng.ValueGraph(g)
	}
	first := graph.NodeId(len(g.Nodes()))
	y := f(x)
	if !y.Shape().Equal(x.Shape()) {
		panic(fmt.Errorf("remat.Block: block output %s differs from its input %s", y.Shape(), x.Shape()))
	}
	if rng == nil && ctx.GetVariableByScopeAndName(context.RootScope, context.RNGStateVariableName) != nil {
		panic(fmt.Errorf("remat.Block: the block created the context's RNG state; seed it (SetRNGStateFromSeed) before building the graph"))
	}
	ext := externals(y, x, first)
	checkLeaves(ext)

	// Gradients of ext, found by the connector's recomputation.
	grads := make([]*graph.Node, len(ext))
	zero := graph.ScalarZero(g, dtypes.Float32)
	for i, e := range ext {
		z := graph.IdentityWithCustomGradient(e, func(_, _ *graph.Node) *graph.Node {
			if grads[i] == nil {
				panic(fmt.Errorf("remat.Block: input %d (%s) reached before the block's recomputation", i, e.Shape()))
			}
			return grads[i]
		})
		zero = graph.Add(zero, graph.ConvertDType(firstElement(z), dtypes.Float32))
	}
	// Exactly 0 (a select, not a product: a NaN input stays out of it) but
	// differentiable back to every z, so their gradients are asked for.
	zero = graph.Where(graph.Const(g, false), zero, graph.ScalarZero(g, dtypes.Float32))
	xx := graph.Add(x, graph.ConvertDType(zero, x.DType()))
	conn := graph.IdentityWithCustomGradient(xx, func(_, v *graph.Node) *graph.Node {
		v = graph.StopGradient(v)
		// The recomputation depends on v: it runs after the later blocks' backward.
		ready := graph.IsFinite(firstElement(v))
		// A leaf: the gradient must not flow on into the earlier blocks.
		xs := graph.StopGradient(x)
		xr := graph.Where(ready, xs, xs)
		var cur *graph.Node
		if rng != nil {
			cur = rng.ValueGraph(g)
			rng.SetValueGraph(graph.Where(ready, rngStart, rngStart))
		}
		yr := f(xr)
		if rng != nil {
			rng.SetValueGraph(cur)
		}
		wrt := append([]*graph.Node{xr}, ext...)
		d := graph.Gradient(graph.ReduceAllSum(graph.Mul(yr, v)), wrt...)
		copy(grads, d[1:])
		return d[0]
	})
	return graph.Add(graph.StopGradient(y), graph.Sub(conn, graph.StopGradient(xx)))
}

// externals lists the float nodes a block's output y reads from outside the
// block (built before node first, x excluded) and the parameters (context
// variables) first read inside it, in the order a walk from y finds them.
func externals(y, x *graph.Node, first graph.NodeId) []*graph.Node {
	seen := map[graph.NodeId]bool{}
	var ext []*graph.Node
	var walk func(n *graph.Node)
	walk = func(n *graph.Node) {
		if seen[n.Id()] {
			return
		}
		seen[n.Id()] = true
		outside := n.Id() < first
		if outside || n.Type() == graph.NodeTypeParameter {
			// Constants (shared between blocks by the graph) need no gradient.
			if n != x && n.DType().IsFloat() && n.Type() != graph.NodeTypeConstant {
				ext = append(ext, n)
			}
			if outside {
				return
			}
		}
		for _, in := range n.Inputs() {
			walk(in)
		}
	}
	walk(y)
	return ext
}

// checkLeaves panics when an input of the block is computed from another
// one: the recomputation's gradient of the earlier one would then include
// the path through the later one, which the outer backward pass adds again.
func checkLeaves(ext []*graph.Node) {
	isExt := map[graph.NodeId]int{}
	for i, e := range ext {
		isExt[e.Id()] = i
	}
	for _, e := range ext {
		seen := map[graph.NodeId]bool{}
		stack := append([]*graph.Node(nil), e.Inputs()...)
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[n.Id()] {
				continue
			}
			seen[n.Id()] = true
			if i, ok := isExt[n.Id()]; ok {
				panic(fmt.Errorf("remat.Block: block input %s is computed from block input %s, which the block also reads directly; read only one of them", e, ext[i]))
			}
			stack = append(stack, n.Inputs()...)
		}
	}
}

// firstElement is n's first element as a scalar (a scalar n itself).
func firstElement(n *graph.Node) *graph.Node {
	if n.Rank() == 0 {
		return n
	}
	ranges := make([]graph.SliceAxisSpec, n.Rank())
	for i := range ranges {
		ranges[i] = graph.AxisRange(0, 1)
	}
	return graph.Reshape(graph.Slice(n, ranges...))
}

// If is Block when on and x's graph is a training graph
// (ctx.IsTraining), else f(x): the switch every model's layer loop uses
// for its GradientCheckpointing field.
func If(on bool, ctx *context.Context, x *graph.Node, f func(x *graph.Node) *graph.Node) *graph.Node {
	if on && ctx.IsTraining(x.Graph()) {
		return Block(ctx, x, f)
	}
	return f(x)
}
