package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/demo"
)

func newDemoCmd(g *globals) *cobra.Command {
	o := demo.DefaultOptions()
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
			return runDemo(cmdContext(cmd), g, o)
		},
	}
	addDemoFlags(cmd, &o)
	return cmd
}

// addDemoFlags binds the demo's flags to o, whose values are the defaults.
func addDemoFlags(cmd *cobra.Command, o *demo.Options) {
	f := cmd.Flags()
	f.StringVar(&o.Corpus, "corpus", "", "corpus (default: the embedded sample)")
	f.StringVar(&o.QA, "qa", "", "QA CSV with Question,Ground_Truth,Context (default: the embedded sample)")
	f.StringVar(&o.Work, "work", o.Work, "working directory (models, indexes, run database)")
	f.IntVar(&o.ChunkSize, "chunk-size", o.ChunkSize, "chunk size in characters")
	f.IntVar(&o.Overlap, "chunk-overlap", o.Overlap, "chunk overlap in characters")
	minInt(f, 0, "chunk-size", "chunk-overlap")
	f.Int64Var(&o.Seed, "seed", o.Seed, "seed for initialization, sampling and data order")
	f.IntVar(&o.Samples, "samples", o.Samples, "chunks sampled for the self-learning round (the paper samples up to 10,000)")
	f.IntVar(&o.Epochs, "filter-epochs", 0, "filter training epochs (0: the training recipe's, see docs/recipes.md)")
	f.IntVar(&o.QueriesPerChunk, "queries-per-chunk", 0, "ICT pseudo-queries per sampled chunk in the self-learning round (0: the training recipe's, see docs/recipes.md)")
	f.IntVar(&o.Negatives, "negatives", o.Negatives, "hard negatives per pseudo-query in the self-learning round (-1: selflearn's, 7 as SL-HyDE; 0: in-batch negatives only)")
	f.IntVar(&o.Candidates, "candidates", 0, "hypothetical-document candidates per pseudo-query in the self-learning round (0: selflearn's, 4)")
	f.IntVar(&o.TrainFuse, "train-fuse", o.TrainFuse, "hypothetical documents fused with the query in retriever training (-1: selflearn's, SL-HyDE's; 0: the plain query)")
	f.IntVar(&o.ICTPerChunk, "ict-per-chunk", o.ICTPerChunk, "pseudo-questions per chunk in the filter's ICT examples (label ict --per-chunk)")
	f.IntVar(&o.ICTMaxChunks, "ict-max-chunks", o.ICTMaxChunks, "chunks the filter's ICT examples are drawn from (label ict --max-chunks; 0: all)")
	f.Int64SliceVar(&o.FilterEnsembleSeeds, "filter-ensemble-seeds", nil, "train one more filter per seed (models init and train filter from it) and evaluate all as an ensemble, P([HELPFUL]) averaged; each costs another filter training (docs/recipes.md, \"Filter, fourth sweep\")")
	f.IntVar(&o.FilterFinetuneEpochs, "filter-finetune-epochs", 0, "after the ICT training, fine-tune the filter on the training questions' evidence labels for N epochs at lr 2e-4 (0: off; the held-out questions stay out; see docs/recipes.md)")
	f.BoolVar(&o.FilterMatchMarks, "filter-match-marks", false, "train the filters with train filter --match-marks (the question's words marked in the evidence; docs/recipes.md)")
	f.Float64SliceVar(&o.FilterMatchMarksRare, "filter-match-marks-rare", nil, "with --filter-match-marks: train filter --match-marks-rare, one more mark on rare shared words (e.g. 0.05,0.005; docs/recipes.md)")
	f.BoolVar(&o.FilterCalibrate, "filter-calibrate", false, "calibrate the filter on the training questions' evidence labels (train calibration: its log-odds with two word-overlap scores) and evaluate, export and serve the calibrated one; the summary also shows the T5 alone and the word scores alone (docs/recipes.md)")
	minInt(f, 0, "filter-epochs", "filter-finetune-epochs", "queries-per-chunk", "candidates", "ict-max-chunks")
	minInt(f, -1, "train-fuse", "negatives")
	minInt(f, 1, "ict-per-chunk")
	addBM25Flags(cmd, &o.BM25)
	f.BoolVar(&o.Quick, "quick", false, "fewer training steps (for tests)")
	f.StringVar(&o.Recipe, "recipe", o.Recipe, "training recipe of the filter and the retriever: pretrained | scratch | auto (scratch, since models init marks its models random); see docs/recipes.md")
}

// runDemo runs the demo with the global flags (--db when given, --backend)
// and prints its summary, as JSON with --json.
func runDemo(ctx context.Context, g *globals, o demo.Options) error {
	if g.DB != defaultDB() {
		o.DB = g.DB // else the demo keeps its database inside --work
	}
	o.Backend = g.Backend
	res, err := demo.Run(ctx, o, g.Err)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, res.Stages)
	}
	printDemoSummary(g.Out, res)
	return nil
}

// printDemoSummary prints the stages' table, the learned-versus-baseline
// rows, the artifacts, the commands that rerun each stage and the run store.
func printDemoSummary(w io.Writer, res *demo.Result) {
	fmt.Fprintln(w, "\nragforge demo summary")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tSECONDS\tRUN\tMETRICS")
	for _, s := range res.Stages {
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\n", s.Name, s.Seconds, orDash(s.RunID), fmtMetrics(s.Metrics))
	}
	fmt.Fprintf(tw, "total (wall)\t%.1f\t\t%s\n", res.Wall, "filter and self-learning stages ran side by side")
	tw.Flush()
	var vs []versusRow
	for _, s := range res.Stages {
		for _, v := range s.Versus {
			vs = append(vs, versusRow(v))
		}
	}
	printVersus(w, vs)
	fmt.Fprintln(w, "\nartifacts:")
	for _, s := range res.Stages {
		for _, a := range s.Artifacts {
			fmt.Fprintf(w, "  %-22s %s\n", s.Name, a)
		}
	}
	fmt.Fprintln(w, "\nrerun any stage on its own:")
	for _, s := range res.Stages {
		if s.Command != "" {
			fmt.Fprintf(w, "  %s\n", s.Command)
		}
	}
	fmt.Fprintf(w, "\nrun database: %s (ragforge --db %s runs list)\n", res.DB, res.DB)
}

func fmtMetrics(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+" "+fmtNum(m[k], 3, false))
	}
	return strings.Join(parts, "  ")
}
