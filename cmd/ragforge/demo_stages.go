package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// demoSteps are the demo's stages, the steps run in order. Each stage calls
// the same subcommand a user would run, so the summary's commands reproduce
// the figures, whether its step ran it alone or beside another lane.
func demoSteps(o demoOptions) []demoStep {
	one := func(name string, run func(context.Context, *demoState) (demoStage, error)) demoStep {
		return demoStep{{{name, run}}}
	}
	return []demoStep{
		one("retrieval: BM25", demoEvalBM25),
		one("tokenizers", demoTokenizers),
		one("models init", demoModelsInit),
		one("retrieval: hybrid (base)", demoEvalHybrid),
		one("labels: evidence", demoLabels),
		one("labels: ICT (corpus only)", demoICTLabels),
		// The filter and the retriever depend only on the steps above and
		// not on each other: two lanes, side by side.
		{
			filterLane(o),
			{{"selflearn: 1 round (ICT)", demoSelflearn}, {"retrieval: hybrid (tuned)", demoEvalTuned}},
		},
		one("export", demoExport),
		one("serve + /v1/pipeline", demoServe),
	}
}

// filterLane trains the filter, then one more member per
// --filter-ensemble-seeds seed, and evaluates them together.
func filterLane(o demoOptions) []stageFunc {
	lane := []stageFunc{{"filter: train", demoTrainFilter}}
	for _, seed := range o.FilterEnsembleSeeds {
		lane = append(lane, stageFunc{fmt.Sprintf("filter: train member (seed %d)", seed), func(ctx context.Context, st *demoState) (demoStage, error) {
			return demoTrainFilterMember(ctx, st, seed)
		}})
	}
	if o.FilterCalibrate {
		lane = append(lane, stageFunc{"filter: calibrate", demoCalibrateFilter})
	}
	return append(lane, stageFunc{"filter: eval", demoEvalFilter})
}

func (st *demoState) chunkArgs() []string {
	return []string{"--corpus", st.corpus, "--chunk-size", strconv.Itoa(st.o.ChunkSize), "--chunk-overlap", strconv.Itoa(st.o.Overlap)}
}

// bm25Args passes the BM25 flags on that differ from their defaults, so
// the stages' commands stay as they were without them.
func (st *demoState) bm25Args() []string {
	b := st.o.BM25
	var args []string
	if b.Preset != "" && b.Preset != "default" {
		args = append(args, "--bm25-preset", b.Preset)
	}
	if b.K1 > 0 {
		args = append(args, "--bm25-k1", strconv.FormatFloat(b.K1, 'g', -1, 64))
	}
	if b.B >= 0 {
		args = append(args, "--bm25-b", strconv.FormatFloat(b.B, 'g', -1, 64))
	}
	if b.Analyzer != "" && b.Analyzer != bm25.BiomedAnalyzer {
		args = append(args, "--analyzer", b.Analyzer)
	}
	if len(b.MetaFields) > 0 {
		args = append(args, "--bm25-meta-fields", strings.Join(b.MetaFields, ","))
	}
	return args
}

// recipeArgs passes an explicit --recipe on; auto is left to the subcommand.
func (st *demoState) recipeArgs() []string {
	if st.o.Recipe == "" || st.o.Recipe == "auto" {
		return nil
	}
	return []string{"--recipe", st.o.Recipe}
}

func (st *demoState) path(parts ...string) string {
	return filepath.Join(append([]string{st.o.Work}, parts...)...)
}

// fresh removes a stage's output directory so a rerun of the demo starts clean.
func (st *demoState) fresh(parts ...string) string {
	p := st.path(parts...)
	os.RemoveAll(p)
	return p
}

