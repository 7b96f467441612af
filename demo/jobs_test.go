package demo

import (
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/train/selflearn"
)

// flagValue returns the value following flag in args ("true" for a flag
// with none), and whether flag is there.
func flagValue(args []string, flag string) (string, bool) {
	i := slices.Index(args, "--"+flag)
	if i < 0 {
		return "", false
	}
	if i+1 == len(args) || strings.HasPrefix(args[i+1], "--") {
		return "true", true
	}
	return args[i+1], true
}

// checkArgs fails on a want flag=value missing from args or a not flag
// present.
func checkArgs(t *testing.T, args, want, not []string) {
	t.Helper()
	for _, w := range want {
		name, val, _ := strings.Cut(w, "=")
		if got, ok := flagValue(args, name); !ok || got != val {
			t.Errorf("--%s = %q (given %v), want %q; args %v", name, got, ok, val, args)
		}
	}
	for _, n := range not {
		if _, ok := flagValue(args, n); ok {
			t.Errorf("args %v contain --%s", args, n)
		}
	}
}

// The demo passes its retriever settings on to selflearn only when set,
// and the summary's command says the same as the config.
func TestSelflearnConfig(t *testing.T) {
	def := selflearn.DefaultConfig()
	tests := []struct {
		name     string
		edit     func(*Options)
		check    func(selflearn.Config) bool
		want     []string
		not      []string
		explicit []string
	}{
		{"defaults", func(*Options) {}, func(c selflearn.Config) bool {
			return c.NumNegatives == def.NumNegatives && c.L == def.L && c.TrainFuse == def.TrainFuse && c.Samples == 64 && c.MaxLength == 256
		}, []string{"samples=64", "max-length=256", "rounds=1", "generator=ict"}, []string{"queries-per-chunk", "negatives", "candidates", "train-fuse", "recipe"}, []string{"MaxLength"}},
		{"ap settings", func(o *Options) { o.Samples, o.QueriesPerChunk, o.Negatives, o.Candidates, o.TrainFuse = 0, 4, 3, 1, 0 },
			func(c selflearn.Config) bool {
				return c.Samples == 0 && c.QueriesPerChunk == 4 && c.NumNegatives == 3 && c.L == 1 && c.TrainFuse == 0
			}, []string{"samples=0", "queries-per-chunk=4", "negatives=3", "candidates=1", "train-fuse=0"}, []string{"recipe"}, []string{"MaxLength", "QueriesPerChunk"}},
		{"explicit recipe", func(o *Options) { o.Recipe = "scratch" }, func(selflearn.Config) bool { return true }, []string{"recipe=scratch"}, []string{"negatives"}, []string{"MaxLength"}},
		{"no hard negatives", func(o *Options) { o.Negatives = 0 }, func(c selflearn.Config) bool { return c.NumNegatives == 0 }, []string{"negatives=0"}, []string{"candidates"}, []string{"MaxLength"}},
		{"bm25 settings", func(o *Options) { o.BM25.Analyzer, o.BM25.K1, o.BM25.B = "pt", 0.9, 0.75 },
			func(c selflearn.Config) bool { return c.BM25.K1 == 0.9 && c.BM25.B == 0.75 && c.BM25.Analyzer == "pt" },
			[]string{"analyzer=pt", "bm25-k1=0.9", "bm25-b=0.75"}, []string{"bm25-preset"}, []string{"MaxLength"}},
		{"default bm25 stays zero", func(*Options) {}, func(c selflearn.Config) bool { return c.BM25.K1 == 0 && c.BM25.Analyzer == "" },
			nil, []string{"analyzer", "bm25-k1", "bm25-b", "bm25-preset", "bm25-meta-fields"}, []string{"MaxLength"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.edit(&o)
			st := &state{o: o, corpus: "c.jsonl", qa: "qa.csv", dirs: map[string]string{"bert-tiny": "bert"}}
			c, set, args, err := st.selflearnConfig("work")
			if err != nil {
				t.Fatal(err)
			}
			if args[0] != "selflearn" || c.RetrieverDir != "bert" || c.WorkDir != "work" || c.Generator != "ict" || c.Rounds != 1 {
				t.Fatalf("config %+v, args %v", c, args)
			}
			if !tc.check(c) {
				t.Errorf("config %+v", c)
			}
			if !slices.Equal(set.Explicit, tc.explicit) || set.Recipe != o.Recipe {
				t.Errorf("settings %+v, want explicit %v", set, tc.explicit)
			}
			checkArgs(t, args, tc.want, tc.not)
		})
	}
}

