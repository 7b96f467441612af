package evalrun

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/retrieval/search"
)

// BM25 is the BM25 setting: a preset, optionally k1 and b, the analyzer
// and the metadata fields indexed with each chunk.
type BM25 struct {
	K1         float64  `json:"k1"` // 0 and not given: the preset's
	B          float64  `json:"b"`  // < 0 and not given: the preset's
	Preset     string   `json:"preset"`
	Analyzer   string   `json:"analyzer"`
	MetaFields []string `json:"meta_fields,omitempty"`

	// Given reports whether "bm25-k1" or "bm25-b" was set explicitly (then
	// even a nonsense value applies and Config refuses it); nil: judged
	// from the values (K1 > 0, B >= 0).
	Given func(name string) bool `json:"-"`
}

// DefaultBM25 is the "default" preset (k1 1.2, b 0.75) with the biomedical
// analyzer.
func DefaultBM25() BM25 { return BM25{Preset: "default", B: -1, Analyzer: bm25.BiomedAnalyzer} }

// Config is the BM25 configuration the settings give, validated.
func (b BM25) Config() (bm25.Config, error) {
	var cfg bm25.Config
	switch b.Preset {
	case "default", "":
		cfg = bm25.DefaultConfig()
	case "rank_bm25":
		cfg = bm25.RankBM25Config()
	default:
		return cfg, fmt.Errorf("--bm25-preset %q: want default or rank_bm25", b.Preset)
	}
	// A value given explicitly always applies, so a nonsense one
	// (--bm25-k1 -5) is refused by Validate instead of leaving the preset's.
	given := func(name string, set bool) bool {
		if b.Given != nil {
			return b.Given(name)
		}
		return set
	}
	if given("bm25-k1", b.K1 > 0) {
		cfg.K1 = b.K1
	}
	if given("bm25-b", b.B >= 0) {
		cfg.B = b.B
	}
	if b.Analyzer != "" {
		cfg.Analyzer = b.Analyzer
	}
	cfg.MetaFields = b.MetaFields
	return cfg, cfg.Validate()
}

// Retriever chooses and configures a retriever.
type Retriever struct {
	Mode search.Mode `json:"mode"`
	BM25
	IndexDir    string  `json:"index_dir,omitempty"`
	Encoder     string  `json:"encoder,omitempty"`
	Factory     string  `json:"faiss,omitempty"`
	Nprobe      int     `json:"nprobe,omitempty"`
	EfSearch    int     `json:"ef_search,omitempty"`
	DenseWeight float64 `json:"dense_weight"`
	BM25Weight  float64 `json:"bm25_weight"`
	Union       bool    `json:"union"`
	// Enc configures the dense encoder (max length, prefixes, batch size).
	Enc Encoder `json:"encoder_options"`
	// WeightsFrom is the encoder's ragforge_fusion.json when the weights
	// came from it (chosen by selflearn) rather than from the settings.
	WeightsFrom string `json:"weights_from,omitempty"`

	// Given reports whether "dense-weight" or "bm25-weight" was set
	// explicitly; when neither was, a hybrid takes the encoder's
	// ragforge_fusion.json. nil: neither was.
	Given func(name string) bool `json:"-"`
}

// DefaultRetriever is BM25, with the AP paper's hybrid weights (dense 0.3,
// BM25 0.7), a Flat FAISS index and DefaultEncoder for the dense modes.
func DefaultRetriever() Retriever {
	return Retriever{Mode: search.BM25, BM25: DefaultBM25(), Factory: "Flat", DenseWeight: fusion.DenseWeight, BM25Weight: fusion.BM25Weight, Enc: DefaultEncoder()}
}

// MarshalJSON stores the effective BM25 k1 and b (the preset's unless
// overridden) instead of the "not set" sentinels (k1 0, b -1).
func (r Retriever) MarshalJSON() ([]byte, error) {
	type plain Retriever
	p := plain(r)
	if cfg, err := r.BM25.Config(); err == nil {
		p.K1, p.B, p.Analyzer = cfg.K1, cfg.B, cfg.Analyzer
	}
	return json.Marshal(p)
}