// subJSON runs a subcommand with --json and decodes its output into v.
func (st *demoState) subJSON(v any, args ...string) error {
	out, err := st.sub(append(args, "--json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("ragforge %s: output is not the expected JSON: %w", args[0], err)
	}
	return nil
}

// evalRetrieval runs `eval retrieval` with extra args and returns the summary line.
func (st *demoState) evalRetrieval(extra ...string) (demoStage, error) {
	line, _, err := st.evalRetrievalResult(extra...)
	return line, err
}

// evalRetrievalResult is evalRetrieval with the command's result. A hybrid
// whose dense weight is 0 ranks by BM25 alone: its line is named so.
func (st *demoState) evalRetrievalResult(extra ...string) (demoStage, *evalRetrievalResult, error) {
	args := append([]string{"eval", "retrieval"}, st.chunkArgs()...)
	args = append(args, "--qa", st.qa, "--k", "1,2,4,8")
	args = append(args, extra...)
	args = append(args, st.bm25Args()...)
	var res evalRetrievalResult
	if err := st.subJSON(&res, args...); err != nil {
		return demoStage{}, nil, err
	}
	keep := map[string]float64{}
	for _, k := range []string{"P@1", "Recall@4", "nDCG@10", "MRR@10"} {
		keep[k] = res.Metrics[k]
	}
	line := demoStage{Command: st.command(args...), RunID: res.RunID, Metrics: keep, Artifacts: []string{res.Files["per_query"], res.Files["trec"]}}
	if res.Retriever == "hybrid" && res.DenseWeight == 0 {
		line.Name = "retrieval: " + retrievalLabel(res.Retriever, res.DenseWeight, res.BM25Weight)
	}
	return line, &res, nil
}

func demoEvalBM25(ctx context.Context, st *demoState) (demoStage, error) {
	return st.evalRetrieval("--retriever", "bm25")
}

// demoTokenizers trains a SentencePiece Unigram (T5) and a WordPiece (BERT)
// tokenizer on the corpus, so the demo needs no downloaded vocabulary.
func demoTokenizers(ctx context.Context, st *demoState) (demoStage, error) {
	var cmds []string
	for _, t := range []struct{ kind, name, vocab string }{{"unigram", "spm", "2000"}, {"wordpiece", "wordpiece", "1500"}} {
		out := st.fresh("tokenizers", t.name)
		args := []string{"tokenizer", "train", "--corpus", st.corpus, "--kind", t.kind, "--vocab-size", t.vocab, "--out", out}
		if _, err := st.sub(args...); err != nil {
			return demoStage{}, err
		}
		st.dirs[t.name] = out
		cmds = append(cmds, st.command(args...))
	}
	return demoStage{Command: strings.Join(cmds, "\n  "), Artifacts: []string{st.dirs["spm"], st.dirs["wordpiece"]}}, nil
}

func demoModelsInit(ctx context.Context, st *demoState) (demoStage, error) {
	var cmds []string
	for _, m := range []struct{ arch, tok, name string }{{"t5", st.dirs["spm"], "t5-tiny"}, {"bert", st.dirs["wordpiece"], "bert-tiny"}} {
		out := st.fresh("models", m.name)
		args := []string{"models", "init", "--arch", m.arch, "--size", "tiny", "--tokenizer", m.tok, "--seed", strconv.FormatInt(st.o.Seed, 10), "--out", out}
		if m.arch == "t5" {
			// Token-matching heads: the random filter learns the
			// question–evidence word match from this start within the
			// demo's budget (docs/recipes.md, "Filter, third sweep").
			args = append(args, "--token-match-heads", "4", "--token-match-score", "8")
		}
		if _, err := st.sub(args...); err != nil {
			return demoStage{}, err
		}
		st.dirs[m.name] = out
		cmds = append(cmds, st.command(args...))
	}
	return demoStage{Command: strings.Join(cmds, "\n  "), Artifacts: []string{st.dirs["t5-tiny"], st.dirs["bert-tiny"]}}, nil
}

func demoEvalHybrid(ctx context.Context, st *demoState) (demoStage, error) {
	return st.evalRetrieval("--retriever", "hybrid", "--encoder", st.dirs["bert-tiny"])
}

func demoLabels(ctx context.Context, st *demoState) (demoStage, error) {
	out := st.path("labels", "evidence.jsonl")
	os.MkdirAll(filepath.Dir(out), 0o755)
	args := append([]string{"label", "evidence"}, st.chunkArgs()...)
	args = append(args, "--qa", st.qa, "--top-n", "10", "--negatives", "3", "--out", out)
	args = append(args, st.bm25Args()...)
	var res labelResult
	if err := st.subJSON(&res, args...); err != nil {
		return demoStage{}, err
	}
	st.dirs["labels"] = out
	return demoStage{Command: st.command(args...), RunID: res.RunID, Artifacts: []string{out},
		Metrics: map[string]float64{"helpful": float64(res.Counts["[HELPFUL]"]), "not_helpful": float64(res.Counts["[NOT_HELPFUL]"])}}, nil
}

// demoICTLabels makes self-supervised filter examples from the corpus
// (label ict), the filter's training data: a random T5 trained on the
// evidence labels memorises which chunks were helpful (make demo-ap then
// fine-tunes the ICT-trained filter on them, demoTrainFilter). The settings are the
// scratch recipe's sweep (docs/recipes.md): 200-character chunks (short
// inputs, many updates), --ict-per-chunk pseudo-questions per chunk (8),
// the sentence kept in its evidence, random negatives. --ict-max-chunks
// (150) bounds the cost on a real corpus; make demo-ap draws 2 from every
// chunk instead, which transfers better there (docs/recipes.md).
func demoICTLabels(ctx context.Context, st *demoState) (demoStage, error) {
	out := st.path("labels", "ict.jsonl")
	args := []string{"label", "ict", "--corpus", st.corpus, "--chunk-size", "200", "--chunk-overlap", "0", "--min-words", "3",
		"--per-chunk", strconv.Itoa(st.o.ICTPerChunk), "--keep", "1", "--random-negatives", "--max-chunks", strconv.Itoa(st.o.ICTMaxChunks), "--seed", strconv.FormatInt(st.o.Seed, 10), "--out", out}
	var res labelResult
	if err := st.subJSON(&res, args...); err != nil {
		return demoStage{}, err
	}
	st.dirs["labels-ict"] = out
	return demoStage{Command: st.command(args...), RunID: res.RunID, Artifacts: []string{out},
		Metrics: map[string]float64{"helpful": float64(res.Counts["[HELPFUL]"]), "not_helpful": float64(res.Counts["[NOT_HELPFUL]"])}}, nil
}

// demoTrainFilter trains with the recipe train filter picks for the
// checkpoint (scratch: models init marks it random) on the ICT examples
// alone, holding out 20% of the evidence labels' questions for evaluation;
// with --filter-finetune-epochs it then fine-tunes that checkpoint on the
// training questions' evidence labels (the same held-out split: same file,
// fraction and seed). Training windows are 256 tokens (a marked ICT
// example may take two; 384 scored lower on the AP training questions,
// docs/recipes.md); the evaluation reads demoEvalSeqLength.
func demoTrainFilter(ctx context.Context, st *demoState) (demoStage, error) {
	stage, res, out, err := st.trainFilter(st.dirs["t5-tiny"], "filter", st.o.Seed)
	if err != nil {
		return demoStage{}, err
	}
	st.dirs["filter-run"] = res.RunID
	st.dirs["filter-out"] = out
	st.filterMembers = []string{res.Result.LastCheckpoint}
	return stage, nil
}

// demoTrainFilterMember adds an ensemble member: the T5 of models init
// and the filter training of the demo, both from seed (docs/recipes.md,
// "Filter, fourth sweep"). Only its last checkpoint is used, in eval
// filter; export and the pipeline keep the first filter.
func demoTrainFilterMember(ctx context.Context, st *demoState, seed int64) (demoStage, error) {
	name := fmt.Sprintf("t5-tiny-seed%d", seed)
	model := st.fresh("models", name)
	init := []string{"models", "init", "--arch", "t5", "--size", "tiny", "--tokenizer", st.dirs["spm"], "--seed", strconv.FormatInt(seed, 10), "--out", model,
		"--token-match-heads", "4", "--token-match-score", "8"}
	if _, err := st.sub(init...); err != nil {
		return demoStage{}, err
	}
	stage, res, _, err := st.trainFilter(model, fmt.Sprintf("filter-seed%d", seed), seed)
	if err != nil {
		return demoStage{}, err
	}
	stage.Command = st.command(init...) + "\n  " + stage.Command
	st.filterMembers = append(st.filterMembers, res.Result.LastCheckpoint)
	return stage, nil
}

// trainFilterResult is the part of train filter's --json output the demo reads.
type trainFilterResult struct {
	RunID  string `json:"run_id"`
	Recipe string `json:"recipe"`
	Result struct {
		FinalLoss      float64
		LastCheckpoint string
		BestAccuracy   float64
		GlobalStep     int
	} `json:"result"`
}

// trainFilter runs the demo's ICT training from model into the work
// directory name with seed, then, with --filter-finetune-epochs, the
// fine-tuning into name-finetune. It returns the stage, the last run's
// result and its output directory.
func (st *demoState) trainFilter(model, name string, seed int64) (demoStage, trainFilterResult, string, error) {
	var res trainFilterResult
	out := st.fresh(name)
	args := st.trainFilterArgs(model, out, seed)
	if err := st.subJSON(&res, args...); err != nil {
		return demoStage{}, res, "", err
	}
	cmds := []string{st.command(args...)}
	if st.o.FilterFinetuneEpochs > 0 {
		out = st.fresh(name + "-finetune")
		args = st.finetuneFilterArgs(res.Result.LastCheckpoint, out)
		if err := st.subJSON(&res, args...); err != nil {
			return demoStage{}, res, "", err
		}
		cmds = append(cmds, st.command(args...))
	}
	return demoStage{Command: strings.Join(cmds, "\n  "), RunID: res.RunID, Artifacts: []string{res.Result.LastCheckpoint},
		Metrics: map[string]float64{"final_loss": res.Result.FinalLoss, "steps": float64(res.Result.GlobalStep)}}, res, out, nil
}

// formatFloats writes fs as a comma-separated flag value that parses back
// to the same floats.
func formatFloats(fs []float64) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// trainFilterArgs is the demo's ICT training command line from model into
// out with seed: the ICT examples alone (--augment-only), 20% of the
// evidence labels' questions held out. With a seed other than the demo's,
// the run's own --valid-frac split (logged, never used) differs from the
// one the demo evaluates on; training sees the ICT examples only.
func (st *demoState) trainFilterArgs(model, out string, seed int64) []string {
	args := []string{"train", "filter", "--model", model, "--train", st.dirs["labels"], "--augment", st.dirs["labels-ict"], "--augment-only",
		"--valid-frac", "0.2", "--out", out, "--max-seq-length", "256", "--doc-stride", "64", "--seed", strconv.FormatInt(seed, 10)}
	if st.o.FilterMatchMarks {
		args = append(args, "--match-marks") // fine-tuning inherits them from the checkpoint
		if r := st.o.FilterMatchMarksRare; len(r) > 0 {
			args = append(args, "--match-marks-rare", formatFloats(r))
		}
	}
	args = append(args, st.recipeArgs()...)
	switch {
	case st.o.Quick:
		args = append(args, "--epochs", "1")
	case st.o.Epochs > 0:
		args = append(args, "--epochs", strconv.Itoa(st.o.Epochs))
	}
	return args
}

// demoFinetuneLR is the fine-tuning learning rate: 2e-4 scored above 1e-3
// on the AP corpus' training questions (docs/recipes.md, "AP filter,
// fourth sweep"); the rest is the checkpoint's recipe.
const demoFinetuneLR = "2e-4"

// finetuneFilterArgs fine-tunes the checkpoint model on the evidence
// labels' training questions, writing to out; the held-out split is the
// demo's (same file, --valid-frac and the demo's --seed, for every
// ensemble member), so the evaluated questions stay out of training.
func (st *demoState) finetuneFilterArgs(model, out string) []string {
	epochs := st.o.FilterFinetuneEpochs
	if st.o.Quick {
		epochs = 1
	}
	args := []string{"train", "filter", "--model", model, "--train", st.dirs["labels"],
		"--valid-frac", "0.2", "--out", out, "--max-seq-length", "256", "--doc-stride", "64", "--seed", strconv.FormatInt(st.o.Seed, 10),
		"--lr", demoFinetuneLR, "--epochs", strconv.Itoa(epochs)}
	return append(args, st.recipeArgs()...)
}

// demoEvalSeqLength holds a whole evidence example of a 512-character chunk
// with its match marks in one window, so no window lacks its question (at
// 256 a quarter of AP's took two; docs/recipes.md, "Filter: exact-match
// marks").
const demoEvalSeqLength = "384"

// demoCalibrateFilter fits train calibration of the trained filter on
// the training questions' evidence labels (the evidence labels minus the
// held-out examples of filter/valid.jsonl, which the split made by
// question), with coverage's IDF over the ICT evidence the filter trained
// on; and, as a baseline, the word-overlap features without the T5. The
// calibrated filter is the one evaluated, exported and served.
func demoCalibrateFilter(ctx context.Context, st *demoState) (demoStage, error) {
	all, err := filter.ReadExamples(st.dirs["labels"])
	if err != nil {
		return demoStage{}, err
	}
	held, err := filter.ReadExamples(filepath.Join(st.dirs["filter-out"], "valid.jsonl"))
	if err != nil {
		return demoStage{}, err
	}
	out := map[string]bool{}
	for _, ex := range held {
		out[ex.ID] = true
	}
	var train []filter.Example
	for _, ex := range all {
		if !out[ex.ID] {
			train = append(train, ex)
		}
	}
	data := st.path("labels", "evidence-train.jsonl")
	if err := filter.WriteJSONL(data, train); err != nil {
		return demoStage{}, err
	}
	t5 := st.filterMembers[0]
	var cmds []string
	var res struct {
		RunID  string                        `json:"run_id"`
		Report filtertrain.CalibrationReport `json:"report"`
	}
	for _, c := range []struct{ name, features string }{
		{"filter-calibrated", strings.Join(filter.CalibrationFeatures, ",")},
		{"filter-words-only", filter.FeatureCoverage + "," + filter.FeatureLevelSum},
	} {
		args := []string{"train", "calibration", "--model", t5, "--data", data, "--idf-from", filepath.Join(st.dirs["filter-out"], "train.jsonl"),
			"--features", c.features, "--max-seq-length", demoEvalSeqLength, "--doc-stride", "64", "--out", st.fresh(c.name)}
		if err := st.subJSON(&res, args...); err != nil {
			return demoStage{}, err
		}
		st.dirs[c.name] = res.Report.Out
		cmds = append(cmds, st.command(args...))
	}
	st.dirs["filter-t5"] = t5
	st.filterMembers = []string{st.dirs["filter-calibrated"]}
	return demoStage{Command: strings.Join(cmds, "\n  "), RunID: res.RunID, Artifacts: []string{data, st.dirs["filter-calibrated"]},
		Metrics: map[string]float64{"examples": float64(len(train))}}, nil
}

// demoEvalFilter evaluates the last checkpoint (not the one with the best
// validation accuracy, which would choose it on the very labels reported)
// on the held-out questions; a calibrated filter beside the T5 alone and
// the word-overlap scores alone. The filter evaluated here is the one
// demoExport ships (shippedFilter).
func demoEvalFilter(ctx context.Context, st *demoState) (demoStage, error) {
	res, args, err := st.evalFilter(st.filterMembers, "filter-eval")
	if err != nil {
		return demoStage{}, err
	}
	rep := res.Report
	cmds := []string{st.command(args...)}
	m := map[string]float64{"accuracy": rep.Accuracy, "F1": rep.F1, "majority_baseline": rep.MajorityBaseline}
	vs := []versusRow{{"filter (held-out questions)", "accuracy", rep.Accuracy, "majority class", rep.MajorityBaseline}}
	if rep.ROCAUC == nil {
		return demoStage{Command: cmds[0], RunID: res.RunID, Metrics: m, Versus: vs, Artifacts: []string{res.Dir}}, nil
	}
	m["ROC-AUC"] = *rep.ROCAUC
	vs = append(vs, versusRow{"filter (held-out questions)", "ROC-AUC", *rep.ROCAUC, "chance", 0.5})
	if st.dirs["filter-t5"] != "" {
		for _, b := range []struct{ dir, name, key string }{
			{st.dirs["filter-t5"], "the T5 alone (uncalibrated)", "ROC-AUC_t5_alone"},
			{st.dirs["filter-words-only"], "word-overlap scores alone", "ROC-AUC_words_alone"},
		} {
			r, args, err := st.evalFilter([]string{b.dir}, "filter-eval-"+strings.TrimPrefix(b.key, "ROC-AUC_"))
			if err != nil {
				return demoStage{}, err
			}
			cmds = append(cmds, st.command(args...))
			if a := r.Report.ROCAUC; a != nil {
				m[b.key] = *a
				vs = append(vs, versusRow{"filter (held-out questions)", "ROC-AUC", *rep.ROCAUC, b.name, *a})
			}
		}
	}
	return demoStage{Command: strings.Join(cmds, "\n  "), RunID: res.RunID, Metrics: m, Versus: vs, Artifacts: []string{res.Dir}}, nil
}

// filterEvalResult is the part of eval filter's --json output the demo reads.
type filterEvalResult struct {
	RunID  string `json:"run_id"`
	Dir    string `json:"dir"`
	Report struct {
		Accuracy         float64  `json:"accuracy"`
		F1               float64  `json:"f1"`
		ROCAUC           *float64 `json:"roc_auc"`
		MajorityBaseline float64  `json:"majority_baseline"`
	} `json:"report"`
}

// evalFilterAsExported runs eval filter of an exported filter on the
// held-out questions at the windows its config.json records (no window
// flags).
func (st *demoState) evalFilterAsExported(dir string) (filterEvalResult, []string, error) {
	args := []string{"eval", "filter", "--model", dir, "--data", filepath.Join(st.dirs["filter-out"], "valid.jsonl"), "--out", st.fresh("filter-eval-exported")}
	var res filterEvalResult
	err := st.subJSON(&res, args...)
	return res, args, err
}

// evalFilter runs eval filter of models (an ensemble when more than one) on
// the held-out questions into the work directory out; it returns the
// result and the command line.
func (st *demoState) evalFilter(models []string, out string) (filterEvalResult, []string, error) {
	args := []string{"eval", "filter"}
	for _, m := range models {
		args = append(args, "--model", m)
	}
	args = append(args, "--data", filepath.Join(st.dirs["filter-out"], "valid.jsonl"),
		"--max-seq-length", demoEvalSeqLength, "--doc-stride", "64", "--out", st.fresh(out))
	var res filterEvalResult
	err := st.subJSON(&res, args...)
	return res, args, err
}

// selflearnArgs is the demo's selflearn command line: one ICT round from
// the models init BERT, with the demo's retriever flags passed on only when
// set (otherwise selflearn's recipe and defaults apply).
func (st *demoState) selflearnArgs(work string) []string {
	args := append([]string{"selflearn"}, st.chunkArgs()...)
	args = append(args, "--retriever", st.dirs["bert-tiny"], "--generator", "ict", "--rounds", "1", "--eval-qa", st.qa,
		"--work", work, "--samples", strconv.Itoa(st.o.Samples), "--max-length", "256", "--seed", strconv.FormatInt(st.o.Seed, 10))
	if st.o.QueriesPerChunk > 0 {
		args = append(args, "--queries-per-chunk", strconv.Itoa(st.o.QueriesPerChunk))
	}
	if st.o.Negatives >= 0 {
		args = append(args, "--negatives", strconv.Itoa(st.o.Negatives))
	}
	if st.o.Candidates > 0 {
		args = append(args, "--candidates", strconv.Itoa(st.o.Candidates))
	}
	if st.o.TrainFuse >= 0 {
		args = append(args, "--train-fuse", strconv.Itoa(st.o.TrainFuse))
	}
	args = append(args, st.bm25Args()...)
	return append(args, st.recipeArgs()...)
}

func demoSelflearn(ctx context.Context, st *demoState) (demoStage, error) {
	args := st.selflearnArgs(st.fresh("selflearn"))
	var rep struct {
		RunID  string `json:"run_id"`
		Rounds []struct {
			Round        int    `json:"round"`
			RetrieverDir string `json:"retriever_dir"`
			Fusion       *struct {
				DenseWeight float64 `json:"dense_weight"`
			} `json:"fusion"`
			Variants []struct {
				Name    string             `json:"name"`
				Metrics map[string]float64 `json:"metrics"`
			} `json:"variants"`
		} `json:"rounds"`
	}
	if err := st.subJSON(&rep, args...); err != nil {
		return demoStage{}, err
	}
	m := map[string]float64{}
	var vs []versusRow
	for _, r := range rep.Rounds {
		for _, v := range r.Variants {
			if v.Name == "dense" || v.Name == "sl-hyde" || v.Name == "base" || v.Name == "bm25" {
				m[fmt.Sprintf("r%d %s nDCG@10", r.Round, v.Name)] = v.Metrics["nDCG@10"]
			}
			if v.Name == "dense" && r.Round > 0 {
				vs = append(vs, versusRow{fmt.Sprintf("dense retriever (round %d)", r.Round), "nDCG@10", v.Metrics["nDCG@10"], "round 0", m["r0 dense nDCG@10"]})
			}
		}
		if r.Fusion != nil {
			m[fmt.Sprintf("r%d dense_weight", r.Round)] = r.Fusion.DenseWeight
		}
		if r.RetrieverDir != "" {
			st.dirs["retriever-tuned"] = r.RetrieverDir
		}
	}
	if st.dirs["retriever-tuned"] == "" {
		return demoStage{}, fmt.Errorf("selflearn reported no tuned retriever")
	}
	return demoStage{Command: st.command(args...), RunID: rep.RunID, Metrics: m, Versus: vs, Artifacts: []string{st.dirs["retriever-tuned"]}}, nil
}

// demoEvalTuned evaluates the hybrid with the self-learned retriever, with
// the fusion weights selflearn chose on held-out pseudo-queries
// (ragforge_fusion.json beside the retriever).
func demoEvalTuned(ctx context.Context, st *demoState) (demoStage, error) {
	line, res, err := st.evalRetrievalResult("--retriever", "hybrid", "--encoder", st.dirs["retriever-tuned"])
	if err != nil {
		return line, err
	}
	// The pipeline is built from this evaluation (demoExport: --from-run).
	st.dirs["retrieval-tuned-run"] = res.RunID
	name := "hybrid (self-learned retriever)"
	if res.DenseWeight == 0 {
		line.Name += ", self-learned retriever unused"
		name = retrievalLabel(res.Retriever, res.DenseWeight, res.BM25Weight)
	}
	for _, b := range []struct{ stage, name string }{{"retrieval: hybrid (base)", "base hybrid"}, {"retrieval: BM25", "BM25"}} {
		for _, k := range []string{"nDCG@10", "P@1"} {
			if base, ok := st.metrics[b.stage][k]; ok {
				line.Versus = append(line.Versus, versusRow{name, k, line.Metrics[k], b.name, base})
			}
		}
	}
	return line, nil
}

// shippedFilter is the filter the demo evaluated and so ships: the first
// of filterMembers (the calibrated checkpoint, or the last checkpoint of
// the filter training, never filter/best, which validation chose on the
// held-out questions the summary reports on), the checkpoint its T5 comes
// from, and that checkpoint's training step (-1 when its name has none).
func (st *demoState) shippedFilter() (dir, checkpoint string, step int) {
	dir = st.filterMembers[0]
	checkpoint = dir
	if t5 := st.dirs["filter-t5"]; t5 != "" {
		checkpoint = t5
	}
	step = -1
	if n, ok := strings.CutPrefix(filepath.Base(checkpoint), "checkpoint-"); ok {
		if v, err := strconv.Atoi(n); err == nil {
			step = v
		}
	}
	return dir, checkpoint, step
}

// demoExport exports the filter the summary evaluated (shippedFilter) with
// the windows it was evaluated at recorded in its config.json, evaluates
// the export as it is (eval filter, no window flags) on the same held-out
// questions, and fails when that single model's figures differ from the
// evaluation stage's, so that the summary reports the filter that ships;
// then builds the pipeline from it.
func demoExport(ctx context.Context, st *demoState) (demoStage, error) {
	fexp := st.fresh("export", "filter")
	ship, ckpt, step := st.shippedFilter()
	args1 := []string{"export", "--from", ship, "--out", fexp}
	if st.dirs["filter-calibrated"] == "" {
		// A training checkpoint records its training windows (256); the
		// summary's evaluation read demoEvalSeqLength.
		args1 = append(args1, "--max-seq-length", demoEvalSeqLength, "--doc-stride", "64")
	}
	if _, err := st.sub(args1...); err != nil {
		return demoStage{}, err
	}
	ev, evArgs, err := st.evalFilterAsExported(fexp)
	if err != nil {
		return demoStage{}, err
	}
	m := map[string]float64{"shipped_step": float64(step), "shipped_accuracy": ev.Report.Accuracy}
	if a := ev.Report.ROCAUC; a != nil {
		m["shipped_ROC-AUC"] = *a
	}
	if len(st.filterMembers) == 1 {
		if err := sameFilterReport(st.metrics["filter: eval"], m); err != nil {
			return demoStage{}, fmt.Errorf("exported filter %s (from %s): %w", fexp, ship, err)
		}
	}
	pl := st.fresh("export", "pipeline")
	// The retrieval served is the one evaluated last (the tuned hybrid):
	// its mode, weights, depth, BM25 and chunking come from that run.
	args2 := []string{"pipeline", "build", "--corpus", "lab=" + st.corpus, "--from-run", st.dirs["retrieval-tuned-run"],
		"--filter", fexp, "--generator", st.dirs["t5-tiny"], "--k", "4", "--out", pl}
	var res struct {
		RunID string `json:"run_id"`
	}
	if err := st.subJSON(&res, args2...); err != nil {
		return demoStage{}, err
	}
	st.dirs["pipeline-run"] = res.RunID
	return demoStage{Command: st.command(args1...) + "\n  " + st.command(evArgs...) + "\n  " + st.command(args2...), RunID: res.RunID,
		Metrics: m, Artifacts: []string{fmt.Sprintf("%s (filter from %s, step %d)", fexp, ckpt, step), pl}}, nil
}

// sameFilterReport returns an error unless the shipped filter's accuracy
// and ROC-AUC (shipped_…) equal the evaluation stage's (evaluated).
func sameFilterReport(evaluated, shipped map[string]float64) error {
	for _, k := range []string{"accuracy", "ROC-AUC"} {
		a, okA := evaluated[k]
		b, okB := shipped["shipped_"+k]
		if okA != okB || math.Abs(a-b) > 1e-9 {
			return fmt.Errorf("%s as exported %v, the summary's evaluated filter %v: the summary would report another filter than the one shipped", k, b, a)
		}
	}
	return nil
}

// demoServe starts the server on a free loopback port, makes one
// /v1/pipeline call, and stops it as SIGTERM would.
func demoServe(ctx context.Context, st *demoState) (demoStage, error) {
	g := *st.g
	g.DB = st.db
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	o := serveOptions{RunID: st.dirs["pipeline-run"]}
	o.Opt.Addr = "127.0.0.1:0"
	o.Opt.OpenRead = true
	o.Opt.RequestTimeout = 5 * time.Minute
	o.Opt.MaxBodyBytes = 1 << 20
	o.NoWorkbench = false
	g.Err = io.Discard // request logs would drown the demo's output
	o.ready = ready
	go func() { done <- runServe(sctx, &g, o) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		return demoStage{}, fmt.Errorf("serve: %w", err)
	case <-time.After(5 * time.Minute):
		return demoStage{}, fmt.Errorf("serve did not start")
	}
	q := "How long does the retrieval step run and at what temperature?"
	body := fmt.Sprintf(`{"question":%q,"k":4}`, q)
	start := time.Now()
	resp, err := http.Post("http://"+addr+"/v1/pipeline", "application/json", strings.NewReader(body))
	if err != nil {
		return demoStage{}, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return demoStage{}, fmt.Errorf("/v1/pipeline: HTTP %d: %s", resp.StatusCode, b)
	}
	var pr struct {
		Retrieved []json.RawMessage `json:"retrieved"`
		Kept      []json.RawMessage `json:"kept"`
		Answer    string            `json:"answer"`
	}
	_ = json.Unmarshal(b, &pr)
	took := time.Since(start).Seconds()
	cancel()
	if err := <-done; err != nil {
		return demoStage{}, fmt.Errorf("serve stopped with: %w", err)
	}
	atomicfile.WriteBytes(st.path("pipeline-response.json"), b, 0o644)
	return demoStage{
		Command:   fmt.Sprintf("ragforge --db %s serve --run %s --addr 127.0.0.1:8080 --open-read\n  curl -s -XPOST 127.0.0.1:8080/v1/pipeline -H 'Content-Type: application/json' -d '%s'", st.db, st.dirs["pipeline-run"], body),
		Metrics:   map[string]float64{"pipeline_seconds": took, "retrieved": float64(len(pr.Retrieved)), "kept": float64(len(pr.Kept))},
		Artifacts: []string{st.path("pipeline-response.json")},
	}, nil
}