// The demo's two filter trainings: ICT alone (AugmentOnly), then the
// optional fine-tuning on the evidence labels with the same held-out
// split; the job and the summary's command agree.
func TestTrainFilterJobs(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(*Options)
		finetune bool
		want     []string
		not      []string
		epochs   int // 0: the recipe's (not explicit)
	}{
		{"ICT defaults", func(*Options) {}, false, []string{"augment-only=true", "valid-frac=0.2", "augment=ict.jsonl", "train=evidence.jsonl", "model=t5", "seed=42", "max-seq-length=256", "doc-stride=64"}, []string{"epochs", "recipe", "match-marks"}, 0},
		{"ICT match marks", func(o *Options) { o.FilterMatchMarks = true }, false, []string{"match-marks=true", "augment-only=true"}, []string{"match-marks-rare"}, 0},
		{"ICT rare marks", func(o *Options) { o.FilterMatchMarks, o.FilterMatchMarksRare = true, []float64{0.05, 0.005} }, false, []string{"match-marks-rare=0.05,0.005"}, nil, 0},
		{"fine-tune inherits marks", func(o *Options) { o.FilterMatchMarks, o.FilterFinetuneEpochs = true, 2 }, true, nil, []string{"match-marks"}, 2},
		{"ICT ap epochs", func(o *Options) { o.Epochs = 2 }, false, []string{"epochs=2", "augment-only=true"}, nil, 2},
		{"ICT quick wins over epochs", func(o *Options) { o.Quick, o.Epochs = true, 2 }, false, []string{"epochs=1"}, nil, 1},
		{"fine-tune", func(o *Options) { o.FilterFinetuneEpochs = 2 }, true, []string{"model=ckpt", "train=evidence.jsonl", "valid-frac=0.2", "seed=42", "lr=2e-4", "epochs=2"}, []string{"augment", "augment-only", "recipe"}, 2},
		{"fine-tune quick", func(o *Options) { o.FilterFinetuneEpochs, o.Quick = 3, true }, true, []string{"epochs=1"}, nil, 1},
		{"fine-tune recipe", func(o *Options) { o.FilterFinetuneEpochs, o.Recipe = 2, "scratch" }, true, []string{"recipe=scratch", "lr=2e-4"}, nil, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.edit(&o)
			st := &state{o: o, dirs: map[string]string{"t5-tiny": "t5", "labels": "evidence.jsonl", "labels-ict": "ict.jsonl"}}
			job, args := st.ictTrainJob("t5", "out", 42)
			if tc.finetune {
				job, args = st.finetuneJob("ckpt", "out")
			}
			checkArgs(t, args, tc.want, tc.not)
			c, d := job.Config, job.Data
			if d.ValidFrac != validFrac || d.Train != "evidence.jsonl" || c.Seed != 42 || c.MaxSeqLength != trainSeqLength || c.DocStride != docStride || c.OutputDir != "out" {
				t.Errorf("job %+v", job)
			}
			if d.AugmentOnly == tc.finetune || (d.Augment == "") != tc.finetune {
				t.Errorf("augment %q only %v, fine-tuning %v", d.Augment, d.AugmentOnly, tc.finetune)
			}
			if c.MatchMarks != (o.FilterMatchMarks && !tc.finetune) {
				t.Errorf("match marks %v", c.MatchMarks)
			}
			if explicit := slices.Contains(job.Explicit, "num_train_epochs"); explicit != (tc.epochs > 0) || (explicit && c.Epochs != tc.epochs) {
				t.Errorf("epochs %d, explicit %v; want %d", c.Epochs, job.Explicit, tc.epochs)
			}
			if tc.finetune && (c.LearningRate != finetuneLR || !slices.Contains(job.Explicit, "learning_rate")) {
				t.Errorf("fine-tuning lr %v, explicit %v", c.LearningRate, job.Explicit)
			}
			// Nothing stops training on the held-out questions: the last
			// checkpoint is chosen by the schedule alone.
			if c.EarlyStoppingPatience != 0 {
				t.Errorf("early stopping %d, want 0 (no selection on the held-out questions)", c.EarlyStoppingPatience)
			}
		})
	}
}

