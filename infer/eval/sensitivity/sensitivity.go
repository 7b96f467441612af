package sensitivity

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/eval"
)

// Recorder stores per-item rows and metrics; *tracker.Run implements it.
type Recorder interface {
	PutItem(kind, key string, v any) error
	LogMetrics(values map[string]float64, step int) error
}

// ItemKind is the runs item kind of per-(question, variant) rows, keyed
// "<question_id>/<variant>".
const ItemKind = "sensitivity"

// Config configures Evaluate.
type Config struct {
	// Ks are the retrieval cutoffs (default 1, 2, 4, 8: the AP paper's).
	Ks []int `json:"ks"`
	// Depth is how many hits are retrieved per variant (default
	// max(max Ks, 10), so MRR@10 is defined).
	Depth int `json:"depth"`
	// Prompt is the conditioning text of the perplexity scorer; the target
	// is the variant's text. Default "" (the question's own perplexity).
	Prompt string `json:"prompt"`
}

// DefaultKs are the AP paper's cutoffs.
func DefaultKs() []int { return []int{1, 2, 4, 8} }

// Point is one (question, variant) row.
type Point struct {
	QueryID    string             `json:"question_id"`
	Variant    string             `json:"variant"`
	Text       string             `json:"text"`
	Length     int                `json:"length"` // whitespace-separated words
	Perplexity *float64           `json:"perplexity,omitempty"`
	Metrics    map[string]float64 `json:"metrics,omitempty"` // absent when the question has no relevant item
	Hits       []retrieval.Hit    `json:"hits,omitempty"`
	Errors     map[string]string  `json:"errors,omitempty"` // "retrieve", "perplexity"
}

// VariantReport summarizes one variant label.
type VariantReport struct {
	Variant string             `json:"variant"`
	N       int                `json:"n"`     // questions evaluated (with relevant items)
	Means   map[string]float64 `json:"means"` // retrieval metrics (retrieval/eval means)
	// MeanPerplexity over PerplexityN successfully scored variants.
	MeanPerplexity float64 `json:"mean_perplexity"`
	PerplexityN    int     `json:"perplexity_n"`
	MeanLength     float64 `json:"mean_length"`
	Errors         int     `json:"errors"`
}

// Correlation relates X ("perplexity" or "length") to a retrieval Metric
// over the pooled points of every variant that has both. Defined is false
// (and Pearson, Spearman 0) when fewer than 3 points or a constant series;
// Reason then says why.
type Correlation struct {
	X        string  `json:"x"`
	Metric   string  `json:"metric"`
	N        int     `json:"n"`
	Pearson  float64 `json:"pearson"`
	Spearman float64 `json:"spearman"`
	Defined  bool    `json:"defined"`
	Reason   string  `json:"reason,omitempty"`
}

// Report is Evaluate's result.
type Report struct {
	Metrics      []string        `json:"metrics"`  // retrieval metric names, display order
	Variants     []VariantReport `json:"variants"` // sorted by variant label
	Correlations []Correlation   `json:"correlations"`
	Points       []Point         `json:"points"`
	Errors       int             `json:"errors"`
}

