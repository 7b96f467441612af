package filtertrain

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/testutil/trainfix"
	"github.com/ragforge/ragforge/train/trainer"
)

// The filter's training path (loadForTraining, lossFn = HF T5 loss with
// -100 masking, Config → trainer.Config, train/trainer's AdamW, schedule,
// clipping and accumulation) against the PyTorch reference of
// ../shared/fixtures/train-t5-filter (README section 8).

// parityModel loads t5-flan-tiny for training (label tokens added, vocab
// 2102), with dropout 0 and rows 2100–2101 set to init.safetensors' new_rows.
func parityModel(t *testing.T, init *safetensors.File) *labeled {
	t.Helper()
	lm, err := loadForTraining(testBackend, fixtureModel(t), 42, 0, nil, DefaultConfig().predictor()) // rows 2100–2101 are overwritten below
	if err != nil {
		t.Fatal(err)
	}
	if lm.Helpful != 2100 || lm.NotHelpful != 2101 || lm.Model.Config.VocabSize != 2102 {
		t.Fatalf("label ids %d, %d and vocab %d; the fixture has 2100, 2101 and 2102", lm.Helpful, lm.NotHelpful, lm.Model.Config.VocabSize)
	}
	lm.Model.Config.DropoutRate = 0
	d := lm.Model.Config.DModel
	for _, name := range []string{"shared", "lm_head"} {
		rows, err := init.Tensors["new_rows."+name+".weight"].Float32()
		if err != nil {
			t.Fatal(err)
		}
		v := lm.Model.Ctx.GetVariableByScopeAndName("/"+name, "weight")
		val, err := v.Value()
		if err != nil {
			t.Fatal(err)
		}
		w := tensors.MustCopyFlatData[float32](val)
		copy(w[2100*d:], rows)
		v.MustSetValue(tensors.FromFlatDataAndDimensions(w, 2102, d))
	}
	if err := lm.Model.Ctx.SetRNGStateFromSeed(42); err != nil {
		t.Fatal(err)
	}
	return lm
}

// parityBatch returns the fixture batch as micro-batches of the given rows.
func parityBatch(t *testing.T, fx *trainfix.Fixture, groups [][]int) [][]*tensors.Tensor {
	t.Helper()
	var out [][]*tensors.Tensor
	for _, rows := range groups {
		var mb []*tensors.Tensor
		for _, name := range []string{"input_ids", "attention_mask", "decoder_input_ids", "labels"} {
			v, shape := fx.Int32(t, "inputs."+name)
			cols := shape[1]
			sel := make([]int32, 0, len(rows)*cols)
			for _, r := range rows {
				sel = append(sel, v[r*cols:(r+1)*cols]...)
			}
			mb = append(mb, tensors.FromFlatDataAndDimensions(sel, len(rows), cols))
		}
		out = append(out, mb)
	}
	return out
}

// caseConfig maps a fixture case onto the filter's Config (the CLI's path).
func caseConfig(c trainfix.Case) trainer.Config {
	fc := DefaultConfig()
	fc.LearningRate, fc.WeightDecay, fc.WarmupSteps = c.PeakLR, c.WeightDecay, c.WarmupSteps
	fc.MaxGradNorm, fc.GradAccumulation = c.MaxGradNorm, c.GradAccumulation
	return fc.optim(c.TotalSteps)
}

func TestTrainingParityT5Filter(t *testing.T) {
	fx := trainfix.Load(t, testutil.SharedPath(t, "fixtures/train-t5-filter"))
	init, err := safetensors.ReadFile(filepath.Join(fx.Dir, "init.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	all := [][]int{{0, 1, 2, 3, 4, 5}}

	t.Run("gradients", func(t *testing.T) {
		for _, g := range []struct {
			prefix string
			groups [][]int
		}{{"grad_init", all}, {"case_d.grad_init", fx.Cases["d"].MicroBatches}} {
			lm := parityModel(t, init)
			tr, err := trainer.New(lm.Model.Backend, lm.Model.Ctx, lm.lossFn, caseConfig(fx.Cases["a"]))
			if err != nil {
				t.Fatal(err)
			}
			grads, _, err := tr.Gradients(parityBatch(t, fx, g.groups))
			if err != nil {
				t.Fatal(err)
			}
			fx.CheckGradients(t, g.prefix, trainfix.GradGetter(grads), nil)
		}
	})
	for _, c := range fx.CaseNames() {
		t.Run("case_"+c, func(t *testing.T) {
			cs := fx.Cases[c]
			lm := parityModel(t, init)
			tr, err := trainer.New(lm.Model.Backend, lm.Model.Ctx, lm.lossFn, caseConfig(cs))
			if err != nil {
				t.Fatal(err)
			}
			micro := parityBatch(t, fx, cs.MicroBatches)
			for s := 1; s <= cs.TotalSteps; s++ {
				r, err := tr.Step(micro)
				if err != nil {
					t.Fatal(err)
				}
				fx.CheckScalars(t, c, s, r.Loss, r.GradNorm, r.LearningRate)
				for _, rec := range cs.RecordedSteps {
					if rec == s {
						fx.CheckWeights(t, c, s, trainfix.ContextGetter(t, lm.Model.Ctx), nil)
					}
				}
			}
			if c != "b" {
				return
			}
			// P([HELPFUL]) of rows 0–4 after case b, as the filter scores them.
			ids, shape := fx.Int64(t, "inputs.input_ids")
			mask, _ := fx.Int64(t, "inputs.attention_mask")
			var rows [][]int
			for r := range 5 {
				var row []int
				for j := range shape[1] {
					if mask[r*shape[1]+j] == 1 {
						row = append(row, int(ids[r*shape[1]+j]))
					}
				}
				rows = append(rows, row)
			}
			lm.Config.BatchSize = 6
			got, err := lm.ScoreRows(context.Background(), rows, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := fx.Float32(t, "case_b.p_helpful_step5")
			for i := range got {
				if d := got[i] - float64(want[i]); d > 1e-6 || d < -1e-6 {
					t.Errorf("P([HELPFUL]) row %d after case b = %.8f, want %.8f", i, got[i], want[i])
				}
			}
		})
	}
}
