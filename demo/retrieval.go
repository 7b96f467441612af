package demo

import (
	"context"
	"strings"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/retrieval/evalrun"
	"github.com/ragforge/ragforge/retrieval/search"
)

// demoKs are the cutoffs every retrieval evaluation of the demo reports.
const demoKs = "1,2,4,8"

// evalRetrieval runs an eval retrieval of mode (with encoder for dense and
// hybrid) over the demo's corpus and questions and returns its summary
// line and result. A hybrid whose dense weight is 0 ranks by BM25 alone:
// its line is named so.
func (st *state) evalRetrieval(ctx context.Context, mode search.Mode, encoder string) (Stage, *evalrun.Result, error) {
	cfg := evalrun.DefaultConfig(st.corpus, st.qa)
	cfg.Corpus = st.corpusAt(st.o.ChunkSize, st.o.Overlap)
	cfg.Ks = demoKs
	cfg.Retriever.Mode, cfg.Retriever.Encoder = mode, encoder
	cfg.Retriever.BM25 = st.o.BM25
	cfg.Backend, cfg.Log = st.o.Backend, st.log
	res, err := evalrun.Run(ctx, st.store, cfg)
	if err != nil {
		return Stage{}, nil, err
	}
	args := append([]string{"eval", "retrieval"}, st.chunkArgs()...)
	args = append(args, "--qa", st.qa, "--k", demoKs, "--retriever", string(mode))
	if encoder != "" {
		args = append(args, "--encoder", encoder)
	}
	args = append(args, st.bm25Args()...)
	keep := map[string]float64{}
	for _, k := range []string{"P@1", "Recall@4", "nDCG@10", "MRR@10"} {
		keep[k] = res.Metrics[k]
	}
	line := Stage{Command: st.command(args...), RunID: res.RunID, Metrics: keep, Artifacts: []string{res.Files["per_query"], res.Files["trec"]}}
	if res.Retriever == string(search.Hybrid) && res.DenseWeight == 0 {
		line.Name = "retrieval: " + evalrun.Label(res.Retriever, res.DenseWeight, res.BM25Weight)
	}
	return line, res, nil
}

// bm25Args renders the BM25 settings that differ from their defaults, so
// the stages' commands stay as they were without them.
func (st *state) bm25Args() []string {
	b := st.o.BM25
	var args []string
	if b.Preset != "" && b.Preset != "default" {
		args = append(args, "--bm25-preset", b.Preset)
	}
	if b.K1 > 0 {
		args = append(args, "--bm25-k1", ftoa(b.K1))
	}
	if b.B >= 0 {
		args = append(args, "--bm25-b", ftoa(b.B))
	}
	if b.Analyzer != "" && b.Analyzer != evalrun.DefaultBM25().Analyzer {
		args = append(args, "--analyzer", b.Analyzer)
	}
	if len(b.MetaFields) > 0 {
		args = append(args, "--bm25-meta-fields", strings.Join(b.MetaFields, ","))
	}
	return args
}

func evalBM25(ctx context.Context, st *state) (Stage, error) {
	line, _, err := st.evalRetrieval(ctx, search.BM25, "")
	return line, err
}

func evalHybrid(ctx context.Context, st *state) (Stage, error) {
	line, _, err := st.evalRetrieval(ctx, search.Hybrid, st.dirs["bert-tiny"])
	return line, err
}

// evalTuned evaluates the hybrid with the self-learned retriever, with the
// fusion weights selflearn chose on held-out pseudo-queries
// (ragforge_fusion.json beside the retriever).
func evalTuned(ctx context.Context, st *state) (Stage, error) {
	line, res, err := st.evalRetrieval(ctx, search.Hybrid, st.dirs["retriever-tuned"])
	if err != nil {
		return line, err
	}
	// The pipeline is built from this evaluation (export: FromRun).
	st.dirs["retrieval-tuned-run"] = res.RunID
	name := "hybrid (self-learned retriever)"
	if res.DenseWeight == 0 {
		line.Name += ", self-learned retriever unused"
		name = evalrun.Label(res.Retriever, res.DenseWeight, res.BM25Weight)
	}
	for _, b := range []struct{ stage, name string }{{"retrieval: hybrid (base)", "base hybrid"}, {"retrieval: BM25", "BM25"}} {
		for _, k := range []string{"nDCG@10", "P@1"} {
			if base, ok := st.metric[b.stage][k]; ok {
				line.Versus = append(line.Versus, tracker.Versus{Model: name, Metric: k, Learned: line.Metrics[k], Baseline: b.name, Value: base})
			}
		}
	}
	return line, nil
}
