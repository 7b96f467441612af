package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/ragforge/ragforge/infer/eval/mcqa"
)

// printMCQAReport prints the condition table (accuracy and Wilson 95%
// interval per dataset, MIRAGE's average), parse failures, the filter's
// kept snippets and McNemar's tests; --json prints the report itself.
func printMCQAReport(g *globals, runID string, rep *mcqa.Report) error {
	if g.JSON {
		return printJSON(g.Out, map[string]any{"run_id": runID, "report": rep})
	}
	fmt.Fprintf(g.Out, "run %s: parse %s;", runID, rep.Parse)
	for _, d := range rep.Datasets {
		fmt.Fprintf(g.Out, " %s %d", d, rep.Questions[d])
	}
	fmt.Fprint(g.Out, " questions\n\n")
	tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	fmt.Fprint(tw, "condition")
	for _, d := range rep.Datasets {
		fmt.Fprintf(tw, "\t%s", d)
	}
	fmt.Fprintln(tw, "\taverage\tparse failures\tmissing")
	for _, c := range rep.Conditions {
		fmt.Fprint(tw, c.Condition)
		for _, d := range c.Datasets {
			fmt.Fprintf(tw, "\t%.1f%% [%.1f, %.1f]", 100*d.Accuracy, 100*d.CI.Low, 100*d.CI.High)
		}
		fmt.Fprintf(tw, "\t%.1f%% [%.1f, %.1f]\t%d\t%d\n", 100*c.Average, 100*c.AverageCI.Low, 100*c.AverageCI.High, c.ParseFailures, c.Missing)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(g.Out, "(accuracy % with the Wilson 95% interval; the average is MIRAGE's mean over datasets with a normal 95% interval)")
	for _, c := range rep.Conditions {
		for _, d := range c.Datasets {
			if len(d.FailureCauses) > 0 || d.MIRAGEFallbacks > 0 {
				fmt.Fprintf(g.Out, "%s/%s: parse failures %s; MIRAGE's scorer read %d outputs as A for want of a letter\n", c.Condition, d.Dataset, formatCounts(d.FailureCauses), d.MIRAGEFallbacks)
			}
			if d.LogLikAcc != nil {
				fmt.Fprintf(g.Out, "%s/%s: option log-likelihood acc %.1f%%, acc_norm %.1f%%\n", c.Condition, d.Dataset, 100**d.LogLikAcc, 100**d.LogLikAccNorm)
			}
		}
		if f := c.Filter; f != nil {
			fmt.Fprintf(g.Out, "%s filter: kept %.2f of %.2f snippets per question; kept none on %d questions (accuracy there %.1f%%); kept counts %v\n",
				c.Condition, f.MeanKept, f.MeanRetrieved, f.NoneKept, 100*f.NoneKeptAccuracy, f.KeptCountsSorted())
		}
	}
	for _, p := range rep.Pairs {
		fmt.Fprintf(g.Out, "McNemar %s vs %s: %d questions, only %s right %d, only %s right %d, exact p = %.4g\n", p.A, p.B, p.N, p.A, p.OnlyA, p.B, p.OnlyB, p.P)
	}
	return nil
}
