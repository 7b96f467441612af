package main

import (
	"fmt"
	"path/filepath"

	"github.com/ragforge/ragforge/models/filter"
)

// exportResult is what an export wrote; --json prints it with the run id.
type exportResult struct {
	RunID   string            `json:"run_id"`
	Kind    string            `json:"kind"` // filter | retriever
	Source  string            `json:"source"`
	Dir     string            `json:"dir"`
	Windows *filter.Windowing `json:"windows,omitempty"` // a filter's, as recorded in its config.json
	Line    string            `json:"-"`                 // the human summary
}

// exportRunConfig is the run store's record of an export's flags.
type exportRunConfig struct {
	Run       string `json:"run,omitempty"`
	From      string `json:"from,omitempty"`
	Retriever string `json:"retriever,omitempty"`
	Out       string `json:"out"`
}

// runExportRecorded runs an export as a run of kind "export" (the
// exported config.json is its artifact) and prints the result, as JSON with
// --json.
func runExportRecorded(g *globals, o exportOptions) (err error) {
	st, run, err := startRun(g, "export", exportRunConfig{Run: o.Run, From: o.From, Retriever: o.Retriever.Dir, Out: o.Out})
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	res, err := runExport(g, o)
	if err != nil {
		return err
	}
	res.RunID = run.ID
	if err := run.Artifact(res.Kind, filepath.Join(res.Dir, "config.json")); err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, res)
	}
	fmt.Fprintf(g.Out, "run %s: %s\n", run.ID, res.Line)
	return nil
}