// The demo's BM25 settings reach every command that builds BM25, under
// their flag names, and default ones are left out.
func TestBM25Args(t *testing.T) {
	o := DefaultOptions()
	if args := (&state{o: o}).bm25Args(); len(args) != 0 {
		t.Errorf("defaults: %v, want none", args)
	}
	o.BM25.Analyzer, o.BM25.K1, o.BM25.B, o.BM25.Preset, o.BM25.MetaFields = "biomed-pt", 0.9, 0.5, "rank_bm25", []string{"title", "keywords"}
	args := (&state{o: o}).bm25Args()
	checkArgs(t, args, []string{"analyzer=biomed-pt", "bm25-k1=0.9", "bm25-b=0.5", "bm25-preset=rank_bm25", "bm25-meta-fields=title,keywords"}, nil)
	if len(args) != 10 {
		t.Errorf("bm25Args() = %v, want the 5 flags", args)
	}
}

// The demo ships the filter its summary evaluated: the last checkpoint of
// the filter training (never filter/best, chosen on the held-out questions
// the summary reports), or the calibrated checkpoint made from it, named
// with the checkpoint and step its T5 comes from; an export whose figures
// differ from the summary's is an error.
func TestShipsTheEvaluatedFilter(t *testing.T) {
	st := &state{dirs: map[string]string{}, filterMembers: []string{"w/filter/checkpoint-854"}}
	if dir, ckpt, step := st.shippedFilter(); dir != "w/filter/checkpoint-854" || ckpt != dir || step != 854 {
		t.Errorf("last checkpoint: shipped %q from %q step %d", dir, ckpt, step)
	}
	st.dirs["filter-t5"], st.dirs["filter-calibrated"] = "w/filter/checkpoint-854", "w/filter-calibrated"
	st.filterMembers = []string{"w/filter-calibrated"}
	if dir, ckpt, step := st.shippedFilter(); dir != "w/filter-calibrated" || ckpt != "w/filter/checkpoint-854" || step != 854 {
		t.Errorf("calibrated: shipped %q from %q step %d", dir, ckpt, step)
	}
	evaluated := map[string]float64{"accuracy": 0.75, "ROC-AUC": 0.778, "F1": 0.5}
	if err := sameFilterReport(evaluated, map[string]float64{"shipped_accuracy": 0.75, "shipped_ROC-AUC": 0.778}); err != nil {
		t.Errorf("same figures: %v", err)
	}
	for _, shipped := range []map[string]float64{
		{"shipped_accuracy": 0.75, "shipped_ROC-AUC": 0.710}, // filter/best's figure beside the last checkpoint's
		{"shipped_accuracy": 0.70, "shipped_ROC-AUC": 0.778},
		{"shipped_accuracy": 0.75}, // one class: no ROC-AUC on one side
	} {
		if err := sameFilterReport(evaluated, shipped); err == nil || !strings.Contains(err.Error(), "another filter than the one shipped") {
			t.Errorf("%v: err %v", shipped, err)
		}
	}
}
