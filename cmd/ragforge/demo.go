package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/sample"
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
	// QueriesPerChunk is selflearn's --queries-per-chunk (0: the recipe's).
	QueriesPerChunk int
	Quick           bool   // fewer steps (tests)
	Recipe          string // training recipe for the filter and the retriever (auto: scratch, models init marks them random)
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
	f.IntVar(&o.ICTPerChunk, "ict-per-chunk", 8, "pseudo-questions per chunk in the filter's ICT examples (label ict --per-chunk)")
	f.IntVar(&o.ICTMaxChunks, "ict-max-chunks", 150, "chunks the filter's ICT examples are drawn from (label ict --max-chunks; 0: all)")
	minInt(f, 0, "filter-epochs", "queries-per-chunk", "ict-max-chunks")
	minInt(f, 1, "ict-per-chunk")
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
	for _, s := range demoStages() {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		fmt.Fprintf(g.Err, "== %s\n", s.name)
		start := time.Now()
		line, err := s.run(ctx, st)
		if err != nil {
			return st, fmt.Errorf("demo stage %q: %w", s.name, err)
		}
		line.Name = s.name
		line.Seconds = time.Since(start).Seconds()
		st.metrics[s.name] = line.Metrics
		st.summary = append(st.summary, line)
	}
	return st, nil
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

func (st *demoState) printSummary() {
	w := st.g.Out
	var total float64
	fmt.Fprintln(w, "\nragforge demo summary")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tSECONDS\tRUN\tMETRICS")
	for _, s := range st.summary {
		total += s.Seconds
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\n", s.Name, s.Seconds, orDash(s.RunID), fmtMetrics(s.Metrics))
	}
	fmt.Fprintf(tw, "total\t%.1f\t\t\n", total)
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
