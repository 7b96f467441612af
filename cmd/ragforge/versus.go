package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ragforge/ragforge/data/tracker"
)

// versusRow is a learned model's metric next to its baseline
// (tracker.Versus, its fields and JSON).
type versusRow tracker.Versus

// runBaselines derives the rows from a stored run's metrics: a filter
// (eval-filter, or train-filter's validation) against the majority class
// and ROC-AUC 0.5; a self-learning run's last round against round 0 (dense)
// and BM25 (hybrid). Other kinds have none.
func runBaselines(kind string, ms []tracker.MetricPoint) []versusRow {
	last := lastMetrics(ms)
	first := map[string]tracker.MetricPoint{}
	for _, m := range ms {
		if p, ok := first[m.Name]; !ok || m.Step < p.Step {
			first[m.Name] = m
		}
	}
	get := func(name string) (float64, bool) { p, ok := last[name]; return p.Value, ok }
	var rows []versusRow
	switch kind {
	case "eval-filter", "train-filter":
		pfx := ""
		if kind == "train-filter" {
			pfx = "valid/"
		}
		if acc, ok := get(pfx + "accuracy"); ok {
			maj, _ := get(pfx + "majority_baseline")
			rows = append(rows, versusRow{"filter", "accuracy", acc, "majority class", maj})
		}
		if auc, ok := get(pfx + "roc_auc"); ok {
			rows = append(rows, versusRow{"filter", "ROC-AUC", auc, "chance", 0.5})
		}
	case "selflearn":
		for _, m := range []string{"nDCG@10", "Recall@1"} {
			d, ok := last["dense/"+m]
			if d0, ok0 := first["dense/"+m]; ok && ok0 && d.Step > d0.Step {
				rows = append(rows, versusRow{fmt.Sprintf("dense (round %d)", d.Step), m, d.Value, "round 0", d0.Value})
			}
			h, okh := last["hybrid/"+m]
			if b, okb := last["bm25/"+m]; okh && okb {
				rows = append(rows, versusRow{fmt.Sprintf("hybrid (round %d)", h.Step), m, h.Value, "BM25", b.Value})
			}
		}
	}
	return rows
}

// printVersus writes the rows as a table with the difference; nothing for none.
func printVersus(w io.Writer, rows []versusRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nlearned vs baseline:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  MODEL\tMETRIC\tLEARNED\tBASELINE\tVALUE\tDIFF")
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%.3f\t%s\t%.3f\t%+.3f\n", r.Model, r.Metric, r.Learned, r.Baseline, r.Value, tracker.Versus(r).Diff())
	}
	tw.Flush()
}
