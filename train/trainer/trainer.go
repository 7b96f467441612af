package trainer

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/ragforge/ragforge/internal/catch"
)

// StateScope is the context scope holding the trainer's own variables:
// AdamW moments under StateScope+"/m" and StateScope+"/v", gradient
// accumulators under StateScope+"/acc" (each mirroring the parameter's path).
const StateScope = "/trainer"

// LossFn builds the scalar float32 training loss of one micro-batch from its
// input nodes, in the graph of inputs[0]. ctx is the root context that holds
// the model's variables, with ctx.IsTraining true (dropout on).
type LossFn func(ctx *context.Context, inputs []*graph.Node) *graph.Node

// Trainer runs AdamW updates of every trainable variable of a context that
// the loss uses (variables under StateScope excluded). One executable is
// compiled per micro-batch shape and update mode, and cached.
//
// Not safe for concurrent use.
type Trainer struct {
	cfg       Config
	backend   backends.Backend
	ctx       *context.Context
	loss      LossFn
	noDecay   func(string) bool
	step      int      // completed updates
	vars      []string // context paths of the gradients a grad-mode graph returns
	lastGrads map[string]*tensors.Tensor
	skipped   int // updates skipped as non-finite (SkipNonFinite)
	execs     map[mode]*context.Exec
}

// ErrNonFinite is wrapped by the error of an update whose loss or gradient is
// not finite (without Config.SkipNonFinite).
var ErrNonFinite = errors.New("loss or gradient is not finite")

// mode selects the graph run for one micro-batch of an update group.
type mode int

const (
	accFirst   mode = iota // acc  = s·g
	accAdd                 // acc += s·g
	applyFresh             // update with s·g (group of one micro-batch)
	applyAcc               // update with acc + s·g
	gradFresh              // return s·g, no update
	gradAcc                // return acc + s·g, no update
)

// StepResult describes one optimiser update.
type StepResult struct {
	Step         int     // updates completed, this one included
	Loss         float64 // mean of the micro-batch losses (before scaling)
	LearningRate float64 // learning rate this update used
	GradNorm     float64 // global L2 norm of the accumulated gradient, before clipping
	// Skipped is true for an update dropped because its loss or gradient
	// was not finite (Config.SkipNonFinite): nothing changed, Step is the
	// unchanged update count and LearningRate the rate it would have used.
	Skipped bool
}

// New returns a trainer for the variables of ctx. ctx's RNG (dropout) state
// is left as is: seed it (ctx.SetRNGStateFromSeed) or restore it (LoadState)
// before the first Step. Errors: an invalid cfg.
func New(backend backends.Backend, ctx *context.Context, loss LossFn, cfg Config) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	nd := cfg.NoDecay
	if nd == nil {
		nd = DefaultNoDecay
	}
	return &Trainer{cfg: cfg, backend: backend, ctx: ctx, loss: loss, noDecay: nd, execs: map[mode]*context.Exec{}}, nil
}

// Config returns the trainer's configuration.
func (t *Trainer) Config() Config { return t.cfg }

// GlobalStep is the number of updates completed (restored by LoadState).
func (t *Trainer) GlobalStep() int { return t.step }

// SkippedNonFinite is the number of updates skipped because their loss or
// gradient was not finite (restored by LoadState).
func (t *Trainer) SkippedNonFinite() int { return t.skipped }

// LearningRate is the rate the next update will use (Schedule with Config.Scheduler).
func (t *Trainer) LearningRate() float64 {
	return Schedule(t.cfg.Scheduler, t.step, t.cfg.Warmup(), t.cfg.TotalSteps, t.cfg.LearningRate)
}

// RejectNonFinite applies the non-finite policy to an update whose loss was
// found not finite outside the trainer (before Step was called, e.g. by a
// caller computing its own loss): with Config.SkipNonFinite it counts the
// update as skipped and returns a Skipped result, otherwise an error wrapping
// ErrNonFinite. Nothing else changes.
func (t *Trainer) RejectNonFinite(loss float64) (StepResult, error) {
	return t.nonFinite(StepResult{Loss: loss, LearningRate: t.LearningRate()}, "loss is "+fmt.Sprint(loss))
}

