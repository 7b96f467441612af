package main

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/demo"
)

// The demo's flags fill demo.Options: none given are the library's
// defaults, and make demo / make demo-ap's flags land in their fields.
func TestDemoFlags(t *testing.T) {
	parse := func(args ...string) demo.Options {
		t.Helper()
		o := demo.DefaultOptions()
		cmd := &cobra.Command{Use: "demo"}
		addDemoFlags(cmd, &o)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return o
	}
	if got, want := parse(), demo.DefaultOptions(); !reflect.DeepEqual(got.BM25.MetaFields, want.BM25.MetaFields) || got.Work != want.Work ||
		got.Seed != want.Seed || got.Samples != want.Samples || got.Negatives != -1 || got.TrainFuse != -1 || got.ICTPerChunk != 8 || got.ICTMaxChunks != 150 || got.Recipe != "auto" {
		t.Errorf("no flags: %+v, want the defaults %+v", got, want)
	}
	o := parse("--corpus", "c", "--qa", "q", "--work", "w", "--filter-epochs", "2", "--filter-match-marks", "--filter-match-marks-rare", "0.05,0.005",
		"--filter-calibrate", "--ict-per-chunk", "2", "--ict-max-chunks", "0", "--samples", "0", "--queries-per-chunk", "4", "--negatives", "3",
		"--train-fuse", "0", "--candidates", "1", "--bm25-meta-fields", "title", "--filter-ensemble-seeds", "7,9", "--quick")
	want := demo.DefaultOptions()
	want.Corpus, want.QA, want.Work, want.Epochs, want.FilterMatchMarks, want.FilterMatchMarksRare = "c", "q", "w", 2, true, []float64{0.05, 0.005}
	want.FilterCalibrate, want.ICTPerChunk, want.ICTMaxChunks, want.Samples, want.QueriesPerChunk, want.Negatives = true, 2, 0, 0, 4, 3
	want.TrainFuse, want.Candidates, want.BM25.MetaFields, want.FilterEnsembleSeeds, want.Quick = 0, 1, []string{"title"}, []int64{7, 9}, true
	o.BM25.Given, want.BM25.Given = nil, nil
	if !reflect.DeepEqual(o, want) {
		t.Errorf("flags gave\n%+v\nwant\n%+v", o, want)
	}
}

// Every command the demo's summary offers to rerun a stage is one the CLI
// accepts: a quick demo runs as library calls, then each line is found in
// the command tree and its flags parsed.
func TestDemoRerunCommandsParse(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick demo (half a minute)")
	}
	o := demo.DefaultOptions()
	o.Work, o.Quick, o.Samples, o.QueriesPerChunk, o.ICTMaxChunks = t.TempDir(), true, 8, 2, 20
	o.FilterMatchMarks, o.BM25.MetaFields = true, []string{"title"}
	var log bytes.Buffer
	res, err := demo.Run(context.Background(), o, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	n := 0
	for _, s := range res.Stages {
		for _, line := range strings.Split(s.Command, "\n") {
			args := strings.Fields(strings.TrimSpace(line))
			if len(args) == 0 || args[0] != "ragforge" {
				continue // the curl of the serve stage
			}
			root := newRoot(&globals{Out: io.Discard, Err: io.Discard})
			cmd, rest, err := root.Find(args[1:])
			if err != nil || cmd == root {
				t.Errorf("stage %q: %s: no such command (%v)", s.Name, line, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("stage %q: %s: %v", s.Name, line, err)
			}
			n++
		}
	}
	if n < 15 {
		t.Errorf("parsed %d rerun commands, want every stage's (15 or more)", n)
	}
}
