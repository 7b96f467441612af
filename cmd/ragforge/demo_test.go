package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// A step's lanes run side by side: each lane's stages see what earlier
// steps made, the held-back lane's output comes after the first lane's, and
// afterwards the step's artifacts, metrics and summary lines are all in st,
// the summary in the step's stage order.
func TestDemoStepLanesRunSideBySide(t *testing.T) {
	var errOut bytes.Buffer
	st := &demoState{g: &globals{Err: &errOut}, dirs: map[string]string{"models": "m"},
		metrics: map[string]map[string]float64{"earlier": {"x": 1}}}
	ready := make(chan struct{})
	stage := func(name string, run func(st *demoState) error) stageFunc {
		return stageFunc{name, func(_ context.Context, st *demoState) (demoStage, error) {
			if st.dirs["models"] != "m" || st.metrics["earlier"]["x"] != 1 {
				return demoStage{}, errors.New(name + ": earlier steps' artifacts missing")
			}
			errf(st, "output of "+name)
			st.dirs[name] = "dir-" + name
			return demoStage{Metrics: map[string]float64{name: 1}}, run(st)
		}}
	}
	// a1 waits for b1: were the lanes run one after the other, it would
	// time out.
	a1 := stage("a1", func(*demoState) error {
		select {
		case <-ready:
			return nil
		case <-time.After(time.Minute):
			return errors.New("a1: lane b never ran beside lane a")
		}
	})
	a2 := stage("a2", func(st *demoState) error {
		if st.dirs["a1"] == "" {
			return errors.New("a2: a1's artifact missing")
		}
		return nil
	})
	b1 := stage("b1", func(*demoState) error { close(ready); return nil })
	b2 := stage("b2", func(st *demoState) error {
		if st.metrics["b1"]["b1"] != 1 {
			return errors.New("b2: b1's metrics missing")
		}
		return nil
	})
	if err := st.runStep(context.Background(), demoStep{{a1, a2}, {b1, b2}}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range st.summary {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "a1,a2,b1,b2" {
		t.Fatalf("summary stages %s, want a1,a2,b1,b2", got)
	}
	for _, n := range []string{"a1", "a2", "b1", "b2"} {
		if st.dirs[n] != "dir-"+n || st.metrics[n][n] != 1 {
			t.Fatalf("stage %s: dir %q, metrics %v after the step", n, st.dirs[n], st.metrics[n])
		}
	}
	out := errOut.String()
	if i, j := strings.Index(out, "output of a2"), strings.Index(out, "output of b1"); i < 0 || j < i {
		t.Fatalf("lane b's output should follow lane a's:\n%s", out)
	}
}

// A failing lane fails the step, naming its stage, after the other lane has
// finished.
func TestDemoStepLaneError(t *testing.T) {
	st := &demoState{g: &globals{Err: &bytes.Buffer{}}, dirs: map[string]string{}, metrics: map[string]map[string]float64{}}
	ok := stageFunc{"fine", func(context.Context, *demoState) (demoStage, error) { return demoStage{}, nil }}
	bad := stageFunc{"broken", func(context.Context, *demoState) (demoStage, error) {
		return demoStage{}, errors.New("boom")
	}}
	err := st.runStep(context.Background(), demoStep{{ok}, {bad}})
	if err == nil || !strings.Contains(err.Error(), `"broken"`) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v, want the broken stage's error", err)
	}
}

func errf(st *demoState, s string) { st.g.Err.Write([]byte(s + "\n")) }

// TestDemoSelflearnArgs checks that the demo passes its retriever flags on
// to selflearn only when set, under selflearn's own flag names (the args
// are parsed by the selflearn command).
func TestDemoSelflearnArgs(t *testing.T) {
	base := demoOptions{ChunkSize: 512, Overlap: 128, Seed: 42, Samples: 64, Negatives: -1, TrainFuse: -1, BM25: bm25Flags{B: -1}}
	tests := []struct {
		name string
		edit func(*demoOptions)
		want []string // flag=value pairs expected among the args
		not  []string // flags that must be absent
	}{
		{"defaults", func(*demoOptions) {}, []string{"samples=64"}, []string{"--queries-per-chunk", "--negatives", "--candidates", "--train-fuse", "--recipe"}},
		{"ap settings", func(o *demoOptions) {
			o.Samples, o.QueriesPerChunk, o.Negatives, o.Candidates, o.TrainFuse = 0, 4, 3, 1, 0
		}, []string{"samples=0", "queries-per-chunk=4", "negatives=3", "candidates=1", "train-fuse=0"}, []string{"--recipe"}},
		{"explicit recipe", func(o *demoOptions) { o.Recipe = "scratch" }, []string{"recipe=scratch"}, []string{"--negatives"}},
		{"no hard negatives", func(o *demoOptions) { o.Negatives = 0 }, []string{"negatives=0"}, []string{"--candidates"}},
		{"default bm25", func(o *demoOptions) { o.BM25.Analyzer = "biomed" }, nil, []string{"--analyzer", "--bm25-k1", "--bm25-b", "--bm25-preset", "--bm25-meta-fields"}},
		{"bm25 settings", func(o *demoOptions) { o.BM25 = bm25Flags{Analyzer: "pt", K1: 0.9, B: 0.75} },
			[]string{"analyzer=pt", "bm25-k1=0.9", "bm25-b=0.75"}, []string{"--bm25-preset"}},
		{"bm25 b 0", func(o *demoOptions) { o.BM25.B = 0 }, []string{"bm25-b=0"}, []string{"--analyzer"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			st := &demoState{o: o, corpus: "c.jsonl", qa: "qa.csv", dirs: map[string]string{"bert-tiny": "bert"}}
			args := st.selflearnArgs("work")
			if args[0] != "selflearn" {
				t.Fatalf("args[0] = %q, want selflearn", args[0])
			}
			for _, n := range tc.not {
				if slices.Contains(args, n) {
					t.Errorf("args %v contain %s", args, n)
				}
			}
			cmd := newSelflearnCmd(&globals{})
			if err := cmd.ParseFlags(args[1:]); err != nil {
				t.Fatalf("selflearn rejects the demo's args %v: %v", args, err)
			}
			for _, w := range tc.want {
				name, val, _ := strings.Cut(w, "=")
				if got := cmd.Flags().Lookup(name).Value.String(); got != val {
					t.Errorf("--%s = %q, want %q (args %v)", name, got, val, args)
				}
			}
		})
	}
}

// The filter lane trains one member per --filter-ensemble-seeds seed
// between the first filter and the evaluation, and with --filter-calibrate
// calibrates before evaluating.
func TestDemoFilterLane(t *testing.T) {
	for _, tc := range []struct {
		seeds     []int64
		calibrate bool
		want      string
	}{
		{nil, false, "filter: train,filter: eval"},
		{nil, true, "filter: train,filter: calibrate,filter: eval"},
		{[]int64{7}, false, "filter: train,filter: train member (seed 7),filter: eval"},
		{[]int64{7, 9}, false, "filter: train,filter: train member (seed 7),filter: train member (seed 9),filter: eval"},
	} {
		var names []string
		for _, s := range filterLane(demoOptions{FilterEnsembleSeeds: tc.seeds, FilterCalibrate: tc.calibrate}) {
			names = append(names, s.name)
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("seeds %v: lane %s, want %s", tc.seeds, got, tc.want)
		}
	}
}

// TestDemoTrainFilterArgs checks the demo's two train filter command
// lines: ICT alone (--augment-only), then the optional fine-tuning on the
// evidence labels with the same held-out split, each accepted by train
// filter under its own flag names.
func TestDemoTrainFilterArgs(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(*demoOptions)
		finetune bool
		want     []string // flag=value pairs expected among the args
		not      []string // flags that must be absent
	}{
		{"ICT defaults", func(*demoOptions) {}, false, []string{"augment-only=true", "valid-frac=0.2", "augment=ict.jsonl", "train=evidence.jsonl", "model=t5", "seed=42", "match-marks=false"}, []string{"--epochs", "--recipe", "--match-marks"}},
		{"ICT match marks", func(o *demoOptions) { o.FilterMatchMarks = true }, false, []string{"match-marks=true", "augment-only=true"}, nil},
		{"fine-tune inherits marks", func(o *demoOptions) { o.FilterMatchMarks, o.FilterFinetuneEpochs = true, 2 }, true, []string{"match-marks=false"}, []string{"--match-marks"}},
		{"ICT ap epochs", func(o *demoOptions) { o.Epochs = 2 }, false, []string{"epochs=2", "augment-only=true"}, nil},
		{"ICT quick wins over epochs", func(o *demoOptions) { o.Quick, o.Epochs = true, 2 }, false, []string{"epochs=1"}, nil},
		{"fine-tune", func(o *demoOptions) { o.FilterFinetuneEpochs = 2 }, true, []string{"model=ckpt", "train=evidence.jsonl", "valid-frac=0.2", "seed=42", "lr=0.0002", "epochs=2", "augment-only=false"}, []string{"--augment", "--augment-only", "--recipe"}},
		{"fine-tune quick", func(o *demoOptions) { o.FilterFinetuneEpochs, o.Quick = 3, true }, true, []string{"epochs=1"}, nil},
		{"fine-tune recipe", func(o *demoOptions) { o.FilterFinetuneEpochs, o.Recipe = 2, "scratch" }, true, []string{"recipe=scratch", "lr=0.0002"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := demoOptions{Seed: 42}
			tc.edit(&o)
			st := &demoState{o: o, dirs: map[string]string{"t5-tiny": "t5", "labels": "evidence.jsonl", "labels-ict": "ict.jsonl"}}
			args := st.trainFilterArgs("t5", "out", 42)
			if tc.finetune {
				args = st.finetuneFilterArgs("ckpt", "out")
			}
			if args[0] != "train" || args[1] != "filter" {
				t.Fatalf("args %v: want train filter first", args)
			}
			for _, n := range tc.not {
				if slices.Contains(args, n) {
					t.Errorf("args %v contain %s", args, n)
				}
			}
			cmd := newTrainFilterCmd(&globals{})
			if err := cmd.ParseFlags(args[2:]); err != nil {
				t.Fatalf("train filter rejects the demo's args %v: %v", args, err)
			}
			for _, w := range tc.want {
				name, val, _ := strings.Cut(w, "=")
				if got := cmd.Flags().Lookup(name).Value.String(); got != val {
					t.Errorf("--%s = %q, want %q (args %v)", name, got, val, args)
				}
			}
		})
	}
}