// Evaluate retrieves Depth hits for every variant with r, scores each
// variant label's run with eval.Evaluate against qrels (keyed by
// question_id; questions without a relevant judgment are left out, as in
// eval), computes each variant's perplexity exp(-mean log p) of its text
// after cfg.Prompt under scorer (lm.Perplexity; nil scorer: skipped), and correlates perplexity
// and length with every metric (Pearson and Spearman). Each point is stored
// through rec (ItemKind) and per-variant means are logged as
// "<metric>/<variant>", "perplexity/<variant>", "length/<variant>", and
// correlations as "pearson(<x>,<metric>)", "spearman(<x>,<metric>)" at step
// 0. A retrieval or scoring failure is a per-point error (counted, stored);
// returned errors: invalid Ks, an eval error, a Recorder failure, the
// context's cancellation.
func Evaluate(ctx context.Context, cfg Config, variants []Variant, r retrieval.Retriever, qrels data.Qrels, scorer lm.Scorer, rec Recorder, progress func(done, total int)) (*Report, error) {
	ks := cfg.Ks
	if len(ks) == 0 {
		ks = DefaultKs()
	}
	depth := cfg.Depth
	for _, k := range ks {
		if k <= 0 {
			return nil, fmt.Errorf("sensitivity: config: field %q: K must be > 0, got %d", "Ks", k)
		}
		depth = max(depth, k)
	}
	if cfg.Depth == 0 {
		depth = max(depth, 10)
	}
	rep := &Report{Points: make([]Point, len(variants))}
	runs, err := measure(ctx, cfg, variants, r, depth, scorer, rep.Points, progress)
	if err != nil {
		return nil, err
	}
	reports := map[string]*eval.Report{}
	for name, run := range runs {
		er, err := eval.Evaluate(run, qrels, ks)
		if err != nil {
			return nil, fmt.Errorf("sensitivity: variant %q: %w", name, err)
		}
		reports[name] = er
		rep.Metrics = er.Metrics
	}
	byVariant := map[string]*VariantReport{}
	var labels []string
	logged := map[string]float64{}
	for i := range rep.Points {
		p := &rep.Points[i]
		if er := reports[p.Variant]; er != nil {
			p.Metrics = er.PerQuery[p.QueryID]
		}
		vr := byVariant[p.Variant]
		if vr == nil {
			vr = &VariantReport{Variant: p.Variant, Means: map[string]float64{}}
			if er := reports[p.Variant]; er != nil {
				vr.Means, vr.N = er.Mean, len(er.Queries)
			}
			byVariant[p.Variant] = vr
			labels = append(labels, p.Variant)
		}
		vr.MeanLength += float64(p.Length)
		if p.Perplexity != nil {
			vr.MeanPerplexity += *p.Perplexity
			vr.PerplexityN++
		}
		if len(p.Errors) > 0 {
			vr.Errors++
			rep.Errors++
		} else {
			p.Errors = nil
		}
		if err := rec.PutItem(ItemKind, p.QueryID+"/"+p.Variant, p); err != nil {
			return nil, fmt.Errorf("sensitivity: store item %s/%s: %w", p.QueryID, p.Variant, err)
		}
	}
	sort.Strings(labels)
	counts := map[string]int{}
	for _, p := range rep.Points {
		counts[p.Variant]++
	}
	for _, l := range labels {
		vr := byVariant[l]
		vr.MeanLength /= float64(counts[l])
		logged["length/"+l] = vr.MeanLength
		if vr.PerplexityN > 0 {
			vr.MeanPerplexity /= float64(vr.PerplexityN)
			logged["perplexity/"+l] = vr.MeanPerplexity
		}
		for m, v := range vr.Means {
			logged[m+"/"+l] = v
		}
		rep.Variants = append(rep.Variants, *vr)
	}
	for _, x := range []string{"perplexity", "length"} {
		if x == "perplexity" && scorer == nil {
			continue
		}
		for _, m := range rep.Metrics {
			c := correlate(rep.Points, x, m)
			rep.Correlations = append(rep.Correlations, c)
			if c.Defined {
				logged[fmt.Sprintf("pearson(%s,%s)", x, m)] = c.Pearson
				logged[fmt.Sprintf("spearman(%s,%s)", x, m)] = c.Spearman
			}
		}
	}
	if err := rec.LogMetrics(logged, 0); err != nil {
		return nil, fmt.Errorf("sensitivity: log metrics: %w", err)
	}
	return rep, nil
}

// measure retrieves every variant (top depth) and, with a scorer, its
// perplexity, filling points[i] for variants[i]; a failure is stored in the
// point's Errors. It returns the hits by variant label, then query id.
func measure(ctx context.Context, cfg Config, variants []Variant, r retrieval.Retriever, depth int, scorer lm.Scorer,
	points []Point, progress func(done, total int)) (map[string]eval.Run, error) {
	runs := map[string]eval.Run{}
	for i, v := range variants {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := Point{QueryID: v.QueryID, Variant: v.Variant, Text: v.Text, Length: len(strings.Fields(v.Text)), Errors: map[string]string{}}
		hits, err := r.Search(v.Text, depth)
		if err != nil {
			p.Errors["retrieve"] = err.Error()
		} else {
			p.Hits = hits
			if runs[v.Variant] == nil {
				runs[v.Variant] = eval.Run{}
			}
			runs[v.Variant][v.QueryID] = hits
		}
		if scorer != nil {
			lp, err := scorer.TargetLogProbs(ctx, cfg.Prompt, v.Text)
			if err == nil {
				var ppl float64
				if ppl, err = lm.Perplexity(lp); err == nil {
					p.Perplexity = &ppl
				}
			}
			if err != nil {
				p.Errors["perplexity"] = fmt.Sprintf("%s: %v", scorer.Name(), err)
			}
		}
		points[i] = p
		if progress != nil {
			progress(i+1, len(variants))
		}
	}
	return runs, ctx.Err()
}

func correlate(points []Point, x, metric string) Correlation {
	c := Correlation{X: x, Metric: metric}
	var xs, ys []float64
	for _, p := range points {
		y, ok := p.Metrics[metric]
		if !ok {
			continue
		}
		switch {
		case x == "length":
			xs = append(xs, float64(p.Length))
		case p.Perplexity != nil:
			xs = append(xs, *p.Perplexity)
		default:
			continue
		}
		ys = append(ys, y)
	}
	c.N = len(xs)
	if c.N < 3 {
		c.Reason = fmt.Sprintf("%d points, need at least 3", c.N)
		return c
	}
	pr, err := Pearson(xs, ys)
	if err != nil {
		c.Reason = err.Error()
		return c
	}
	sr, err := Spearman(xs, ys)
	if err != nil {
		c.Reason = err.Error()
		return c
	}
	c.Pearson, c.Spearman, c.Defined = pr, sr, true
	return c
}
