package selflearn

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Variant names of the report.
const (
	VariantBM25        = "bm25"
	VariantHybrid      = "hybrid"        // RRF of dense and BM25: 0.3/0.7 (AP paper) or the round's chosen weights
	VariantDense       = "dense"         // retriever R on the plain query
	VariantHyDE        = "hyde"          // untuned G and R
	VariantSLHyDE      = "sl-hyde"       // G_t and R_t
	VariantNoGenTuning = "no-gen-tuning" // G_0 and R_t
	VariantNoRetTuning = "no-ret-tuning" // G_t and R_0
)

// ReportMetrics are the metrics reported per variant (retrieval/eval names).
var ReportMetrics = []string{"nDCG@10", "Recall@1", "Recall@10", "Recall@100", "MRR@10"}

// Counts are a round's item counts; failures are per item and do not stop
// the loop.
type Counts struct {
	Sampled         int `json:"sampled"`
	Queries         int `json:"queries"`
	QueryErrors     int `json:"query_errors"`
	Candidates      int `json:"candidates"`
	CandidateErrors int `json:"candidate_errors"`
	Selected        int `json:"selected"`
	Triplets        int `json:"triplets"`
	TripletErrors   int `json:"triplet_errors"`
	NegShortfall    int `json:"neg_shortfall"` // triplets with fewer than NumNegatives negatives
	HeldOut         int `json:"held_out"`      // pseudo-queries held out of training to choose the hybrid's weights
	EvalHypoErrors  int `json:"eval_hypo_errors"`
}

// Variant is one evaluated system of a round.
type Variant struct {
	Name    string             `json:"name"`
	Metrics map[string]float64 `json:"metrics"`
}

// Round is one round's outcome; round 0 is the baseline before training.
type Round struct {
	Round        int       `json:"round"`
	Counts       Counts    `json:"counts"`
	Errors       []string  `json:"errors,omitempty"` // first per-item errors, "kind key: error"
	Variants     []Variant `json:"variants"`
	GeneratorDir string    `json:"generator_dir,omitempty"`
	RetrieverDir string    `json:"retriever_dir"`
	// Fusion is the hybrid's weights chosen this round (nil: AP defaults 0.3/0.7).
	Fusion *FusionChoice `json:"fusion,omitempty"`
}

// Report is what Run returns.
type Report struct {
	RunID     string  `json:"run_id"`
	Generator string  `json:"generator"`
	Rounds    []Round `json:"rounds"`
}

// Table writes one line per (round, variant) with ReportMetrics, then the
// per-round counts, as an aligned text table.
func (r *Report) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "round\tvariant")
	for _, m := range ReportMetrics {
		fmt.Fprintf(tw, "\t%s", m)
	}
	fmt.Fprintln(tw)
	for _, rd := range r.Rounds {
		for _, v := range rd.Variants {
			fmt.Fprintf(tw, "%d\t%s", rd.Round, v.Name)
			for _, m := range ReportMetrics {
				fmt.Fprintf(tw, "\t%.4f", v.Metrics[m])
			}
			fmt.Fprintln(tw)
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "round\tsampled\tqueries\tquery errors\tcandidates\tcandidate errors\tselected\ttriplets\ttriplet errors\tneg shortfall")
	for _, rd := range r.Rounds {
		if rd.Round == 0 {
			continue
		}
		c := rd.Counts
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", rd.Round, c.Sampled, c.Queries, c.QueryErrors,
			c.Candidates, c.CandidateErrors, c.Selected, c.Triplets, c.TripletErrors, c.NegShortfall)
	}
	return tw.Flush()
}
