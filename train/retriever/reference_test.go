package retriever

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/train/trainer"
)

// The reference below is the straightforward single-graph training step
// (every row of a micro-batch padded to the micro-batch's longest row and
// encoded inside one loss graph, duplicates included). Train's gradient
// caching must give the same losses, gradient norms and weights.

// padRows packs rows into ids/mask [len(rows), BucketLength(longest)] int32.
func padRows(rows [][]int, pad, maxTok int) (ids, mask *tensors.Tensor) {
	l := 1
	for _, r := range rows {
		l = max(l, len(r))
	}
	l = bert.BucketLength(l, maxTok)
	fi := make([]int32, len(rows)*l)
	fm := make([]int32, len(rows)*l)
	for i, r := range rows {
		for j := range l {
			fi[i*l+j] = int32(pad)
			if j < len(r) {
				fi[i*l+j], fm[i*l+j] = int32(r[j]), 1
			}
		}
	}
	return tensors.FromFlatDataAndDimensions(fi, len(rows), l), tensors.FromFlatDataAndDimensions(fm, len(rows), l)
}

// batchTensors builds one micro-batch: query ids/mask [b, Lq]; when nh > 0
// hypothetical ids/mask [b·nh, Lh] and weights [b, nh]; passage ids/mask
// [b + b·n, Lp] (positives, then n negative slots per query); and the
// candidate mask [b, b + b·n] float32.
func batchTensors(tk *tokenized, ts []Triplet, idx []int, n, nh, maxTok, pad int) []*tensors.Tensor {
	b := len(idx)
	q := make([][]int, b)
	var hypo [][]int
	hw := make([]float32, b*nh)
	pass := make([][]int, b, b+b*n)
	posIDs := make([]string, b)
	negIDs := make([][]string, b)
	var negRows [][]int
	for i, t := range idx {
		q[i], pass[i], posIDs[i] = tk.q[t], tk.pos[t], ts[t].Pos
		for k := 0; k < nh; k++ {
			if k < len(tk.hypo[t]) {
				hypo = append(hypo, tk.hypo[t][k])
				hw[i*nh+k] = 1
			} else {
				hypo = append(hypo, tk.empty)
			}
		}
		negIDs[i] = make([]string, n)
		for k := 0; k < n; k++ {
			if k < len(tk.negs[t]) {
				negRows = append(negRows, tk.negs[t][k])
				negIDs[i][k] = ts[t].Negs[k]
			} else {
				negRows = append(negRows, tk.empty) // masked: id ""
			}
		}
	}
	pass = append(pass, negRows...)
	valid := CandidateMask(posIDs, negIDs)
	fv := make([]float32, 0, b*len(pass))
	for _, row := range valid {
		for _, ok := range row {
			fv = append(fv, b2f(ok))
		}
	}
	qi, qm := padRows(q, pad, maxTok)
	out := []*tensors.Tensor{qi, qm}
	if nh > 0 {
		hi, hm := padRows(hypo, pad, maxTok)
		out = append(out, hi, hm, tensors.FromFlatDataAndDimensions(hw, b, nh))
	}
	pi, pm := padRows(pass, pad, maxTok)
	return append(out, pi, pm, tensors.FromFlatDataAndDimensions(fv, b, len(pass)))
}

// lossGraph is the training loss of one micro-batch (inputs as batchTensors).
func lossGraph(m *bert.Model, ctx *mlctx.Context, in []*graph.Node, cfg Config, nh int) *graph.Node {
	embed := func(ids, mask *graph.Node) *graph.Node {
		return bert.PoolGraph(m.EncoderGraph(ctx, ids, mask, nil), mask, cfg.Pooling, cfg.Normalize)
	}
	q := embed(in[0], in[1]) // [b, H]
	rest := in[2:]
	if nh > 0 {
		q = FuseGraph(q, embed(rest[0], rest[1]), rest[2], cfg.Normalize)
		rest = rest[3:]
	}
	p := embed(rest[0], rest[1]) // [b + b·n, H]
	return InfoNCEGraph(q, p, rest[2], cfg.Temperature)
}

