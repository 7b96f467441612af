package retriever

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/testutil/trainfix"
	"github.com/ragforge/ragforge/train/trainer"
)

// The retriever's training path (gradient-cached InfoNCE with τ 0.02 over
// in-batch and hard negatives, Config → trainer.Config, train/trainer's
// AdamW with the no-decay rule, schedule and clipping) against the PyTorch
// reference of ../shared/fixtures/train-bert-infonce (README section 8).

// unpadded returns the rows of an I64 [N, L] ids tensor cut at its mask.
func unpadded(t *testing.T, fx *trainfix.Fixture, ids, mask string) [][]int {
	v, shape := fx.Int64(t, ids)
	m, _ := fx.Int64(t, mask)
	out := make([][]int, shape[0])
	for r := range out {
		for j := range shape[1] {
			if m[r*shape[1]+j] == 1 {
				out[r] = append(out[r], int(v[r*shape[1]+j]))
			}
		}
	}
	return out
}

// parityRun is bert-tiny (dropout 0) with the fixture batch as 4 triplets
// (2 hard negatives each) and the retriever's gradient cache and trainer.
type parityRun struct {
	m        *bert.Model
	gc       *gradCache
	tr       *trainer.Trainer
	triplets []Triplet
}

func newParityRun(t *testing.T, fx *trainfix.Fixture, c trainfix.Case) *parityRun {
	t.Helper()
	be, err := backend.New(testBackend)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bert.Load(be, testutil.SharedPath(t, "fixtures/bert-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	m.Config.HiddenDropoutProb, m.Config.AttentionProbsDropoutProb = 0, 0
	var in struct {
		Queries   []string `json:"queries"`
		Documents []string `json:"documents"`
	}
	if err := json.Unmarshal(fx.JSON["inputs"], &in); err != nil {
		t.Fatal(err)
	}
	q := unpadded(t, fx, "inputs.query_ids", "inputs.query_mask")
	d := unpadded(t, fx, "inputs.doc_ids", "inputs.doc_mask")
	const B, n = 4, 2
	tk := &tokenized{q: q, pos: d[:B], hypo: make([][][]int, B), negs: make([][][]int, B), empty: []int{d[0][0], d[0][len(d[0])-1]}}
	ts := make([]Triplet, B)
	for i := range B {
		ts[i] = Triplet{Query: in.Queries[i], Pos: in.Documents[i]}
		for k := range n {
			tk.negs[i] = append(tk.negs[i], d[B+n*i+k])
			ts[i].Negs = append(ts[i].Negs, in.Documents[B+n*i+k])
		}
	}
	cfg := DefaultConfig()
	cfg.OutputDir, cfg.Backend = t.TempDir(), testBackend
	cfg.BatchSize, cfg.NumNegatives, cfg.NumHypo = B, n, 0
	cfg.LearningRate, cfg.WeightDecay, cfg.MaxGradNorm, cfg.WarmupRatio = c.PeakLR, c.WeightDecay, c.MaxGradNorm, 0
	cfg.Pooling = bert.PoolCLS
	if c.Pooling == "mean" {
		cfg.Pooling = bert.PoolMean
	}
	if c.WarmupSteps != 0 || c.GradAccumulation != 1 {
		t.Fatalf("case with warmup %d, accumulation %d: not a retriever setting", c.WarmupSteps, c.GradAccumulation)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gc, err := newGradCache(be, m, cfg, tk, n, 0, m.Config.MaxPositionEmbeddings)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainer.New(be, m.Ctx, gc.surrogate, cfg.optim(c.TotalSteps))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Ctx.SetRNGStateFromSeed(42); err != nil {
		t.Fatal(err)
	}
	return &parityRun{m: m, gc: gc, tr: tr, triplets: ts}
}

var parityAll = [][]int{{0, 1, 2, 3}}

func TestTrainingParityBERTInfoNCE(t *testing.T) {
	fx := trainfix.Load(t, testutil.SharedPath(t, "fixtures/train-bert-infonce"))
	keyBias := func(p string) bool { return strings.HasSuffix(p, "attention.self.key.bias") }

	t.Run("gradients", func(t *testing.T) {
		for _, g := range []struct{ prefix, c string }{{"grad_init", "a"}, {"case_c.grad_init", "c"}} {
			r := newParityRun(t, fx, fx.Cases[g.c])
			batches, _, err := r.gc.prepare(r.triplets, parityAll)
			if err != nil {
				t.Fatal(err)
			}
			grads, _, err := r.tr.Gradients(batches)
			if err != nil {
				t.Fatal(err)
			}
			fx.CheckGradients(t, g.prefix, func(hf string) ([]float32, []int, bool) {
				x, ok := grads["/"+strings.ReplaceAll(hf, ".", "/")]
				if !ok {
					return nil, nil, false
				}
				return tensors.MustCopyFlatData[float32](x), x.Shape().Dimensions, true
			}, keyBias)
		}
	})
	for _, c := range fx.CaseNames() {
		t.Run("case_"+c, func(t *testing.T) {
			cs := fx.Cases[c]
			r := newParityRun(t, fx, cs)
			for s := 1; s <= cs.TotalSteps; s++ {
				res, err := r.gc.update(r.tr, r.triplets, parityAll)
				if err != nil {
					t.Fatal(err)
				}
				fx.CheckScalars(t, c, s, res.Loss, res.GradNorm, res.LearningRate)
				for _, rec := range cs.RecordedSteps {
					if rec == s {
						fx.CheckWeights(t, c, s, trainfix.ContextGetter(t, r.m.Ctx), keyBias)
					}
				}
			}
		})
	}
}
