// Package demo runs ragforge's end-to-end demo as library calls: BM25 and
// hybrid retrieval evaluations, tokenizers and random models trained from
// the corpus, evidence and ICT labels, the RAG² filter (trained, optionally
// calibrated, evaluated), an SL-HyDE self-learning round, the export of a
// pipeline and one /v1/pipeline request to a served copy of it. Each stage
// calls the library function its stand-alone command calls and records its
// run in the same run store; the summary names those commands, so a stage
// can be rerun on its own with other settings.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/models/backend"
)

// Stage is one line of the summary.
type Stage struct {
	Name      string             `json:"name"`
	Command   string             `json:"command"` // the equivalent stand-alone command
	RunID     string             `json:"run_id,omitempty"`
	Metrics   map[string]float64 `json:"metrics,omitempty"`
	Versus    []tracker.Versus   `json:"versus,omitempty"` // learned model next to its baseline
	Artifacts []string           `json:"artifacts,omitempty"`
	Seconds   float64            `json:"seconds"`
}

// Result is what a demo made: its summary lines in stage order, the wall
// time (lanes overlap, so not the stages' sum) and the run store.
type Result struct {
	Stages []Stage
	Wall   float64
	DB     string
}

// state carries what earlier stages produced to later ones.
type state struct {
	o      Options
	log    io.Writer // progress and stage headers (a CLI's stderr)
	db     string
	store  *tracker.Store
	corpus string
	qa     string
	dirs   map[string]string             // named artifacts and runs: "spm", "bert-tiny", "filter-run", ...
	metric map[string]map[string]float64 // stage name → its metrics, for later stages' baselines
	lines  []Stage
	// filterMembers are the last checkpoints of the filter and of its
	// ensemble members (Options.FilterEnsembleSeeds), evaluated together.
	filterMembers []string
}

// Run checks o, writes the embedded sample into o.Work when no corpus is
// given, and runs the demo's steps in order, logging to log. On an error
// the Result holds the stages that finished.
func Run(ctx context.Context, o Options, log io.Writer) (*Result, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Work, 0o755); err != nil {
		return nil, fmt.Errorf("demo: work directory: %w", err)
	}
	st := &state{o: o, log: log, db: o.DB, corpus: o.Corpus, qa: o.QA,
		dirs: map[string]string{}, metric: map[string]map[string]float64{}}
	if st.db == "" {
		st.db = filepath.Join(o.Work, "ragforge.db")
	}
	if st.corpus == "" {
		var err error
		if st.corpus, st.qa, err = sample.WriteTo(filepath.Join(o.Work, "sample")); err != nil {
			return nil, err
		}
	}
	store, err := tracker.Open(st.db)
	if err != nil {
		return nil, fmt.Errorf("demo: run store: %w", err)
	}
	defer store.Close()
	st.store = store
	res := &Result{DB: st.db}
	start := time.Now()
	for _, step := range steps(o) {
		if err := ctx.Err(); err != nil {
			res.Stages = st.lines
			return res, err
		}
		if err := st.runStep(ctx, step); err != nil {
			res.Stages = st.lines
			return res, err
		}
	}
	res.Stages, res.Wall = st.lines, time.Since(start).Seconds()
	return res, nil
}

// stage is one named stage of a lane.
type stage struct {
	name string
	run  func(ctx context.Context, st *state) (Stage, error)
}

// step is one or more lanes of stages: each lane runs its stages in order,
// and the lanes of a step run side by side (runStep).
type step [][]stage

// runStep runs one step's lanes: a single lane in order, as a user would;
// two lanes side by side, the first logging as it goes and the second's
// log held back and written after both end. The lanes' stages read what
// earlier steps produced and write only their own artifacts, so they run
// exactly as they would one after the other (the same calls, seeds and
// results); on two cores the second lane uses what the first's mostly
// single-threaded small ops leave idle.
func (st *state) runStep(ctx context.Context, s step) error {
	if len(s) == 1 {
		return st.runLane(ctx, s[0])
	}
	lanes := make([]*state, len(s))
	held := make([]*bytes.Buffer, len(s))
	lanes[0] = st
	for i := 1; i < len(s); i++ {
		held[i] = &bytes.Buffer{}
		lanes[i] = st.lane(held[i])
	}
	errs := make([]error, len(s))
	var wg sync.WaitGroup
	for i := 1; i < len(s); i++ {
		fmt.Fprintf(st.log, "== [%s] runs beside [%s]; its output follows that lane's\n", stageNames(s[i]), stageNames(s[0]))
		wg.Go(func() { errs[i] = lanes[i].runLane(ctx, s[i]) })
	}
	errs[0] = st.runLane(ctx, s[0])
	wg.Wait()
	for i := 1; i < len(s); i++ {
		fmt.Fprintf(st.log, "== output of [%s], which ran beside [%s]:\n", stageNames(s[i]), stageNames(s[0]))
		st.log.Write(held[i].Bytes())
		maps.Copy(st.dirs, lanes[i].dirs)
		maps.Copy(st.metric, lanes[i].metric)
		st.lines = append(st.lines, lanes[i].lines...)
	}
	return errors.Join(errs...)
}

// lane is a copy of st for a lane that runs beside others: its own maps
// (seeded with what earlier steps made) and its log to w.
func (st *state) lane(w io.Writer) *state {
	l := *st
	l.log, l.dirs, l.metric, l.lines = w, maps.Clone(st.dirs), maps.Clone(st.metric), nil
	return &l
}

// runLane runs stages in order, adding each one's summary line.
func (st *state) runLane(ctx context.Context, stages []stage) error {
	for _, s := range stages {
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintf(st.log, "== %s\n", s.name)
		start := time.Now()
		line, err := s.run(ctx, st)
		if err != nil {
			return fmt.Errorf("demo stage %q: %w", s.name, err)
		}
		if line.Name == "" { // a stage may name what it turned out to be
			line.Name = s.name
		}
		line.Seconds = time.Since(start).Seconds()
		st.metric[s.name] = line.Metrics
		st.lines = append(st.lines, line)
	}
	return nil
}

func stageNames(stages []stage) string {
	names := make([]string, len(stages))
	for i, s := range stages {
		names[i] = s.name
	}
	return strings.Join(names, " → ")
}

// record runs fn with a tracker.Starter on the demo's run store; every run
// fn starts is finished with fn's error.
func (st *state) record(fn func(start tracker.Starter) error) error {
	return st.store.Record(version.Version, backend.Name(st.o.Backend), fn)
}

// path is a file or directory inside the work directory.
func (st *state) path(parts ...string) string {
	return filepath.Join(append([]string{st.o.Work}, parts...)...)
}

// fresh removes a stage's output directory so a rerun of the demo starts clean.
func (st *state) fresh(parts ...string) string {
	p := st.path(parts...)
	os.RemoveAll(p)
	return p
}
