// The label commands that work on stored labels: review, export, counts,
// diff and import.

package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
)

// labelReviewOptions are the flags of `label review`: a list filter, or
// one label to flip, confirm or undo.
type labelReviewOptions struct {
	Filter              labelstore.Filter
	Reviewer            string
	Flip, Confirm, Undo int64 // label ids; 0 = none
}

func newLabelReviewCmd(g *globals) *cobra.Command {
	var o labelReviewOptions
	cmd := &cobra.Command{
		Use:   "review",
		Short: "List labels, or flip/confirm/undo one (stored with provenance human; the machine label is kept)",
		Example: `  ragforge label review --run RUN --class "[HELPFUL]" --limit 20
  ragforge label review --flip 17 --reviewer ana
  ragforge label review --undo 17`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLabelReview(cmd.Context(), g, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Filter.RunID, "run", "", "only labels of this run")
	fl.StringVar(&o.Filter.Class, "class", "", "only this effective label ([HELPFUL] or [NOT_HELPFUL])")
	fl.StringVar(&o.Filter.Method, "method", "", "only this method (perplexity, evidence, import)")
	fl.BoolVar(&o.Filter.Disagreement, "disagreement", false, "only pairs where perplexity and evidence labels differ")
	fl.Float64Var(&o.Filter.LowConfidence, "low-confidence", 0, "only perplexity labels with |ppl_with - ppl_without| below this")
	fl.IntVar(&o.Filter.Limit, "limit", 50, "at most this many labels")
	minInt(fl, 0, "limit")
	fl.StringVar(&o.Reviewer, "reviewer", "", "reviewer name stored with the change")
	fl.Int64Var(&o.Flip, "flip", 0, "flip label ID")
	fl.Int64Var(&o.Confirm, "confirm", 0, "confirm label ID")
	fl.Int64Var(&o.Undo, "undo", 0, "undo the latest human review of label ID")
	minInt(fl, 0, "flip", "confirm", "undo")
	return cmd
}

func runLabelReview(_ context.Context, g *globals, o labelReviewOptions) error {
	st, ls, err := openLabels(g)
	if err != nil {
		return err
	}
	defer st.Close()
	var rec labelstore.Record
	switch {
	case o.Flip > 0:
		rec, err = ls.Review(o.Flip, labelstore.ReviewFlip, o.Reviewer)
	case o.Confirm > 0:
		rec, err = ls.Review(o.Confirm, labelstore.ReviewConfirm, o.Reviewer)
	case o.Undo > 0:
		rec, err = ls.Undo(o.Undo)
	default:
		return listLabels(g, ls, o.Filter)
	}
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, rec)
	}
	fmt.Fprintf(g.Out, "label %d: %s (machine %s, provenance %s)\n", rec.ID, rec.Effective, rec.Label.Label, rec.Provenance)
	return nil
}

// listLabels prints the labels matching f, one row each.
func listLabels(g *globals, ls *labelstore.Store, f labelstore.Filter) error {
	recs, err := ls.List(f)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, recs)
	}
	tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLABEL\tMACHINE\tMETHOD\tPPL w/o→with\tQUESTION\tSNIPPET")
	for _, r := range recs {
		ppl := "-"
		if r.Method == labelstore.MethodPerplexity {
			ppl = fmt.Sprintf("%.2f→%.2f", r.PPLWithout, r.PPLWith)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Effective, r.Label.Label, r.Method, ppl, clip(r.Question, 50), clip(r.Snippet, 60))
	}
	return tw.Flush()
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// labelExportOptions are the arguments of `label export`.
type labelExportOptions struct {
	Run, File string
}

func newLabelExportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "export RUN FILE",
		Short:   "Write a run's effective labels in the RAG² filter schema (.json list or .jsonl)",
		Example: `  ragforge label export 20261129-170000-label-evidence-ab12 train.jsonl`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLabelExport(cmd.Context(), g, labelExportOptions{Run: args[0], File: args[1]})
		},
	}
}

func runLabelExport(_ context.Context, g *globals, o labelExportOptions) error {
	st, ls, err := openLabels(g)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := resolveRun(st, o.Run)
	if err != nil {
		return err
	}
	format, err := filter.FormatOf("", o.File)
	if err != nil {
		return err
	}
	n, err := ls.Export(id, o.File, format)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.Out, "wrote %d examples to %s\n", n, o.File)
	return nil
}

func resolveRun(st *tracker.Store, id string) (string, error) {
	d, err := st.Get(id)
	if err != nil {
		return "", err
	}
	return d.ID, nil
}

// labelCountsOptions are the arguments of `label counts`.
type labelCountsOptions struct {
	Run string
}

func newLabelCountsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "counts RUN",
		Short: "Count a run's effective labels by class",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLabelCounts(cmd.Context(), g, labelCountsOptions{Run: args[0]})
		},
	}
}

func runLabelCounts(_ context.Context, g *globals, o labelCountsOptions) error {
	st, ls, err := openLabels(g)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := resolveRun(st, o.Run)
	if err != nil {
		return err
	}
	counts, err := ls.Counts(id)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, counts)
	}
	for _, k := range sortedKeys(counts) {
		fmt.Fprintf(g.Out, "%-14s %d\n", k, counts[k])
	}
	return nil
}

// labelDiffOptions are the arguments of `label diff`.
type labelDiffOptions struct {
	A, B string // run ids or unique prefixes
}

func newLabelDiffCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "diff RUN_A RUN_B",
		Short: "Compare two label runs by (question, snippet): changed, only in A, only in B",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLabelDiff(cmd.Context(), g, labelDiffOptions{A: args[0], B: args[1]})
		},
	}
}

func runLabelDiff(_ context.Context, g *globals, o labelDiffOptions) error {
	st, ls, err := openLabels(g)
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := resolveRun(st, o.A)
	if err != nil {
		return err
	}
	b, err := resolveRun(st, o.B)
	if err != nil {
		return err
	}
	d, err := ls.Diff(a, b)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, d)
	}
	fmt.Fprintf(g.Out, "same %d, changed %d, only in A %d, only in B %d\n", d.Same, len(d.Changed), len(d.OnlyA), len(d.OnlyB))
	return nil
}

// labelImportOptions are the arguments of `label import`.
type labelImportOptions struct {
	File     string
	MaxBytes int64
}

func newLabelImportCmd(g *globals) *cobra.Command {
	var o labelImportOptions
	cmd := &cobra.Command{
		Use:     "import FILE",
		Short:   "Store labels from a RAG² filter file (.json or .jsonl) as a new run (method import)",
		Example: `  ragforge label import ../shared/data/rag2_filter/medqa_llama3_cot_5pct-train.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.File = args[0]
			if o.MaxBytes < 1 {
				return fmt.Errorf("--max-bytes %d: must be at least 1", o.MaxBytes)
			}
			return runLabelImport(cmdContext(cmd), g, o)
		},
	}
	cmd.Flags().Int64Var(&o.MaxBytes, "max-bytes", filter.DefaultMaxExampleBytes, "largest file read in bytes; a longer one is refused before it is parsed")
	return cmd
}

func runLabelImport(ctx context.Context, g *globals, o labelImportOptions) (err error) {
	st, run, err := startRun(g, "label-import", map[string]string{"file": o.File})
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		return err
	}
	labels, err := ls.ImportLimit(ctx, run.ID, o.File, o.MaxBytes)
	if err != nil {
		return err
	}
	return printLabelRun(g, run, ls, "", len(labels))
}