// dupTriplets has a hard negative equal to another query's positive, a
// repeated hypothetical document, a triplet without hypothetical documents
// and one with fewer negatives, so deduplication and missing slots are
// exercised.
var dupTriplets = []Triplet{
	{Query: "what causes gout?", HypoDocs: []string{"uric acid crystals in the joint"}, Pos: "gout is caused by uric acid crystals", Negs: []string{"asthma causes wheeze in the lungs", "kidney stone pain"}},
	{Query: "asthma symptoms", HypoDocs: []string{"uric acid crystals in the joint"}, Pos: "asthma causes wheeze in the lungs", Negs: []string{"eczema is a skin rash", "gout is caused by uric acid crystals"}},
	{Query: "eczema treatment", Pos: "eczema skin rash treatment", Negs: []string{"insulin for diabetes"}},
	{Query: "aspirin dose for heart attack", HypoDocs: []string{"aspirin mg daily"}, Pos: "aspirin daily dose mg heart", Negs: []string{"kidney stone pain", "eczema is a skin rash"}},
	{Query: "insulin", HypoDocs: []string{"insulin dose for blood sugar in diabetes and the kidney"}, Pos: "insulin for diabetes", Negs: []string{"aspirin daily dose mg heart", "asthma is a disease of the airway"}},
}

// referenceTrain runs cfg's updates with the single-graph loss.
func referenceTrain(t *testing.T, cfg Config, ts []Triplet, dir string) ([]trainer.StepResult, *bert.Model) {
	t.Helper()
	be, err := backend.New(cfg.Backend)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bert.Load(be, dir)
	if err != nil {
		t.Fatal(err)
	}
	maxTok := min(cfg.MaxLength, m.Config.MaxPositionEmbeddings)
	maxNegs, maxHypo := 0, 0
	for _, tr := range ts {
		maxNegs, maxHypo = max(maxNegs, len(tr.Negs)), max(maxHypo, len(tr.HypoDocs))
	}
	n, nh := min(cfg.NumNegatives, maxNegs), min(cfg.NumHypo, maxHypo)
	tk, err := tokenizeAll(tok, ts, cfg.QueryInstruction, cfg.DocInstruction, maxTok, n, nh)
	if err != nil {
		t.Fatal(err)
	}
	microPerEpoch, _, total := cfg.Plan(len(ts))
	tr, err := trainer.New(be, m.Ctx, func(c *mlctx.Context, in []*graph.Node) *graph.Node {
		return lossGraph(m, c, in, cfg, nh)
	}, cfg.optim(total))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Ctx.SetRNGStateFromSeed(int64(cfg.Seed)); err != nil {
		t.Fatal(err)
	}
	var out []trainer.StepResult
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		order := EpochOrder(cfg.Seed, epoch, len(ts))
		for b := 0; b < microPerEpoch; b += cfg.GradAccumulation {
			var micro [][]*tensors.Tensor
			for k := b; k < min(b+cfg.GradAccumulation, microPerEpoch); k++ {
				idx := order[k*cfg.BatchSize : min((k+1)*cfg.BatchSize, len(order))]
				micro = append(micro, batchTensors(tk, ts, idx, n, nh, maxTok, m.Config.PadTokenID))
			}
			sr, err := tr.Step(micro)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, sr)
		}
	}
	return out, m
}

// Without dropout, gradient caching (deduplicated texts, length-sorted
// sub-batches of a few rows, missing slots not encoded) gives the losses,
// gradient norms and weights of the single-graph step, with and without
// gradient accumulation.
func TestGradCacheMatchesSingleGraph(t *testing.T) {
	dir := toyModelDir(t, 0)
	for _, tc := range []struct {
		name          string
		batch, accum  int
		subBatchToken int
	}{
		{"one micro-batch per update", 3, 1, 32},
		{"accumulation 2", 2, 2, 48},
		{"whole batch in one sub-batch", 5, 1, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Backend, cfg.OutputDir = testBackend, t.TempDir()
			cfg.BatchSize, cfg.GradAccumulation, cfg.SubBatchTokens = tc.batch, tc.accum, tc.subBatchToken
			cfg.Epochs, cfg.LearningRate, cfg.WarmupRatio, cfg.NumNegatives = 2, 1e-3, 0, 2
			want, ref := referenceTrain(t, cfg, dupTriplets, dir)
			got, err := Train(context.Background(), cfg, dupTriplets, dir, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.History) != len(want) {
				t.Fatalf("%d updates, reference %d", len(got.History), len(want))
			}
			rel := func(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(b), 1e-9) }
			for i, w := range want {
				g := got.History[i]
				if rel(g.Loss, w.Loss) > 1e-4 || rel(g.GradNorm, w.GradNorm) > 1e-3 || g.LearningRate != w.LearningRate {
					t.Errorf("update %d: loss %.6f grad norm %.6f lr %g; reference %.6f %.6f %g", i+1, g.Loss, g.GradNorm, g.LearningRate, w.Loss, w.GradNorm, w.LearningRate)
				}
			}
			ids := [][]int{{2, 10, 11, 3}, {2, 12, 3}}
			a, err := got.Model.Embed(ids, nil, bert.PoolCLS, false)
			if err != nil {
				t.Fatal(err)
			}
			b, err := ref.Embed(ids, nil, bert.PoolCLS, false)
			if err != nil {
				t.Fatal(err)
			}
			for r := range a {
				for i := range a[r] {
					if math.Abs(float64(a[r][i]-b[r][i])) > 1e-4 {
						t.Fatalf("row %d embedding[%d]: %v, reference %v", r, i, a[r][i], b[r][i])
					}
				}
			}
		})
	}
}

