package pipeline

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/retrieval/evalrun"
	"github.com/ragforge/ragforge/retrieval/search"
)

// Evaluated is what a pipeline build takes from an `eval retrieval` run
// (BuildConfig.FromRun) so that the pipeline serves what was evaluated.
type Evaluated struct {
	RunID  string
	Config evalrun.Config // the run's recorded config (effective BM25 k1, b)
	Ks     []int          // the cutoffs evaluated
	// DenseWeight and BM25Weight are the hybrid's RRF weights as the run
	// logged them (hybrid/dense_weight, hybrid/bm25_weight): those of the
	// encoder's ragforge_fusion.json when they came from it, not the flags'.
	DenseWeight, BM25Weight float64
}

// ReadEvaluated reads run id (an exact id or unique prefix) from st: it
// must be a finished evalrun.Kind run.
func ReadEvaluated(st *tracker.Store, id string) (*Evaluated, error) {
	d, err := st.Get(id)
	if err != nil {
		return nil, fmt.Errorf("--from-run: %w", err)
	}
	if d.Kind != evalrun.Kind {
		return nil, fmt.Errorf("--from-run %s: a %s run; want an eval-retrieval run (ragforge eval retrieval)", d.ID, d.Kind)
	}
	if d.Status != tracker.StatusDone {
		return nil, fmt.Errorf("--from-run %s: status %s; want a finished evaluation", d.ID, d.Status)
	}
	ev := &Evaluated{RunID: d.ID}
	if err := json.Unmarshal(d.Config, &ev.Config); err != nil {
		return nil, fmt.Errorf("--from-run %s: config: %w", d.ID, err)
	}
	if ev.Ks, err = evalrun.ParseInts(ev.Config.Ks, "k"); err != nil {
		return nil, fmt.Errorf("--from-run %s: config: %w", d.ID, err)
	}
	ev.DenseWeight, ev.BM25Weight = ev.Config.Retriever.DenseWeight, ev.Config.Retriever.BM25Weight
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

// applyTo sets the build's config and manifest to the evaluated settings:
// retriever mode and directory, hybrid weights, the fusion depth the
// evaluation searched with, BM25 parameters, chunking, faiss factory and
// search settings. A setting given explicitly (c.Given) that disagrees with
// the run is an error naming both values (the pipeline would serve
// something else than what was evaluated); K must be one of the run's
// cutoffs.
func (ev *Evaluated) applyTo(c *BuildConfig, man *Manifest) error {
	r, cc := ev.Config.Retriever, ev.Config.Corpus
	changed := c.given
	differs := func(flag string, given, evaluated any) error {
		if changed(flag) && !reflect.DeepEqual(given, evaluated) {
			return fmt.Errorf("--%s %v: run %s evaluated %v; drop the flag to serve what was evaluated, or evaluate that setting", flag, given, ev.RunID, evaluated)
		}
		return nil
	}
	if r.Union {
		return fmt.Errorf("--from-run %s: evaluated with --union, which a pipeline does not serve (it returns up to 2k hits)", ev.RunID)
	}
	if ev.Config.Pseudo != "" {
		return fmt.Errorf("--from-run %s: evaluated on --pseudo-queries %s; build from an evaluation on questions", ev.RunID, ev.Config.Pseudo)
	}
	bm, err := r.BM25.Config()
	if err != nil {
		return fmt.Errorf("--from-run %s: bm25: %w", ev.RunID, err)
	}
	given, err := c.BM25.Config()
	if err != nil {
		return err
	}
	for _, f := range []string{"bm25-preset", "bm25-k1", "bm25-b", "analyzer", "bm25-meta-fields"} {
		if err := differs(f, given, bm); err != nil {
			return fmt.Errorf("--%s: BM25 %+v, run %s evaluated %+v; drop the BM25 flags to serve what was evaluated", f, given, ev.RunID, bm)
		}
	}
	for _, e := range []struct {
		flag             string
		given, evaluated any
	}{
		{"mode", c.Mode, r.Mode}, {"retriever", c.Retriever, r.Encoder}, {"chunk-size", c.Chunk.ChunkSize, cc.ChunkSize},
		{"chunk-overlap", c.Chunk.Overlap, cc.Overlap}, {"faiss", c.Factory, r.Factory}, {"nprobe", c.Nprobe, r.Nprobe}, {"ef-search", c.EfSearch, r.EfSearch},
	} {
		if err := differs(e.flag, e.given, e.evaluated); err != nil {
			return err
		}
	}
	if changed("k") && !slices.Contains(ev.Ks, c.K) {
		return fmt.Errorf("--k %d: run %s evaluated k %v; pick one of them", c.K, ev.RunID, ev.Ks)
	}
	ev.set(c, man)
	return nil
}

// set copies the evaluated settings into c and man (applyTo, once checked).
func (ev *Evaluated) set(c *BuildConfig, man *Manifest) {
	r, cc := ev.Config.Retriever, ev.Config.Corpus
	c.Mode, c.Retriever, c.Chunk.ChunkSize, c.Chunk.Overlap = string(r.Mode), r.Encoder, cc.ChunkSize, cc.Overlap
	c.Factory, c.Nprobe, c.EfSearch = r.Factory, r.Nprobe, r.EfSearch
	if c.Factory == "" {
		c.Factory = "Flat"
	}
	if !c.given("k") {
		c.K = slices.Max(ev.Ks)
	}
	man.BM25, _ = r.BM25.Config()
	man.FromRun = ev.RunID
	ret := &man.Retrieval
	if r.Mode == search.Hybrid {
		ret.DenseWeight, ret.BM25Weight = ev.DenseWeight, ev.BM25Weight
	}
	// eval retrieval fused each side's top max(--depth, 100) (its search
	// asks for --depth hits): the same depth serves the same top k.
	ret.Depth = max(ev.Config.Depth, search.DefaultDepth)
}

// applyEncoder sets the manifest's encoder settings to those the run
// encoded with (its resolved pooling, max length, prefixes and
// normalisation), after the retriever directory's own were read.
func (ev *Evaluated) applyEncoder(ret *Retrieval) {
	e := ev.Config.Retriever.Enc
	if ev.Config.Retriever.Mode == search.BM25 {
		return
	}
	ret.Pooling, ret.Normalize, ret.MaxLength, ret.QueryInstruction, ret.DocInstruction = e.Pooling, e.Normalize, e.MaxLength, e.QueryPrefix, e.PassagePrefix
}