func (t *Trainer) nonFinite(res StepResult, why string) (StepResult, error) {
	res.Step = t.step
	if !t.cfg.SkipNonFinite {
		return res, fmt.Errorf("trainer step %d: %s: %w (parameters and optimizer state left unchanged)", t.step+1, why, ErrNonFinite)
	}
	t.skipped++
	res.Skipped = true
	return res, nil
}

// Step runs one optimiser update over the micro-batches of one accumulation
// group: each micro-batch's loss is scaled by 1/len(micro) and its gradients
// are summed (Accelerate / HF accumulation), then the sum is clipped to
// MaxGradNorm and AdamW (torch.optim.AdamW) is applied with the learning rate
// of Schedule. Every micro-batch is a list of input tensors passed to the
// LossFn in order.
//
// An update whose loss (any micro-batch's) or accumulated gradient is not
// finite changes no parameter, moment or update count (the new values are
// selected away inside the graph, so the old ones stay bit-identical); it is
// an error wrapping ErrNonFinite, or with Config.SkipNonFinite a result with
// Skipped set. Errors: an empty group, graph construction or execution
// failures (panics converted), a non-finite update.
func (t *Trainer) Step(micro [][]*tensors.Tensor) (StepResult, error) {
	return t.pass(micro, false)
}

// Gradients computes the gradient of one update group exactly as Step does
// (micro-batch losses scaled by 1/len(micro) and summed, before clipping)
// without changing any parameter, moment or the update count. It returns the
// gradient of every trainable variable the loss uses, by context path
// ("/encoder/…/weight"), and a result with Loss and GradNorm (Step and
// LearningRate describe the next update). The dropout RNG state advances as
// in Step. Errors: as Step's, without the non-finite check.
func (t *Trainer) Gradients(micro [][]*tensors.Tensor) (map[string]*tensors.Tensor, StepResult, error) {
	res, err := t.pass(micro, true)
	if err != nil {
		return nil, res, err
	}
	grads := t.lastGrads
	t.lastGrads = nil
	return grads, res, nil
}