// TestDemoBM25ArgsReachEveryBM25Stage: the demo's BM25 flags parse as the
// flags of every subcommand that builds BM25 in the demo (eval retrieval,
// label evidence, selflearn, pipeline build), with the values given.
func TestDemoBM25ArgsReachEveryBM25Stage(t *testing.T) {
	st := &demoState{o: demoOptions{BM25: bm25Flags{Analyzer: "biomed-pt", K1: 0.9, B: 0.5, Preset: "rank_bm25", MetaFields: []string{"title", "keywords"}}}}
	args := st.bm25Args()
	want := map[string]string{"analyzer": "biomed-pt", "bm25-k1": "0.9", "bm25-b": "0.5", "bm25-preset": "rank_bm25", "bm25-meta-fields": "[title,keywords]"}
	if len(args) != 2*len(want) {
		t.Fatalf("bm25Args() = %v, want the %d flags", args, len(want))
	}
	g := &globals{}
	for name, cmd := range map[string]*cobra.Command{"eval retrieval": newEvalRetrievalCmd(g), "label evidence": newLabelEvidenceCmd(g),
		"selflearn": newSelflearnCmd(g), "pipeline build": newPipelineBuildCmd(g)} {
		if err := cmd.ParseFlags(args); err != nil {
			t.Errorf("%s rejects %v: %v", name, args, err)
			continue
		}
		for f, v := range want {
			if got := cmd.Flags().Lookup(f).Value.String(); got != v {
				t.Errorf("%s: --%s = %q, want %q", name, f, got, v)
			}
		}
	}
}