// The second pass draws the dropout masks of the first: with G = e from
// the first pass, the trainer's surrogate Σ e·G equals Σ e·e; without
// restoring the RNG state it does not.
func TestGradCacheDropoutReplay(t *testing.T) {
	dir := toyModelDir(t, 0.3)
	be, err := backend.New(testBackend)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bert.Load(be, dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.SubBatchTokens = 64
	tk, err := tokenizeAll(tok, toyTriplets, "", "", 32, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := newGradCache(be, m, cfg, tk, 1, 1, 32)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Ctx.SetRNGStateFromSeed(3); err != nil {
		t.Fatal(err)
	}
	tcfg := trainer.DefaultConfig()
	tcfg.TotalSteps = 10
	tr, err := trainer.New(be, m.Ctx, gc.surrogate, tcfg)
	if err != nil {
		t.Fatal(err)
	}
	texts := append(append([][]int{}, tk.pos...), tk.q...)
	subs := gc.plan(texts)
	if len(subs) < 2 {
		t.Fatalf("%d sub-batches, want several", len(subs))
	}
	sb := subs[0]
	ids, mask := gc.pad(sb, texts)
	rng := m.Ctx.GetVariableByScopeAndName(mlctx.RootScope, mlctx.RNGStateVariableName)
	for _, restore := range []bool{true, false} {
		saved, err := rngValue(rng)
		if err != nil {
			t.Fatal(err)
		}
		out, err := catch.Exec(gc.embed, ids, mask)
		if err != nil {
			t.Fatal(err)
		}
		e1, err := tensors.CopyFlatData[float32](out[0])
		if err != nil {
			t.Fatal(err)
		}
		var want float64
		for _, x := range e1 {
			want += float64(x) * float64(x)
		}
		if restore {
			if err := rng.SetValue(saved); err != nil {
				t.Fatal(err)
			}
		}
		g := tensors.FromFlatDataAndDimensions(e1, sb.cap, m.Config.HiddenSize)
		ids2, mask2 := gc.pad(sb, texts)
		sr, err := tr.Step([][]*tensors.Tensor{{ids2, mask2, g}})
		if err != nil {
			t.Fatal(err)
		}
		same := math.Abs(sr.Loss-want) < 1e-4*want
		if same != restore {
			t.Errorf("restore %v: surrogate %.6f, Σ e·e %.6f", restore, sr.Loss, want)
		}
	}
}

// The document instruction (the "document" prompt) goes before every
// positive, negative and hypothetical document, the query instruction
// before every query only, as the encoder does at inference.
func TestTokenizeAllPrompts(t *testing.T) {
	tok, err := tokenizer.Load(toyModelDir(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizeAll(tok, toyTriplets, "query: ", "passage: ", 32, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(s string) []int { return tok.Encode(s, true) }
	for i, tr := range toyTriplets {
		for _, c := range []struct {
			what      string
			got, want []int
		}{
			{"query", tk.q[i], ids("query: " + tr.Query)},
			{"positive", tk.pos[i], ids("passage: " + tr.Pos)},
			{"negative", tk.negs[i][0], ids("passage: " + tr.Negs[0])},
			{"hypothetical document", tk.hypo[i][0], ids("passage: " + tr.HypoDocs[0])},
		} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("triplet %d %s: %v, want %v", i, c.what, c.got, c.want)
			}
		}
	}
}