// Check validates the settings and, for the dense modes, resolves the
// encoder's settings against its directory (so a run's config records them).
func (r *Retriever) Check() error {
	switch r.Mode {
	case search.BM25:
	case search.Dense, search.Hybrid:
		if r.Encoder == "" {
			return fmt.Errorf("--retriever %s needs --encoder DIR (a BERT model in HF layout; `ragforge models init --arch bert` makes one)", r.Mode)
		}
	default:
		return fmt.Errorf("--retriever %q: want bm25, dense or hybrid", r.Mode)
	}
	if (r.Nprobe != 0 || r.EfSearch != 0) && r.Mode == search.BM25 {
		return fmt.Errorf("--nprobe and --ef-search set the dense index's search; --retriever bm25 has none")
	}
	if err := r.SearchParams().Validate(); err != nil {
		return err
	}
	if err := r.Enc.Check(); err != nil {
		return err
	}
	if r.Mode == search.BM25 {
		return nil
	}
	return r.Enc.Resolve(r.Encoder)
}

// SearchParams are the dense index's search-time settings.
func (r *Retriever) SearchParams() dense.SearchParams {
	return dense.SearchParams{Nprobe: r.Nprobe, EfSearch: r.EfSearch}
}

// Build returns the retriever over chunks and a function that releases
// it: the encoder loaded (LoadEncoder), the rest assembled by
// search.Assemble. pre, when set, is the pre-encoded corpus the chunks
// come from. Progress and notes go to log (nil: nowhere).
func (r *Retriever) Build(chunks []data.Chunk, pre *data.Encoded, backend string, log io.Writer) (retrieval.Retriever, func(), error) {
	cfg, err := r.BM25.Config()
	if err != nil {
		return nil, nil, err
	}
	// The AP paper's hybrid: RRF c 60, each side's top max(k, 100).
	a := search.Assembly{Config: search.Config{Mode: r.Mode, C: fusion.DefaultC, Depth: search.DefaultDepth, Union: r.Union},
		BM25: cfg, IndexDir: r.IndexDir, Factory: r.Factory, Search: r.SearchParams(), Encoded: pre}
	if r.Mode != search.BM25 {
		if a.Encoder, err = r.LoadEncoder(pre, backend, log); err != nil {
			return nil, nil, err
		}
	}
	if r.Mode == search.Hybrid {
		if err := r.encoderWeights(); err != nil {
			return nil, nil, err
		}
		a.DenseWeight, a.BM25Weight = r.DenseWeight, r.BM25Weight
	}
	stages := progress.NewStages(log, "")
	a.Progress = stages.Func()
	p, release, err := search.Assemble(chunks, a)
	stages.Finish()
	if err != nil {
		return nil, nil, err
	}
	return p, release, nil
}

// LoadEncoder loads the encoder with the settings applied and, for a
// pre-encoded corpus pre, checks that it encodes queries as the corpus was
// encoded. Errors: settings that make no sense, load failures, a mismatch.
func (r *Retriever) LoadEncoder(pre *data.Encoded, backend string, log io.Writer) (*encode.BERTEncoder, error) {
	if err := r.Enc.Resolve(r.Encoder); err != nil {
		return nil, err
	}
	enc, err := encode.LoadBERT(r.Encoder, backend, r.Enc.Pooling)
	if err != nil {
		return nil, err
	}
	if err := dense.CheckSearch(enc.Dim(), r.Factory, r.SearchParams()); err != nil {
		return nil, fmt.Errorf("--faiss %s: %w", r.Factory, err)
	}
	r.Enc.Apply(enc, log)
	if pre != nil {
		if err := r.Enc.MatchInfo(enc, r.Encoder, pre.Info); err != nil {
			return nil, err
		}
	}
	return enc, nil
}

// encoderWeights takes the hybrid's weights from the encoder directory's
// fusion.WeightsFile (written by selflearn) when neither weight was given.
func (r *Retriever) encoderWeights() error {
	if r.Given != nil && (r.Given("dense-weight") || r.Given("bm25-weight")) {
		return nil
	}
	w, ok, err := fusion.ReadWeights(r.Encoder)
	if err != nil || !ok {
		return err
	}
	r.DenseWeight, r.BM25Weight = w.Dense, w.BM25
	r.WeightsFrom = filepath.Join(r.Encoder, fusion.WeightsFile)
	return nil
}
