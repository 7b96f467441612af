package main

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
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/trainer"
)

// demoOptions are the demo's flags; every stage reads what it needs.
type demoOptions struct {
	Corpus, QA string // default: the sample embedded in the binary
	Work       string // working directory for models, indexes, runs
	ChunkSize  int
	Overlap    int
	Seed       int64
	Samples    int // chunks sampled for the self-learning round
	Epochs     int // filter training epochs (0: the recipe's)
	// ICTPerChunk and ICTMaxChunks are label ict's --per-chunk and
	// --max-chunks for the filter's examples (8 and 150: the sample's
	// sweep; a large corpus trades pseudo-questions per chunk for chunks).
	ICTPerChunk, ICTMaxChunks int
	// FilterEnsembleSeeds are the seeds of extra filters trained beside the
	// first and evaluated with it as an ensemble (none: one filter).
	FilterEnsembleSeeds []int64
	// FilterFinetuneEpochs fine-tunes the ICT-trained filter on the
	// training questions' evidence labels for this many epochs at
	// demoFinetuneLR (0: no fine-tuning; docs/recipes.md, "AP filter,
	// fourth sweep").
	FilterFinetuneEpochs int
	// FilterMatchMarks trains every filter with train filter --match-marks
	// (exact-match marks in the evidence; docs/recipes.md, "Filter:
	// exact-match marks").
	FilterMatchMarks bool
	// FilterMatchMarksRare is train filter's --match-marks-rare (needs
	// FilterMatchMarks).
	FilterMatchMarksRare []float64
	// FilterCalibrate fits train calibration on the training questions'
	// evidence labels and evaluates, exports and serves the calibrated
	// filter (docs/recipes.md, "Filter: calibration with word-overlap
	// features").
	FilterCalibrate bool
	// QueriesPerChunk is selflearn's --queries-per-chunk (0: the recipe's).
	QueriesPerChunk int
	// Negatives, Candidates and TrainFuse are selflearn's --negatives (-1:
	// its default, 7; 0 is a setting, in-batch negatives only),
	// --candidates (0: its default, 4) and --train-fuse (-1: its default,
	// SL-HyDE's fused query).
	Negatives, Candidates, TrainFuse int
	// BM25 is passed on to every stage that builds BM25 (the BM25 and
	// hybrid evaluations, the evidence labels' candidates, selflearn's
	// BM25 and fusion choice, the exported pipeline) when set.
	BM25   bm25Flags
	Quick  bool   // fewer steps (tests)
	Recipe string // training recipe for the filter and the retriever (auto: scratch, models init marks them random)
}

// demoStage is one line of the summary.
type demoStage struct {
	Name      string             `json:"name"`
	Command   string             `json:"command"` // the equivalent stand-alone command
	RunID     string             `json:"run_id,omitempty"`
	Metrics   map[string]float64 `json:"metrics,omitempty"`
	Versus    []versusRow        `json:"versus,omitempty"` // learned model next to its baseline
	Artifacts []string           `json:"artifacts,omitempty"`
	Seconds   float64            `json:"seconds"`
}

// demoState carries what earlier stages produced to later ones.
type demoState struct {
	g       *globals
	o       demoOptions
	db      string
	corpus  string
	qa      string
	dirs    map[string]string             // named artifacts: "t5-tokenizer", "bert", "filter", ...
	metrics map[string]map[string]float64 // stage name → its metrics, for later stages' baselines
	summary []demoStage
	// filterMembers are the last checkpoints of the filter and of its
	// ensemble members (--filter-ensemble-seeds), evaluated together.
	filterMembers []string
	wall          float64 // seconds the whole demo took (lanes overlap, so not the stages' sum)
}

