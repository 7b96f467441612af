package filtertrain

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/trainer"
)

// RAG2Files are the result files an evaluation writes (EvalReport.WriteRAG2Files).
var RAG2Files = []string{"dict_id_pred_results.json", "final_eval_results.json", "final_eval_results_perClass.json"}

// EvalJob is one `ragforge eval filter`: the filter (one checkpoint, or an
// ensemble's members), the examples and where the result files go.
type EvalJob struct {
	Models []string // checkpoint directories; several: soft-voting ensemble
	Data   string   // examples, RAG² filter schema (.json or .jsonl)
	// Out is the directory for the RAG² result files; "" is
	// RunsBase/runs/<run id> (a run must then be recorded).
	Out, RunsBase string
	Windows       WindowsRequest
	// Eval is the batch size, threshold, backend and progress; its windows
	// are set from Windows.
	Eval EvalOptions
	Note io.Writer // where window overrides are reported (nil: discarded)
}

// EvalRun is what RunEval did; `eval filter --json` prints it (Report
// without its predictions).
type EvalRun struct {
	Dir     string      `json:"dir"`
	Notes   []string    `json:"notes"` // EarlierBetterNotes of the models
	Report  *EvalReport `json:"report"`
	RunID   string      `json:"run_id"`
	Windows ReadWindows `json:"windows"`
}

// RunEval resolves the windows, reads the examples, starts a run of kind
// "eval-filter", scores them with the filter(s) (EvaluateEnsemble), writes
// RAG²'s result files into the output directory and records them and the
// metrics (EvalReport.Metrics) in the run.
func RunEval(j EvalJob, start tracker.Starter) (*EvalRun, error) {
	note := j.Note
	if note == nil {
		note = io.Discard
	}
	w, err := ResolveWindows(j.Models, j.Windows, note)
	if err != nil {
		return nil, err
	}
	opt := j.Eval
	opt.MaxSeqLength, opt.DocStride = w.MaxSeqLength, w.DocStride
	examples, err := filter.ReadExamples(j.Data)
	if err != nil {
		return nil, err
	}
	run, err := start.Start("eval-filter", map[string]any{"model": strings.Join(j.Models, ","), "data": j.Data,
		"max_seq_length": opt.MaxSeqLength, "doc_stride": opt.DocStride, "windows_sources": w.Sources,
		"batch_size": opt.BatchSize, "threshold": opt.Threshold})
	if err != nil {
		return nil, err
	}
	rep, err := EvaluateEnsemble(j.Models, examples, opt)
	if err != nil {
		return nil, err
	}
	res := &EvalRun{Report: rep, Windows: w, Notes: EarlierBetterNotes(j.Models)}
	if run != nil {
		res.RunID = run.ID
	}
	if res.Dir, err = outputDir(j.Out, j.RunsBase, res.RunID); err != nil {
		return nil, err
	}
	if err := rep.WriteRAG2Files(res.Dir); err != nil {
		return nil, err
	}
	if run == nil {
		return res, nil
	}
	for _, f := range RAG2Files {
		if err := run.Artifact(f, filepath.Join(res.Dir, f)); err != nil {
			return nil, err
		}
	}
	return res, run.LogMetrics(rep.Metrics(""), 0)
}

// outputDir is out, or base/runs/<runID>, created.
func outputDir(out, base, runID string) (string, error) {
	dir := out
	if dir == "" {
		if runID == "" {
			return "", fmt.Errorf("eval filter: no output directory and no run to name one")
		}
		dir = filepath.Join(base, "runs", runID)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// EarlierBetterNotes says, for each training checkpoint among models (its
// trainer_state.json), when an earlier checkpoint of its run scored higher
// on validation: an evaluation's figures are this checkpoint's.
func EarlierBetterNotes(models []string) []string {
	var notes []string
	for _, m := range models {
		s, err := trainer.ReadState(m)
		if err != nil {
			continue // an export or a base model: no training history
		}
		if best, bestAcc, own, ok := s.EarlierBest(); ok {
			notes = append(notes, fmt.Sprintf("note: %s (step %d) scored validation accuracy %.4f; an earlier checkpoint of its run, %s, scored %.4f (evaluate %s to see it)",
				m, s.GlobalStep, own, best, bestAcc, filepath.Join(filepath.Dir(m), best)))
		}
	}
	return notes
}
