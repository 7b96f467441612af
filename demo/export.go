package demo

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// shippedFilter is the filter the demo evaluated and so ships: the first
// of filterMembers (the calibrated checkpoint, or the last checkpoint of
// the filter training, never filter/best, which validation chose on the
// held-out questions the summary reports on), the checkpoint its T5 comes
// from, and that checkpoint's training step (-1 when its name has none).
func (st *state) shippedFilter() (dir, checkpoint string, step int) {
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

// export exports the filter the summary evaluated (shippedFilter) with the
// windows it was evaluated at recorded in its config.json, evaluates the
// export as it is (eval filter, its own windows) on the same held-out
// questions, and fails when that single model's figures differ from the
// evaluation stage's, so that the summary reports the filter that ships;
// then builds the pipeline from it.
func export(ctx context.Context, st *state) (Stage, error) {
	fexp := st.fresh("export", "filter")
	ship, ckpt, step := st.shippedFilter()
	job := filtertrain.ExportJob{Source: ship, Out: fexp, Note: st.log}
	args := []string{"export", "--from", ship, "--out", fexp}
	if st.dirs["filter-calibrated"] == "" {
		// A training checkpoint records its training windows (256); the
		// summary's evaluation read evalSeqLength.
		job.Windows = evalWindows
		args = append(args, "--max-seq-length", itoa(evalSeqLength), "--doc-stride", itoa(docStride))
	}
	if err := st.record(func(start tracker.Starter) error {
		_, err := filtertrain.RunExport(job, start)
		return err
	}); err != nil {
		return Stage{}, err
	}
	ev, evCmd, err := st.evalFilter([]string{fexp}, "filter-eval-exported", filtertrain.WindowsRequest{})
	if err != nil {
		return Stage{}, err
	}
	m := map[string]float64{"shipped_step": float64(step), "shipped_accuracy": ev.Report.Accuracy}
	if a := ev.Report.ROCAUC; a != nil {
		m["shipped_ROC-AUC"] = *a
	}
	if len(st.filterMembers) == 1 {
		if err := sameFilterReport(st.metric["filter: eval"], m); err != nil {
			return Stage{}, fmt.Errorf("exported filter %s (from %s): %w", fexp, ship, err)
		}
	}
	pl, plCmd, runID, err := st.buildPipeline(ctx, fexp)
	if err != nil {
		return Stage{}, err
	}
	st.dirs["pipeline-run"] = runID
	return Stage{Command: st.command(args...) + "\n  " + evCmd + "\n  " + plCmd, RunID: runID,
		Metrics: m, Artifacts: []string{fmt.Sprintf("%s (filter from %s, step %d)", fexp, ckpt, step), pl}}, nil
}

// buildPipeline builds the pipeline served by serveOnce with the exported
// filter fexp: the retrieval is the one evaluated last (the tuned hybrid),
// whose mode, weights, depth, BM25 and chunking come from that run. It
// returns the pipeline directory, the equivalent command and the run id.
func (st *state) buildPipeline(ctx context.Context, fexp string) (string, string, string, error) {
	pl := st.fresh("export", "pipeline")
	cfg := pipeline.DefaultBuildConfig(pl, "lab="+st.corpus)
	cfg.FromRun, cfg.Filter, cfg.Generator, cfg.K = st.dirs["retrieval-tuned-run"], fexp, st.dirs["t5-tiny"], 4
	given := []string{"corpus", "from-run", "filter", "generator", "k", "out"}
	cfg.Given = func(flag string) bool { return slices.Contains(given, flag) }
	cfg.FilterWindows, cfg.Backend, cfg.Log = filtertrain.CheckpointWindows, st.o.Backend, st.log
	res, err := pipeline.BuildRun(ctx, st.store, cfg)
	if err != nil {
		return "", "", "", err
	}
	cmd := st.command("pipeline", "build", "--corpus", cfg.Corpora[0], "--from-run", cfg.FromRun, "--filter", fexp, "--generator", cfg.Generator, "--k", "4", "--out", pl)
	return pl, cmd, res.RunID, nil
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
