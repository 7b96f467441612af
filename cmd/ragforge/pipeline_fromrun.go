package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/retrieval/search"
)

// evaluatedRetrieval is what `pipeline build --from-run` takes from an
// `eval retrieval` run so that the pipeline serves what was evaluated.
type evaluatedRetrieval struct {
	RunID string
	Opt   evalRetrievalOptions // the run's recorded flags (effective BM25 k1, b)
	Ks    []int                // the cutoffs evaluated
	// DenseWeight and BM25Weight are the hybrid's RRF weights as the run
	// logged them (hybrid/dense_weight, hybrid/bm25_weight): those of the
	// encoder's ragforge_fusion.json when they came from it, not the flags'.
	DenseWeight, BM25Weight float64
}

// readEvaluatedRetrieval reads run id (an exact id or unique prefix) from
// the run store: it must be a finished `eval retrieval` run.
func readEvaluatedRetrieval(g *globals, id string) (*evaluatedRetrieval, error) {
	st, err := openStoreRead(g)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	d, err := st.Get(id)
	if err != nil {
		return nil, fmt.Errorf("--from-run: %w", err)
	}
	if d.Kind != "eval-retrieval" {
		return nil, fmt.Errorf("--from-run %s: a %s run; want an eval-retrieval run (ragforge eval retrieval)", d.ID, d.Kind)
	}
	if d.Status != tracker.StatusDone {
		return nil, fmt.Errorf("--from-run %s: status %s; want a finished evaluation", d.ID, d.Status)
	}
	ev := &evaluatedRetrieval{RunID: d.ID}
	if err := json.Unmarshal(d.Config, &ev.Opt); err != nil {
		return nil, fmt.Errorf("--from-run %s: config: %w", d.ID, err)
	}
	if ev.Ks, err = parseInts(ev.Opt.Ks, "k"); err != nil {
		return nil, fmt.Errorf("--from-run %s: config: %w", d.ID, err)
	}
	ev.DenseWeight, ev.BM25Weight = ev.Opt.Retriever.DenseWeight, ev.Opt.Retriever.BM25Weight
	for _, m := range d.Metrics {
		switch m.Name {
		case "hybrid/dense_weight":
			ev.DenseWeight = m.Value
		case "hybrid/bm25_weight":
			ev.BM25Weight = m.Value
		}
	}
	return ev, nil
}

// applyTo sets the build's flags and manifest to the evaluated settings:
// retriever mode and directory, hybrid weights, the fusion depth the
// evaluation searched with, BM25 parameters, chunking, faiss factory and
// search settings, and the encoder's options. A flag given on the command
// line that disagrees with the run is an error naming both values (the
// pipeline would serve something else than what was evaluated); --k must be
// one of the run's cutoffs. changed is the command's Flags().Changed.
func (ev *evaluatedRetrieval) applyTo(o *pipelineBuildOptions, man *pipeline.Manifest, changed func(string) bool) error {
	r, c := ev.Opt.Retriever, ev.Opt.Corpus
	differs := func(flag string, given, evaluated any) error {
		if changed(flag) && !reflect.DeepEqual(given, evaluated) {
			return fmt.Errorf("--%s %v: run %s evaluated %v; drop the flag to serve what was evaluated, or evaluate that setting", flag, given, ev.RunID, evaluated)
		}
		return nil
	}
	if r.Union {
		return fmt.Errorf("--from-run %s: evaluated with --union, which a pipeline does not serve (it returns up to 2k hits)", ev.RunID)
	}
	if ev.Opt.Pseudo != "" {
		return fmt.Errorf("--from-run %s: evaluated on --pseudo-queries %s; build from an evaluation on questions", ev.RunID, ev.Opt.Pseudo)
	}
	bm, err := r.bm25Flags.config()
	if err != nil {
		return fmt.Errorf("--from-run %s: bm25: %w", ev.RunID, err)
	}
	given, err := o.BM25.config()
	if err != nil {
		return err
	}
	for _, f := range []string{"bm25-preset", "bm25-k1", "bm25-b", "analyzer", "bm25-meta-fields"} {
		if err := differs(f, given, bm); err != nil {
			return fmt.Errorf("--%s: BM25 %+v, run %s evaluated %+v; drop the BM25 flags to serve what was evaluated", f, given, ev.RunID, bm)
		}
	}
	for _, e := range []struct {
		flag            string
		given, evaluted any
	}{
		{"mode", o.Mode, r.Mode}, {"retriever", o.Retriever, r.Encoder}, {"chunk-size", o.Chunk.ChunkSize, c.ChunkSize},
		{"chunk-overlap", o.Chunk.Overlap, c.Overlap}, {"faiss", o.Factory, r.Factory}, {"nprobe", o.Nprobe, r.Nprobe}, {"ef-search", o.EfSearch, r.EfSearch},
	} {
		if err := differs(e.flag, e.given, e.evaluted); err != nil {
			return err
		}
	}
	if changed("k") && !slices.Contains(ev.Ks, o.K) {
		return fmt.Errorf("--k %d: run %s evaluated k %v; pick one of them", o.K, ev.RunID, ev.Ks)
	}
	o.Mode, o.Retriever, o.Chunk.ChunkSize, o.Chunk.Overlap = string(r.Mode), r.Encoder, c.ChunkSize, c.Overlap
	o.Factory, o.Nprobe, o.EfSearch = r.Factory, r.Nprobe, r.EfSearch
	if o.Factory == "" {
		o.Factory = "Flat"
	}
	if !changed("k") {
		o.K = slices.Max(ev.Ks)
	}
	man.BM25 = bm
	man.FromRun = ev.RunID
	ret := &man.Retrieval
	if r.Mode == search.Hybrid {
		ret.DenseWeight, ret.BM25Weight = ev.DenseWeight, ev.BM25Weight
	}
	// eval retrieval fused each side's top max(--depth, 100) (its search
	// asks for --depth hits): the same depth serves the same top k.
	ret.Depth = max(ev.Opt.Depth, search.DefaultDepth)
	return nil
}

// applyEncoder sets the manifest's encoder settings to those the run
// encoded with (its resolved --pooling, --max-length, prefixes and
// normalisation), after the retriever directory's own were read.
func (ev *evaluatedRetrieval) applyEncoder(ret *pipeline.Retrieval) {
	e := ev.Opt.Retriever.Enc
	if ev.Opt.Retriever.Mode == search.BM25 {
		return
	}
	ret.Pooling, ret.Normalize, ret.MaxLength, ret.QueryInstruction, ret.DocInstruction = e.Pooling, e.Normalize, e.MaxLength, e.QueryPrefix, e.PassagePrefix
}

// retrievalLabel names a retrieval setting for summaries: a hybrid whose
// dense weight is 0 ranks by BM25 alone and says so.
func retrievalLabel(mode string, denseWeight, bm25Weight float64) string {
	if mode == string(search.Hybrid) {
		if denseWeight == 0 {
			return "BM25 (dense weight 0)"
		}
		return fmt.Sprintf("hybrid (dense %.2g, bm25 %.2g)", denseWeight, bm25Weight)
	}
	return mode
}