// The demo ships the filter its summary evaluated: the last checkpoint of
// the filter training (never filter/best, chosen on the held-out questions
// the summary reports), or the calibrated checkpoint made from it, named
// with the checkpoint and step its T5 comes from; an export whose figures
// differ from the summary's is an error.
func TestDemoShipsTheEvaluatedFilter(t *testing.T) {
	st := &demoState{dirs: map[string]string{}, filterMembers: []string{"w/filter/checkpoint-854"}}
	if dir, ckpt, step := st.shippedFilter(); dir != "w/filter/checkpoint-854" || ckpt != dir || step != 854 {
		t.Errorf("last checkpoint: shipped %q from %q step %d", dir, ckpt, step)
	}
	st.dirs["filter-t5"], st.dirs["filter-calibrated"] = "w/filter/checkpoint-854", "w/filter-calibrated"
	st.filterMembers = []string{"w/filter-calibrated"}
	if dir, ckpt, step := st.shippedFilter(); dir != "w/filter-calibrated" || ckpt != "w/filter/checkpoint-854" || step != 854 {
		t.Errorf("calibrated: shipped %q from %q step %d", dir, ckpt, step)
	}
	// Nothing stops training on the held-out questions either: the last
	// checkpoint is chosen by the schedule alone.
	st.dirs["labels"], st.dirs["labels-ict"] = "l.jsonl", "ict.jsonl"
	for _, args := range [][]string{st.trainFilterArgs("m", "out", 42), st.finetuneFilterArgs("m", "out")} {
		cmd := newTrainFilterCmd(&globals{})
		if err := cmd.ParseFlags(args[2:]); err != nil {
			t.Fatal(err)
		}
		if v := cmd.Flags().Lookup("early-stopping").Value.String(); v != "0" {
			t.Errorf("%v: --early-stopping %s, want 0 (no selection on the held-out questions)", args, v)
		}
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