func newDemoCmd(g *globals) *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole workbench end to end on a small embedded corpus (or --corpus/--qa) and print a summary",
		Long: `Runs every stage of ragforge on a small laboratory-protocol corpus and QA set
embedded in the binary (no ../shared, no network), or on a real corpus given
by --corpus and --qa. Each stage is also its own subcommand; the summary lists
the equivalent commands so a stage can be rerun with other settings.`,
		Example: `  ragforge demo
  ragforge demo --corpus ../shared/data/ap_protocols --qa ../shared/data/ap_protocols_qa/dev.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			st, err := runDemo(ctx, g, o)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.Out, st.summary)
			}
			st.printSummary()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Corpus, "corpus", "", "corpus (default: the embedded sample)")
	f.StringVar(&o.QA, "qa", "", "QA CSV with Question,Ground_Truth,Context (default: the embedded sample)")
	f.StringVar(&o.Work, "work", "ragforge-demo", "working directory (models, indexes, run database)")
	f.IntVar(&o.ChunkSize, "chunk-size", 512, "chunk size in characters")
	f.IntVar(&o.Overlap, "chunk-overlap", 128, "chunk overlap in characters")
	minInt(f, 0, "chunk-size", "chunk-overlap")
	f.Int64Var(&o.Seed, "seed", 42, "seed for initialization, sampling and data order")
	f.IntVar(&o.Samples, "samples", 64, "chunks sampled for the self-learning round (the paper samples up to 10,000)")
	f.IntVar(&o.Epochs, "filter-epochs", 0, "filter training epochs (0: the training recipe's, see docs/recipes.md)")
	f.IntVar(&o.QueriesPerChunk, "queries-per-chunk", 0, "ICT pseudo-queries per sampled chunk in the self-learning round (0: the training recipe's, see docs/recipes.md)")
	f.IntVar(&o.Negatives, "negatives", -1, "hard negatives per pseudo-query in the self-learning round (-1: selflearn's, 7 as SL-HyDE; 0: in-batch negatives only)")
	f.IntVar(&o.Candidates, "candidates", 0, "hypothetical-document candidates per pseudo-query in the self-learning round (0: selflearn's, 4)")
	f.IntVar(&o.TrainFuse, "train-fuse", -1, "hypothetical documents fused with the query in retriever training (-1: selflearn's, SL-HyDE's; 0: the plain query)")
	f.IntVar(&o.ICTPerChunk, "ict-per-chunk", 8, "pseudo-questions per chunk in the filter's ICT examples (label ict --per-chunk)")
	f.IntVar(&o.ICTMaxChunks, "ict-max-chunks", 150, "chunks the filter's ICT examples are drawn from (label ict --max-chunks; 0: all)")
	f.Int64SliceVar(&o.FilterEnsembleSeeds, "filter-ensemble-seeds", nil, "train one more filter per seed (models init and train filter from it) and evaluate all as an ensemble, P([HELPFUL]) averaged; each costs another filter training (docs/recipes.md, \"Filter, fourth sweep\")")
	f.IntVar(&o.FilterFinetuneEpochs, "filter-finetune-epochs", 0, "after the ICT training, fine-tune the filter on the training questions' evidence labels for N epochs at lr 2e-4 (0: off; the held-out questions stay out; see docs/recipes.md)")
	f.BoolVar(&o.FilterMatchMarks, "filter-match-marks", false, "train the filters with train filter --match-marks (the question's words marked in the evidence; docs/recipes.md)")
	f.Float64SliceVar(&o.FilterMatchMarksRare, "filter-match-marks-rare", nil, "with --filter-match-marks: train filter --match-marks-rare, one more mark on rare shared words (e.g. 0.05,0.005; docs/recipes.md)")
	f.BoolVar(&o.FilterCalibrate, "filter-calibrate", false, "calibrate the filter on the training questions' evidence labels (train calibration: its log-odds with two word-overlap scores) and evaluate, export and serve the calibrated one; the summary also shows the T5 alone and the word scores alone (docs/recipes.md)")
	minInt(f, 0, "filter-epochs", "filter-finetune-epochs", "queries-per-chunk", "candidates", "ict-max-chunks")
	minInt(f, -1, "train-fuse", "negatives")
	minInt(f, 1, "ict-per-chunk")
	o.BM25.add(cmd)
	f.BoolVar(&o.Quick, "quick", false, "fewer training steps (for tests)")
	f.StringVar(&o.Recipe, "recipe", "auto", "training recipe of the filter and the retriever: pretrained | scratch | auto (scratch, since models init marks its models random); see docs/recipes.md")
	return cmd
}

func runDemo(ctx context.Context, g *globals, o demoOptions) (*demoState, error) {
	if (o.Corpus == "") != (o.QA == "") {
		return nil, fmt.Errorf("--corpus and --qa go together")
	}
	switch o.Recipe {
	case "", "auto", trainer.RecipePretrained, trainer.RecipeScratch:
	default:
		return nil, fmt.Errorf("--recipe %q: want %s, %s or auto", o.Recipe, trainer.RecipePretrained, trainer.RecipeScratch)
	}
	if len(o.FilterMatchMarksRare) > 0 && !o.FilterMatchMarks {
		return nil, fmt.Errorf("--filter-match-marks-rare needs --filter-match-marks")
	}
	if err := filter.CheckRareDocFractions(o.FilterMatchMarksRare); err != nil {
		return nil, fmt.Errorf("--filter-match-marks-rare: %w", err)
	}
	if o.FilterCalibrate && len(o.FilterEnsembleSeeds) > 0 {
		return nil, fmt.Errorf("--filter-calibrate with --filter-ensemble-seeds: a calibration fits one filter, not an ensemble")
	}
	if o.FilterCalibrate && o.FilterFinetuneEpochs > 0 {
		return nil, fmt.Errorf("--filter-calibrate with --filter-finetune-epochs: the fine-tuning trains on the training questions' labels, which the calibration must not have seen")
	}
	seen := map[int64]bool{o.Seed: true}
	for _, seed := range o.FilterEnsembleSeeds {
		if seen[seed] {
			return nil, fmt.Errorf("--filter-ensemble-seeds: seed %d twice (--seed %d is the first filter's): a member must differ from the others", seed, o.Seed)
		}
		seen[seed] = true
	}
	if _, err := o.BM25.config(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Work, 0o755); err != nil {
		return nil, err
	}
	st := &demoState{g: g, o: o, dirs: map[string]string{}, metrics: map[string]map[string]float64{}}
	st.db = g.DB
	if !flagChanged(g) {
		st.db = filepath.Join(o.Work, "ragforge.db")
	}
	st.corpus, st.qa = o.Corpus, o.QA
	if st.corpus == "" {
		var err error
		if st.corpus, st.qa, err = sample.WriteTo(filepath.Join(o.Work, "sample")); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	for _, step := range demoSteps(o) {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if err := st.runStep(ctx, step); err != nil {
			return st, err
		}
	}
	st.wall = time.Since(start).Seconds()
	return st, nil
}

// runStep runs one step's lanes: a single lane in order, as a user would;
// two lanes side by side, the first printing as it goes and the second's
// output held back and printed after both end. The lanes' stages read what
// earlier steps produced and write only their own artifacts, so they run
// exactly as they would one after the other (the same commands, seeds and
// results); on two cores the second lane uses what the first's mostly
// single-threaded small ops leave idle.
func (st *demoState) runStep(ctx context.Context, step demoStep) error {
	if len(step) == 1 {
		return st.runLane(ctx, step[0])
	}
	lanes := make([]*demoState, len(step))
	var held []*bytes.Buffer
	for i := range step {
		lanes[i] = st
		if i > 0 {
			buf := &bytes.Buffer{}
			held = append(held, buf)
			lanes[i] = st.lane(buf)
		}
	}
	errs := make([]error, len(step))
	var wg sync.WaitGroup
	for i := 1; i < len(step); i++ {
		fmt.Fprintf(st.g.Err, "== [%s] runs beside [%s]; its output follows that lane's\n", stageNames(step[i]), stageNames(step[0]))
		wg.Go(func() { errs[i] = lanes[i].runLane(ctx, step[i]) })
	}
	errs[0] = st.runLane(ctx, step[0])
	wg.Wait()
	for i, buf := range held {
		fmt.Fprintf(st.g.Err, "== output of [%s], which ran beside [%s]:\n", stageNames(step[i+1]), stageNames(step[0]))
		st.g.Err.Write(buf.Bytes())
		maps.Copy(st.dirs, lanes[i+1].dirs)
		maps.Copy(st.metrics, lanes[i+1].metrics)
		st.summary = append(st.summary, lanes[i+1].summary...)
	}
	return errors.Join(errs...)
}

// lane is a copy of st for a lane that runs beside others: its own maps
// (seeded with what earlier steps made) and its output to errOut.
func (st *demoState) lane(errOut io.Writer) *demoState {
	g := *st.g
	g.Err = errOut
	l := *st
	l.g, l.dirs, l.metrics, l.summary = &g, maps.Clone(st.dirs), maps.Clone(st.metrics), nil
	return &l
}

// runLane runs stages in order, adding each one's summary line.
func (st *demoState) runLane(ctx context.Context, stages []stageFunc) error {
	for _, s := range stages {
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintf(st.g.Err, "== %s\n", s.name)
		start := time.Now()
		line, err := s.run(ctx, st)
		if err != nil {
			return fmt.Errorf("demo stage %q: %w", s.name, err)
		}
		if line.Name == "" { // a stage may name what it turned out to be
			line.Name = s.name
		}
		line.Seconds = time.Since(start).Seconds()
		st.metrics[s.name] = line.Metrics
		st.summary = append(st.summary, line)
	}
	return nil
}

func stageNames(stages []stageFunc) string {
	names := make([]string, len(stages))
	for i, s := range stages {
		names[i] = s.name
	}
	return strings.Join(names, " → ")
}

// flagChanged reports whether --db was given explicitly (else the demo keeps
// its database inside --work).
func flagChanged(g *globals) bool { return g.DB != defaultDB() }

// sub runs a ragforge subcommand in-process against the demo's database, as a
// user would from the shell, and returns its stdout.
func (st *demoState) sub(args ...string) (string, error) {
	var out strings.Builder
	full := append([]string{"--db", st.db}, args...)
	if st.g.Backend != "" {
		full = append([]string{"--backend", st.g.Backend}, full...)
	}
	code := execute(full, &out, st.g.Err)
	if code != 0 {
		return out.String(), fmt.Errorf("ragforge %s failed (exit %d)", strings.Join(args, " "), code)
	}
	return out.String(), nil
}

// command renders the equivalent shell command for the summary.
func (st *demoState) command(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t\"'") || a == "" {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return "ragforge --db " + st.db + " " + strings.Join(q, " ")
}

type stageFunc struct {
	name string
	run  func(ctx context.Context, st *demoState) (demoStage, error)
}

// demoStep is one or more lanes of stages: each lane runs its stages in
// order, and the lanes of a step run side by side (runStep).
type demoStep [][]stageFunc

func (st *demoState) printSummary() {
	w := st.g.Out
	fmt.Fprintln(w, "\nragforge demo summary")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tSECONDS\tRUN\tMETRICS")
	for _, s := range st.summary {
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\n", s.Name, s.Seconds, orDash(s.RunID), fmtMetrics(s.Metrics))
	}
	fmt.Fprintf(tw, "total (wall)\t%.1f\t\t%s\n", st.wall, "filter and self-learning stages ran side by side")
	tw.Flush()
	var vs []versusRow
	for _, s := range st.summary {
		vs = append(vs, s.Versus...)
	}
	printVersus(w, vs)
	fmt.Fprintln(w, "\nartifacts:")
	for _, s := range st.summary {
		for _, a := range s.Artifacts {
			fmt.Fprintf(w, "  %-22s %s\n", s.Name, a)
		}
	}
	fmt.Fprintln(w, "\nrerun any stage on its own:")
	for _, s := range st.summary {
		if s.Command != "" {
			fmt.Fprintf(w, "  %s\n", s.Command)
		}
	}
	fmt.Fprintf(w, "\nrun database: %s (ragforge --db %s runs list)\n", st.db, st.db)
}

func fmtMetrics(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+" "+fmtNum(m[k], 3, false))
	}
	return strings.Join(parts, "  ")
}