// pass runs the micro-batches of one group; gradOnly returns the gradients
// (into t.lastGrads) instead of updating.
func (t *Trainer) pass(micro [][]*tensors.Tensor, gradOnly bool) (StepResult, error) {
	n := len(micro)
	if n == 0 {
		return StepResult{}, fmt.Errorf("trainer step %d: no micro-batches", t.step+1)
	}
	lr := t.LearningRate()
	next := t.step + 1
	bc1 := 1 - math.Pow(t.cfg.Beta1, float64(next))
	bc2 := 1 - math.Pow(t.cfg.Beta2, float64(next))
	// hyper = [scale, lr, step size lr/bc1, sqrt(bc2)].
	hyper := tensors.FromValue([]float32{float32(1 / float64(n)), float32(lr), float32(lr / bc1), float32(math.Sqrt(bc2))})
	res := StepResult{Step: t.step, LearningRate: lr}
	for i, in := range micro {
		md := accAdd
		switch {
		case n == 1:
			md = applyFresh
		case i == 0:
			md = accFirst
		case i == n-1:
			md = applyAcc
		}
		if gradOnly && md == applyFresh {
			md = gradFresh
		} else if gradOnly && md == applyAcc {
			md = gradAcc
		}
		out, err := t.run(md, in, hyper)
		if err != nil {
			return StepResult{}, fmt.Errorf("trainer step %d: micro-batch %d: %w", next, i, err)
		}
		l := float64(tensors.ToScalar[float32](out[0]))
		res.Loss += l / float64(n)
		if md == accFirst || md == accAdd {
			if !gradOnly && !isFinite(l) {
				// The group's gradient is not used: stop before the update.
				return t.nonFinite(res, fmt.Sprintf("micro-batch %d: loss is %v", i, l))
			}
			continue
		}
		res.GradNorm = float64(tensors.ToScalar[float32](out[1]))
		if gradOnly {
			t.lastGrads = map[string]*tensors.Tensor{}
			for k, v := range t.vars {
				t.lastGrads[v] = out[2+k]
			}
			return res, nil
		}
		if !tensors.ToScalar[bool](out[2]) {
			return t.nonFinite(res, fmt.Sprintf("loss %v, gradient norm %v", res.Loss, res.GradNorm))
		}
	}
	t.step = next
	res.Step = next
	return res, nil
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func (t *Trainer) run(md mode, in []*tensors.Tensor, hyper *tensors.Tensor) (out []*tensors.Tensor, err error) {
	e, ok := t.execs[md]
	if !ok {
		e, err = context.NewExecAny(t.backend, t.ctx, func(ctx *context.Context, nodes []*graph.Node) []*graph.Node {
			return t.graph(ctx, md, nodes)
		})
		if err != nil {
			return nil, err
		}
		t.execs[md] = e
	}
	args := make([]any, 0, len(in)+1)
	for _, x := range in {
		args = append(args, x)
	}
	args = append(args, hyper)
	var xerr error
	if err = catch.Do(func() { out, xerr = e.Exec(args...) }); err != nil {
		return nil, err
	}
	return out, xerr
}

// trainable lists the variables the update touches, in context order.
func (t *Trainer) trainable(g *graph.Graph) []*context.Variable {
	var vs []*context.Variable
	for v := range t.ctx.IterVariables() {
		if v.Trainable && v.InUseByGraph(g) && !strings.HasPrefix(v.Scope(), StateScope) {
			vs = append(vs, v)
		}
	}
	return vs
}

// stateVar returns (creating with zeros) the trainer variable mirroring v under StateScope/kind.
func stateVar(ctx *context.Context, kind string, v *context.Variable) *context.Variable {
	scope := StateScope + "/" + kind + strings.TrimSuffix(v.Scope(), context.ScopeSeparator)
	c := ctx.InAbsPath(scope)
	if sv := c.GetVariable(v.Name()); sv != nil {
		return sv
	}
	// A concrete zero value (not a lazy initializer): GoMLX executables fail
	// on a variable that a graph only writes and that has no value yet.
	return c.Checked(false).VariableWithValue(v.Name(), tensors.FromShape(v.Shape())).SetTrainable(false)
}

// graph builds one micro-batch computation; nodes are the LossFn inputs then hyper [4].
func (t *Trainer) graph(ctx *context.Context, md mode, nodes []*graph.Node) []*graph.Node {
	g := nodes[0].Graph()
	ctx.SetTraining(g, true)
	hyper := nodes[len(nodes)-1]
	at := func(i int) *graph.Node { return graph.Reshape(graph.Slice(hyper, graph.AxisRange(i, i+1))) }
	scale := at(0)
	loss := t.loss(ctx, nodes[:len(nodes)-1])
	if !loss.Shape().IsScalar() || loss.DType() != dtypes.Float32 {
		panic(fmt.Errorf("loss must be a float32 scalar, got %s", loss.Shape()))
	}
	vars := t.trainable(g)
	if len(vars) == 0 {
		panic(fmt.Errorf("no trainable variable is used by the loss"))
	}
	values := make([]*graph.Node, len(vars))
	for i, v := range vars {
		values[i] = v.ValueGraph(g)
	}
	var accs []*context.Variable
	root := graph.Mul(loss, scale)
	if md == accFirst || md == accAdd || md == applyAcc || md == gradAcc {
		accs = make([]*context.Variable, len(vars))
		for i, v := range vars {
			accs[i] = stateVar(ctx, "acc", v)
			prior := accs[i].ValueGraph(g)
			if md == accFirst {
				// Zeros in acc's own buffer: acc may hold a NaN left by a
				// rejected group, which 0·acc would keep.
				prior = graph.Where(graph.Const(g, false), prior, graph.ScalarZero(g, dtypes.Float32))
			}
			root = graph.Add(root, seedGradient(values[i], prior))
		}
	}
	grads := graph.Gradient(root, values...)
	if md == accFirst || md == accAdd {
		for i, acc := range accs {
			acc.SetValueGraph(grads[i])
		}
		return []*graph.Node{loss}
	}
	// Global L2 norm (torch clip_grad_norm_, norm_type 2).
	sumSq := graph.ScalarZero(g, dtypes.Float32)
	for _, gr := range grads {
		sumSq = graph.Add(sumSq, graph.ReduceAllSum(graph.Square(gr)))
	}
	norm := graph.Sqrt(sumSq)
	if md == gradFresh || md == gradAcc {
		t.vars = t.vars[:0]
		for _, v := range vars {
			t.vars = append(t.vars, v.Scope()+context.ScopeSeparator+v.Name())
		}
		return append([]*graph.Node{loss, norm}, grads...)
	}
	// A non-finite loss or gradient (the norm is then not finite) keeps every
	// old value: the gradient is replaced by zeros and the update's scalar
	// coefficients by identities (m·1 + 0, v·1 + 0, p·1 − 0·m/denom, with m
	// finite and denom ≥ ε), so that each new value is written over its old
	// buffer instead of both living until a select.
	ok := graph.LogicalAnd(graph.IsFinite(loss), graph.IsFinite(norm))
	zero := graph.ScalarZero(g, dtypes.Float32)
	gate := func(x, otherwise float64) *graph.Node {
		return graph.Where(ok, graph.Scalar(g, dtypes.Float32, x), graph.Scalar(g, dtypes.Float32, otherwise))
	}
	var clip *graph.Node
	if t.cfg.MaxGradNorm > 0 {
		clip = graph.Div(graph.Scalar(g, dtypes.Float32, t.cfg.MaxGradNorm), graph.AddScalar(norm, 1e-6))
		clip = graph.Where(ok, graph.Min(clip, graph.Scalar(g, dtypes.Float32, 1)), zero)
	}
	lr, stepSize, sqrtBC2 := at(1), at(2), at(3)
	b1, b2 := t.cfg.Beta1, t.cfg.Beta2
	keepB1, newB1 := gate(b1, 1), gate(1-b1, 0)
	keepB2, newB2 := gate(b2, 1), gate(1-b2, 0)
	stepSize = graph.Where(ok, stepSize, zero)
	decay := graph.OneMinus(graph.MulScalar(graph.Where(ok, lr, zero), t.cfg.WeightDecay))
	// One variable at a time (the pure-Go executor runs nodes in the order
	// they are built), so the temporaries of only one are alive at once.
	for i, v := range vars {
		gr := graph.Where(ok, grads[i], zero)
		if clip != nil {
			gr = graph.Mul(gr, clip)
		}
		if accs != nil {
			// acc's buffer was donated and freed in the backward pass; it
			// now holds the update's gradient (accFirst overwrites it).
			accs[i].SetValueGraph(gr)
		}
		p := values[i]
		if t.cfg.WeightDecay > 0 && !t.noDecay(v.Scope()+context.ScopeSeparator+v.Name()) {
			p = graph.Mul(p, decay)
		}
		mv, vv := stateVar(ctx, "m", v), stateVar(ctx, "v", v)
		m := graph.Add(graph.Mul(mv.ValueGraph(g), keepB1), graph.Mul(gr, newB1))
		s := graph.Add(graph.Mul(vv.ValueGraph(g), keepB2), graph.Mul(graph.Square(gr), newB2))
		denom := graph.AddScalar(graph.Div(graph.Sqrt(s), sqrtBC2), t.cfg.Epsilon)
		p = graph.Sub(p, graph.Mul(stepSize, graph.Div(m, denom)))
		mv.SetValueGraph(m)
		vv.SetValueGraph(s)
		v.SetValueGraph(p)
	}
	return []*graph.Node{loss, norm, ok}
}

// seedGradient returns a scalar whose gradient with respect to value is
// prior. Added to the loss, it makes the backward pass start value's
// gradient from prior (the accumulator), so each fresh gradient is added to
// it as soon as it is computed (as torch's AccumulateGrad does) rather than
// all of them living until the pass ends. The scalar itself is never
// computed: no output depends on it.
func seedGradient(value, prior *graph.Node) *graph.Node {
	return graph.ReduceAllSum(graph.IdentityWithCustomGradient(value, func(_, _ *graph.Node) *graph.Node { return prior }))
}
