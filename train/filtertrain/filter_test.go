package filtertrain

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/testutil/tinyt5"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/train/trainer"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// sharedDir returns <module root>/../shared/rel or skips.
func sharedDir(t testing.TB, rel string) string { return testutil.SharedPath(t, rel) }

// fixtureModel is the t5-flan-tiny checkpoint (vocab 2100, spiece.model).
func fixtureModel(t testing.TB) string { return sharedDir(t, "fixtures/t5-flan-tiny") }

// testBackend runs ops one at a time: GoMLX v0.26's pure-Go executor can
// deadlock on a 2-core machine when parallel ops each wait for workers of
// its pool (DotGeneral inside executeParallel).
// testBackend is the pure-Go backend, or $RAGFORGE_TEST_BACKEND (the GPU
// check runs the training fixtures through XLA with it).
var testBackend = cmp.Or(os.Getenv(backend.TestEnvVar), "go:ops_sequential")

func ex(id, answer, evidence, question string) filter.Example {
	return filter.Example{ID: id, Answer: answer, Question: filter.Instruction(evidence, question), DatasetName: "toy"}
}

func TestWindowsFollowHFOverflow(t *testing.T) {
	tok, err := tokenizer.Load(fixtureModel(t))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("the patient presents with fever and cough after travel ", 30)
	exs := []filter.Example{ex("a", filter.Helpful, "short evidence", "Which drug?"), ex("b", filter.NotHelpful, long, "What is the diagnosis?")}
	const maxLen, stride = 128, 16
	p := &filter.Predictor{Tokenizer: tok, Config: filter.Config{Windowing: filter.Windowing{MaxSeqLength: maxLen, DocStride: stride}}}
	wins, err := Windows(p, exs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := wins[0].IDs, tok.Encode(strings.TrimSpace(exs[0].Question), true); wins[0].Example != 0 || !slices.Equal(got, want) {
		t.Fatalf("short example: window %v (example %d), want the full encoding %v", got, wins[0].Example, want)
	}
	content := tok.Encode(strings.TrimSpace(exs[1].Question), false)
	var rest []Window
	for _, w := range wins[1:] {
		if w.Example != 1 {
			t.Fatalf("window of example %d after example 1's", w.Example)
		}
		rest = append(rest, w)
	}
	L := maxLen - 1 // content tokens per window
	wantN := 1 + (len(content)-L+(L-stride)-1)/(L-stride)
	if len(rest) != wantN {
		t.Fatalf("%d windows for %d content tokens, want %d", len(rest), len(content), wantN)
	}
	for j, w := range rest {
		start := j * (L - stride)
		want := append(slices.Clone(content[start:min(start+L, len(content))]), tok.EOSID())
		if !slices.Equal(w.IDs, want) {
			t.Fatalf("window %d = %v, want content[%d:%d]+</s>", j, w.IDs, start, start+L)
		}
	}
}

func TestSplitByQuestion(t *testing.T) {
	var exs []filter.Example
	for q, n := range []int{3, 2, 1, 2, 2} {
		for i := range n {
			exs = append(exs, ex(fmt.Sprintf("q%d-%d", q, i), filter.Helpful, fmt.Sprintf("evidence %d", i), fmt.Sprintf("question %d?", q)))
		}
	}
	question := func(e filter.Example) string { _, q, _ := filter.ParseInstruction(e.Question); return q }
	tr, va, err := SplitByQuestion(exs, 0.3, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr)+len(va) != len(exs) || len(va) < 3 || len(tr) == 0 {
		t.Fatalf("split %d/%d of %d, want valid ≥ round(0.3·10) = 3", len(tr), len(va), len(exs))
	}
	inTrain := map[string]bool{}
	for _, e := range tr {
		inTrain[question(e)] = true
	}
	for _, e := range va {
		if inTrain[question(e)] {
			t.Fatalf("question %q in both splits", question(e))
		}
	}
	// Input order kept within each split.
	for _, split := range [][]filter.Example{tr, va} {
		last := -1
		for _, e := range split {
			i := slices.IndexFunc(exs, func(x filter.Example) bool { return x.ID == e.ID })
			if i <= last {
				t.Fatalf("order not kept: %s", e.ID)
			}
			last = i
		}
	}
	tr2, va2, _ := SplitByQuestion(exs, 0.3, 7)
	if !slices.Equal(tr, tr2) || !slices.Equal(va, va2) {
		t.Fatal("same seed, different split")
	}
	if tr, va, err := SplitByQuestion(exs, 0, 7); err != nil || len(tr) != len(exs) || va != nil {
		t.Fatalf("validFrac 0: %d/%d, %v", len(tr), len(va), err)
	}
	bad := append(slices.Clone(exs), filter.Example{ID: "broken", Question: "no header", Answer: filter.Helpful})
	if _, _, err := SplitByQuestion(bad, 0.3, 7); err == nil || !strings.Contains(err.Error(), `"broken"`) {
		t.Fatalf("bad instruction: error %v does not name the example", err)
	}
	if _, _, err := SplitByQuestion(exs[:3], 0.5, 7); err == nil {
		t.Fatal("one question with validFrac 0.5: no error")
	}
}

// Hand-computed: gold [H, N, H, N, H], p [0.9, 0.8, 0.4, 0.4, 0.7].
// At 0.5: TP 2 (0.9, 0.7), FP 1 (0.8), FN 1 (0.4), TN 1 (0.4).
// AUC by pairs: (0.9>0.8) (0.9>0.4) (0.4<0.8) (0.4=0.4 → ½) (0.7<0.8) (0.7>0.4) = 3.5/6.
func TestReportHand(t *testing.T) {
	labels := []string{filter.Helpful, filter.NotHelpful, filter.Helpful, filter.NotHelpful, filter.Helpful}
	p := []float64{0.9, 0.8, 0.4, 0.4, 0.7}
	var exs []filter.Example
	for i, l := range labels {
		exs = append(exs, ex(fmt.Sprintf("e%d", i), l, "ev", "q?"))
	}
	r := Report(exs, p, []int{1, 2, 1, 1, 3}, 0.5)
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if r.Confusion != (Confusion{TP: 2, FP: 1, TN: 1, FN: 1}) {
		t.Errorf("confusion %+v", r.Confusion)
	}
	near("accuracy", r.Accuracy, 3.0/5)
	near("precision", r.Precision, 2.0/3)
	near("recall", r.Recall, 2.0/3)
	near("f1", r.F1, 2.0/3)
	near("acc[HELPFUL]", r.PerClass[filter.Helpful], 2.0/3)
	near("acc[NOT_HELPFUL]", r.PerClass[filter.NotHelpful], 1.0/2)
	if r.ROCAUC == nil {
		t.Fatal("roc_auc undefined")
	}
	near("roc_auc", *r.ROCAUC, 3.5/6)
	near("majority baseline", r.MajorityBaseline, 3.0/5)
	if r.MajorityClass != filter.Helpful || r.Windows != 8 {
		t.Errorf("majority %s, windows %d", r.MajorityClass, r.Windows)
	}
	// Sweep at 0.85: only 0.9 positive → TP 1, FP 0, FN 2, TN 2.
	pt := r.Sweep[16]
	near("sweep threshold", pt.Threshold, 0.85)
	near("sweep accuracy", pt.Accuracy, 3.0/5)
	near("sweep precision", pt.Precision, 1)
	near("sweep recall", pt.Recall, 1.0/3)
	if len(r.Sweep) != 19 {
		t.Errorf("sweep has %d points, want 19 (0.05..0.95)", len(r.Sweep))
	}
	if _, ok := ROCAUC([]bool{true, true}, []float64{0.1, 0.2}); ok {
		t.Error("AUC defined with one class")
	}
	if got := (Confusion{}).F1(); got != 0 {
		t.Errorf("empty F1 = %v", got)
	}
	// RAG² files against the golden copies.
	dir := t.TempDir()
	if err := r.WriteRAG2Files(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{PredFile, ResultsFile, PerClassFile} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", "report_hand", name)
		if *update {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			os.WriteFile(golden, got, 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s:\n%s", name, golden, got)
		}
	}
}

// toySet is trivially separable: "aspirin" evidence is helpful, "granite" is not.
func toySet(n int) []filter.Example {
	var out []filter.Example
	for i := range n {
		if i%2 == 0 {
			out = append(out, ex(fmt.Sprintf("h%d", i), filter.Helpful, "aspirin reduces fever in adults", fmt.Sprintf("what reduces fever number %d?", i)))
		} else {
			out = append(out, ex(fmt.Sprintf("n%d", i), filter.NotHelpful, "granite is an igneous rock", fmt.Sprintf("what reduces fever number %d?", i)))
		}
	}
	return out
}

// smallModel writes a randomly initialised T5 smaller than t5.TinyConfig
// (d_model 32, 1+1 layers, 2 heads) with the fixture tokenizer to a temp dir.
func smallModel(t *testing.T, dropout float64) string {
	t.Helper()
	tok, err := tokenizer.Load(fixtureModel(t))
	if err != nil {
		t.Fatal(err)
	}
	return tinyt5.Save(t, tok, testBackend, dropout)
}

func tinyConfig(t *testing.T, dropout float64) Config {
	cfg := DefaultConfig()
	cfg.ModelDir, cfg.OutputDir = smallModel(t, dropout), filepath.Join(t.TempDir(), "out")
	cfg.MaxSeqLength, cfg.DocStride, cfg.BatchSize, cfg.EvalBatchSize = 128, 16, 4, 8
	cfg.LearningRate = 1e-2
	cfg.Backend = testBackend
	return cfg
}

func TestTrainLossDecreasesAndExport(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: trains a tiny T5 for a few seconds")
	}
	cfg := tinyConfig(t, 0)
	cfg.Epochs = 12
	train := toySet(8)
	valid := toySet(4)
	var accs []float64
	res, err := Train(context.Background(), cfg, train, valid, nil, func(p Progress) {
		if p.Phase == "eval" {
			accs = append(accs, p.ValidAccuracy)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	for _, h := range res.History {
		if h.Loss == 0 {
			continue
		}
		if first == 0 {
			first = h.Loss
		}
		last = h.Loss
	}
	t.Logf("loss %.4f → %.4f over %d updates; valid accuracy per epoch %v", first, last, res.GlobalStep, accs)
	if res.GlobalStep != 24 || len(accs) != 12 {
		t.Fatalf("%d updates and %d validations, want 24 (12 epochs × 2) and 12", res.GlobalStep, len(accs))
	}
	if !(last < first/3) {
		t.Fatalf("loss %.4f → %.4f: did not drop below a third", first, last)
	}
	if res.BestAccuracy != slices.Max(accs) {
		t.Fatalf("best accuracy %v, validations %v", res.BestAccuracy, accs)
	}
	best, err := os.Readlink(filepath.Join(cfg.OutputDir, trainer.BestLink))
	if err != nil || filepath.Join(cfg.OutputDir, best) != res.BestCheckpoint {
		t.Fatalf("best link %q (%v), result says %s", best, err, res.BestCheckpoint)
	}

	out := filepath.Join(t.TempDir(), "export")
	if err := Export(filepath.Join(cfg.OutputDir, trainer.BestLink), out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, trainer.OptimizerFile)); !os.IsNotExist(err) {
		t.Errorf("export carries %s", trainer.OptimizerFile)
	}
	for _, f := range []string{"tokenizer.json", "generation_config.json", "spiece.model", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("export lacks %s: %v", f, err)
		}
	}
	r, err := Evaluate(out, valid, EvalOptions{Windowing: filter.Windowing{MaxSeqLength: 128, DocStride: 16}, Backend: testBackend})
	if err != nil {
		t.Fatal(err)
	}
	if r.Accuracy != res.BestAccuracy {
		t.Errorf("exported best model: accuracy %v, training recorded %v", r.Accuracy, res.BestAccuracy)
	}
	// An ensemble of one is Evaluate; of two, each example's P(helpful) is
	// the mean of the members'.
	opt := EvalOptions{Windowing: filter.Windowing{MaxSeqLength: 128, DocStride: 16}, Backend: testBackend}
	one, err := EvaluateEnsemble([]string{out}, valid, opt)
	if err != nil || one.Model != out || one.Predictions[0].PHelpful != r.Predictions[0].PHelpful {
		t.Fatalf("ensemble of one: %+v, %v", one, err)
	}
	rl, err := Evaluate(res.LastCheckpoint, valid, opt)
	if err != nil {
		t.Fatal(err)
	}
	two, err := EvaluateEnsemble([]string{out, res.LastCheckpoint}, valid, opt)
	if err != nil {
		t.Fatal(err)
	}
	if two.Model != out+","+res.LastCheckpoint || len(two.Predictions) != len(valid) {
		t.Fatalf("ensemble of two: model %q, %d predictions", two.Model, len(two.Predictions))
	}
	for i, p := range two.Predictions {
		if want := (r.Predictions[i].PHelpful + rl.Predictions[i].PHelpful) / 2; math.Abs(p.PHelpful-want) > 1e-12 || p.Windows != r.Predictions[i].Windows {
			t.Errorf("ensemble example %d: P %v (windows %d), want %v (%d)", i, p.PHelpful, p.Windows, want, r.Predictions[i].Windows)
		}
	}
	cfgT5, err := t5.LoadConfig(out)
	if err != nil || cfgT5.VocabSize != 2102 {
		t.Errorf("exported vocab_size %d (%v), want 2100 + 2 label tokens", cfgT5.VocabSize, err)
	}
	// The export records the windows it is to be read at: by default the
	// checkpoint's training windows; ExportAt's when given.
	trained := filter.Windowing{MaxSeqLength: cfg.MaxSeqLength, DocStride: cfg.DocStride}
	if w, from, err := CheckpointWindows(res.LastCheckpoint); err != nil || w != trained || from != WindowsFromTraining {
		t.Errorf("checkpoint windows %+v from %q (%v), want %+v from training", w, from, err, trained)
	}
	if w, from, err := CheckpointWindows(out); err != nil || w != trained || from != WindowsFromModel {
		t.Errorf("export windows %+v from %q (%v), want %+v from the model", w, from, err, trained)
	}
	at := filepath.Join(t.TempDir(), "export-at")
	evaluated := filter.Windowing{MaxSeqLength: 96, DocStride: 8}
	if err := ExportAt(res.LastCheckpoint, at, &evaluated); err != nil {
		t.Fatal(err)
	}
	if w, from, err := CheckpointWindows(at); err != nil || w != evaluated || from != WindowsFromModel {
		t.Errorf("ExportAt windows %+v from %q (%v), want %+v", w, from, err, evaluated)
	}
	if err := ExportAt(res.LastCheckpoint, filepath.Join(t.TempDir(), "bad"), &filter.Windowing{MaxSeqLength: 8, DocStride: 7}); err == nil || !strings.Contains(err.Error(), "doc_stride") {
		t.Errorf("ExportAt with doc_stride 7 of 8: err %v", err)
	}
	if err := Export(filepath.Join(cfg.OutputDir, trainer.BestLink), out); err == nil {
		t.Error("export over an existing directory: no error")
	}
}

// Acceptance 4: an interrupted run resumed from its last checkpoint ends
// with the same loss and weights as an uninterrupted one (dropout on, so the
// RNG state must be restored too).
func TestResumeMatchesUninterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: trains a tiny T5 three times")
	}
	base := tinyConfig(t, 0.1) // dropout on: the RNG state must resume too
	base.BatchSize, base.GradAccumulation, base.Epochs, base.SaveSteps = 2, 2, 3, 2
	base.WarmupSteps, base.MaxGradNorm, base.WeightDecay = 1, 1.0, 0.01
	train := toySet(8) // 4 micro-batches → 2 updates per epoch, 6 in all

	full := base
	resFull, err := Train(context.Background(), full, train, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	cut := base
	cut.OutputDir = filepath.Join(t.TempDir(), "cut")
	ctx, cancel := context.WithCancel(context.Background())
	_, err = Train(ctx, cut, train, nil, nil, func(p Progress) {
		if p.Phase == "train" && p.Step == 5 { // one update after checkpoint-4: lost on "kill"
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v, want context.Canceled", err)
	}
	if _, err := Train(context.Background(), cut, train, nil, nil, nil); err == nil {
		t.Fatal("rerun without Resume over existing checkpoints: no error")
	}
	cut.Resume = true
	resCut, err := Train(context.Background(), cut, train, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(resCut.ResumedFrom) != "checkpoint-4" || resCut.GlobalStep != 6 {
		t.Fatalf("resumed from %q to step %d, want checkpoint-4 → 6", resCut.ResumedFrom, resCut.GlobalStep)
	}
	t.Logf("final loss uninterrupted %.8f, resumed %.8f", resFull.FinalLoss, resCut.FinalLoss)
	if math.Abs(resFull.FinalLoss-resCut.FinalLoss) > 1e-5 {
		t.Fatalf("final loss %.8f (resumed) vs %.8f (uninterrupted)", resCut.FinalLoss, resFull.FinalLoss)
	}
	a := readWeights(t, filepath.Join(resFull.LastCheckpoint, t5.WeightsFile))
	b := readWeights(t, filepath.Join(resCut.LastCheckpoint, t5.WeightsFile))
	worst := 0.0
	for name, va := range a {
		vb := b[name]
		for i := range va {
			worst = math.Max(worst, math.Abs(float64(va[i]-vb[i])))
		}
	}
	if worst > 1e-5 {
		t.Fatalf("final weights differ by up to %g", worst)
	}
	// Changed data are refused on resume.
	other := toySet(10)
	if _, err := Train(context.Background(), cut, other, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "data") {
		t.Fatalf("resume with other data: %v", err)
	}
}

func readWeights(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for name, tt := range f.Tensors {
		if out[name], err = tt.Float32(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Acceptance 5 (training side): clear errors naming the file/record/token.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"id":"x1","answer":"[MAYBE]","question":"`+strings.ReplaceAll(filter.Instruction("e", "q"), "\n", `\n`)+`"}]`), 0o644)
	if _, err := filter.ReadExamples(bad); err == nil || !strings.Contains(err.Error(), "record 1") || !strings.Contains(err.Error(), "[MAYBE]") {
		t.Errorf("other label: %v", err)
	}
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, nil, 0o644)
	if _, err := filter.ReadExamples(empty); !errors.Is(err, filter.ErrEmpty) {
		t.Errorf("empty file: %v", err)
	}
	cfg := tinyConfig(t, 0)
	if _, err := Train(context.Background(), cfg, nil, nil, nil, nil); !errors.Is(err, filter.ErrEmpty) {
		t.Errorf("no training examples: %v", err)
	}
	// The base fixture has no label tokens: evaluation refuses it, naming both.
	_, err := Evaluate(fixtureModel(t), toySet(2), EvalOptions{})
	if err == nil || !strings.Contains(err.Error(), filter.Helpful) || !strings.Contains(err.Error(), "t5-flan-tiny") {
		t.Errorf("checkpoint without label tokens: %v", err)
	}
	if err := Export(fixtureModel(t), filepath.Join(dir, "x")); err == nil {
		t.Error("export of a base checkpoint: no error")
	}
	c := DefaultConfig()
	c.ModelDir, c.OutputDir, c.DocStride = "m", "o", 600
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "doc_stride 600") {
		t.Errorf("DocStride 600 with MaxSeqLength 512: %v", err)
	}
}

// Acceptance 2: the RAG² release file is accepted unchanged.
func TestRealRAG2File(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: one update on the real file")
	}
	exs, err := filter.ReadExamples(sharedDir(t, "data/rag2_filter/medqa_llama3_cot_5pct-train.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig(t, 0.1)
	cfg.MaxSeqLength, cfg.DocStride, cfg.BatchSize, cfg.MaxSteps = 128, 32, 4, 1
	res, err := Train(context.Background(), cfg, exs, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.GlobalStep != 1 || res.TrainWindows < len(exs) || math.IsNaN(res.FinalLoss) {
		t.Fatalf("result %+v", res)
	}
	t.Logf("%d examples → %d windows of ≤128 tokens; loss %.4f", len(exs), res.TrainWindows, res.FinalLoss)
}

func BenchmarkTrainStep(b *testing.B) {
	if _, err := backend.New(""); err != nil {
		b.Fatal(err)
	}
	r, err := BenchTrainStep("", t5.MiniConfig(2100), 8, 256, 2, max(1, b.N))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.TrainTokensPerSec, "tokens/s")
	b.ReportMetric(r.MsPerStep, "ms/step")
	b.ReportMetric(r.InferExamplesPerSec, "infer_examples/s")
	b.ReportMetric(r.CompileMs, "compile_ms")
}

// BenchmarkTrainStepTiny is the `ragforge train filter` demo shape: the tiny
// T5 (d_model 64, 2+2 layers, vocab 2100), batch 8 × 192 tokens.
func BenchmarkTrainStepTiny(b *testing.B) {
	if _, err := backend.New(""); err != nil {
		b.Fatal(err)
	}
	r, err := BenchTrainStep("", t5.TinyConfig(2100), 8, 192, 2, max(1, b.N))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.TrainTokensPerSec, "tokens/s")
	b.ReportMetric(r.MsPerStep, "ms/step")
	b.ReportMetric(r.InferExamplesPerSec, "infer_examples/s")
	b.ReportMetric(r.CompileMs, "compile_ms")
}

// BenchTrainStep runs end to end on tiny shapes and reports positive rates.
func TestBenchTrainStepTiny(t *testing.T) {
	t.Setenv(backend.EnvVar, testBackend)
	c := t5.TinyConfig(300)
	c.NumLayers, c.NumDecoderLayers = 1, 1
	r, err := BenchTrainStep("", c, 2, 16, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !(r.TrainTokensPerSec > 0 && r.MsPerStep > 0 && r.InferExamplesPerSec > 0) || r.BatchSize != 2 || r.EncLength != 16 {
		t.Fatalf("result %+v", r)
	}
	if _, err := BenchTrainStep("", c, 0, 16, 2, 1); err == nil {
		t.Fatal("batch 0: no error")
	}
}

// A diverging run (lr 1e30: after the first update the forward pass
// overflows) stops with trainer.ErrNonFinite by default; with SkipNonFinite
// it consumes its data, skips and counts every non-finite update, and its
// weights stay those of the last finite update.
func TestTrainSkipNonFinite(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: trains a tiny T5")
	}
	for _, skip := range []bool{false, true} {
		cfg := tinyConfig(t, 0)
		cfg.LearningRate, cfg.Epochs, cfg.SaveSteps, cfg.SkipNonFinite = 1e30, 2, 1, skip
		res, err := Train(context.Background(), cfg, toySet(8), nil, nil, nil)
		if !skip {
			if !errors.Is(err, trainer.ErrNonFinite) {
				t.Fatalf("default: err %v, want trainer.ErrNonFinite", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// Without MaxSteps the run plans Epochs × updates-per-epoch updates.
		if res.TotalSteps < 2 || res.GlobalStep != 1 || res.SkippedNonFinite != res.TotalSteps-1 {
			t.Fatalf("%d updates, %d skipped of %d planned; want 1 and %d", res.GlobalStep, res.SkippedNonFinite, res.TotalSteps, res.TotalSteps-1)
		}
		st, err := trainer.ReadState(res.LastCheckpoint)
		if err != nil || st.GlobalStep != 1 || st.Epoch != cfg.Epochs {
			t.Fatalf("last checkpoint state %+v (%v): want step 1, all %d epochs consumed", st, err, cfg.Epochs)
		}
		for name, w := range readWeights(t, filepath.Join(res.LastCheckpoint, "model.safetensors")) {
			for _, x := range w {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("%s holds %v after skipped updates", name, x)
				}
			}
		}
	}
}

// TestLabelRowsStartDistinct: adding the label tokens to a checkpoint gives
// both the mean row; loadForTraining must make them differ (the symmetric
// start never separates the classes), reproducibly in the seed, and apply
// the dropout override.
func TestLabelRowsStartDistinct(t *testing.T) {
	dir := smallModel(t, 0.1)
	rows := func(seed int64) (emb, head [2][]float32) {
		lm, err := loadForTraining(testBackend, dir, seed, 0, nil, DefaultConfig().predictor())
		if err != nil {
			t.Fatal(err)
		}
		if lm.Model.Config.DropoutRate != 0 {
			t.Errorf("dropout %g after override 0", lm.Model.Config.DropoutRate)
		}
		d := lm.Model.Config.DModel
		for i, name := range []string{"shared.weight", "lm_head.weight"} {
			v := readParam(t, lm, name)
			for k, id := range []int{lm.Helpful, lm.NotHelpful} {
				r := append([]float32(nil), v[id*d:(id+1)*d]...)
				if i == 0 {
					emb[k] = r
				} else {
					head[k] = r
				}
			}
		}
		return emb, head
	}
	emb, head := rows(42)
	if fmt.Sprint(emb[0]) == fmt.Sprint(emb[1]) || fmt.Sprint(head[0]) == fmt.Sprint(head[1]) {
		t.Fatal("label rows identical after loadForTraining")
	}
	emb2, _ := rows(42)
	if fmt.Sprint(emb2) != fmt.Sprint(emb) {
		t.Error("label rows not reproducible from the seed")
	}
}

func readParam(t *testing.T, lm *labeled, name string) []float32 {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := lm.Model.Save(dir); err != nil {
		t.Fatal(err)
	}
	return readWeights(t, filepath.Join(dir, t5.WeightsFile))[name]
}

// Issue 30: a checkpoint whose embedding is padded past its tokenizer
// (Flan-T5: 32,128 rows for 32,100 pieces; here 2,128 for 2,100) keeps its
// rows when the label tokens fit in the padding; it was cut to 2,102.
func TestPaddedEmbeddingKeptWhenLabelsFit(t *testing.T) {
	tok, err := tokenizer.Load(fixtureModel(t))
	if err != nil {
		t.Fatal(err)
	}
	be, err := backend.New(testBackend)
	if err != nil {
		t.Fatal(err)
	}
	c := t5.TinyConfig(tok.Len() + 28)
	c.DModel, c.DKV, c.DFF, c.NumLayers, c.NumDecoderLayers, c.NumHeads = 32, 16, 64, 1, 1, 2
	m, err := t5.NewRandom(be, c, 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "padded")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	before := readWeights(t, filepath.Join(dir, t5.WeightsFile))["shared.weight"]
	lm, err := loadForTraining(testBackend, dir, 1, -1, nil, DefaultConfig().predictor())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lm.Model.Config.VocabSize, tok.Len()+28; got != want {
		t.Fatalf("vocab_size %d after adding the label tokens, want the padded %d", got, want)
	}
	if lm.Helpful != tok.Len() || lm.NotHelpful != tok.Len()+1 {
		t.Errorf("label ids %d %d, want %d %d", lm.Helpful, lm.NotHelpful, tok.Len(), tok.Len()+1)
	}
	after := readParam(t, lm, "shared.weight")
	if len(after) != len(before) {
		t.Fatalf("shared.weight %d values, want %d", len(after), len(before))
	}
	d := c.DModel
	for i := range tok.Len() * d { // rows of the pieces are untouched
		if after[i] != before[i] {
			t.Fatalf("shared.weight[%d] changed: %v → %v", i, before[i], after[i])
		}
	}
}
