package filtertrain

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/t5"
)

// ExportResult is what an export wrote (a filter here, or a retriever);
// `export --json` prints it.
type ExportResult struct {
	RunID   string            `json:"run_id"`
	Kind    string            `json:"kind"` // filter | retriever
	Source  string            `json:"source"`
	Dir     string            `json:"dir"`
	Windows *filter.Windowing `json:"windows,omitempty"` // a filter's, as recorded in its config.json
	Line    string            `json:"-"`                 // the human summary
}

// ExportRunConfig is the run store's record of an export.
type ExportRunConfig struct {
	Run       string `json:"run,omitempty"`
	From      string `json:"from,omitempty"`
	Retriever string `json:"retriever,omitempty"`
	Out       string `json:"out"`
}

// ExportJob exports the filter checkpoint Source to Out, read at Windows
// (the checkpoint's own unless set).
type ExportJob struct {
	Source, Out string
	Windows     WindowsRequest
	Note        io.Writer // window overrides and the match-marks note (nil: discarded)
}

// ExportFilter writes the filter export (ExportAt) and notes on Note when
// its inputs must be match-marked outside ragforge.
func ExportFilter(j ExportJob) (*ExportResult, error) {
	note := j.Note
	if note == nil {
		note = io.Discard
	}
	w, err := ResolveWindows([]string{j.Source}, j.Windows, note)
	if err != nil {
		return nil, err
	}
	fw := w.Windowing()
	if err := ExportAt(j.Source, j.Out, &fw); err != nil {
		return nil, err
	}
	res := &ExportResult{Kind: "filter", Source: j.Source, Dir: j.Out, Windows: &fw,
		Line: fmt.Sprintf("exported %s to %s (windows: %d tokens sharing %d, %s)", j.Source, j.Out, fw.MaxSeqLength, fw.DocStride, w.Sources.MaxSeqLength)}
	if c, err := t5.LoadConfig(j.Out); err == nil {
		if _, marked := c.Extra(filter.MatchMarksKey); marked {
			fmt.Fprintf(note, "note: %s reads match-marked evidence (%s in config.json); mark inputs before tokenizing them outside ragforge (docs/recipes.md)\n", j.Out, filter.MatchMarksKey)
		}
	}
	return res, nil
}

// RunExport is ExportFilter recorded as a run of kind "export" (started
// first, as the CLI records every export, refused ones too), the exported
// config.json its artifact.
func RunExport(j ExportJob, start tracker.Starter) (*ExportResult, error) {
	run, err := start.Start("export", ExportRunConfig{From: j.Source, Out: j.Out})
	if err != nil {
		return nil, err
	}
	res, err := ExportFilter(j)
	if err != nil || run == nil {
		return res, err
	}
	res.RunID = run.ID
	return res, RecordExport(run, res)
}

// RecordExport records the exported config.json as run's artifact.
func RecordExport(run *tracker.Run, res *ExportResult) error {
	return run.Artifact(res.Kind, filepath.Join(res.Dir, "config.json"))
}

// BestOfRun is the best checkpoint of the train-filter run id in st (its
// output directory's "best"). Errors: no such run, a run of another kind.
func BestOfRun(st *tracker.Store, id string) (string, error) {
	d, err := st.Get(id)
	if err != nil {
		return "", err
	}
	if d.Kind != "train-filter" {
		return "", fmt.Errorf("run %s is a %s run; export takes a train-filter run", d.ID, d.Kind)
	}
	var cfg struct {
		Config Config `json:"config"`
	}
	if err := json.Unmarshal(d.Config, &cfg); err != nil {
		return "", fmt.Errorf("run %s: config: %w", d.ID, err)
	}
	return filepath.Join(cfg.Config.OutputDir, "best"), nil
}
