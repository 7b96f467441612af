package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/retrieval/search"
)

// bm25Flags configure BM25: --bm25-preset, --bm25-k1, --bm25-b, --analyzer,
// --bm25-meta-fields.
type bm25Flags struct {
	K1         float64  `json:"k1"`
	B          float64  `json:"b"`
	Preset     string   `json:"preset"`
	Analyzer   string   `json:"analyzer"`
	MetaFields []string `json:"meta_fields,omitempty"`

	changed func(name string) bool // the command's Flags().Changed; nil: set in code
}

func (b *bm25Flags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	b.changed = f.Changed
	f.StringVar(&b.Preset, "bm25-preset", "default", "BM25 parameters: default (k1 1.2, b 0.75) | rank_bm25 (k1 1.5, b 0.75, LangChain's BM25Retriever)")
	f.Float64Var(&b.K1, "bm25-k1", 0, "BM25 k1 (overrides the preset)")
	f.Float64Var(&b.B, "bm25-b", -1, "BM25 b (overrides the preset)")
	f.StringVar(&b.Analyzer, "analyzer", bm25.BiomedAnalyzer, "BM25 analyzer: "+strings.Join(bm25.Analyzers(), " | "))
	f.StringSliceVar(&b.MetaFields, "bm25-meta-fields", nil, "metadata fields indexed with each chunk's text, comma-separated (e.g. title,keywords of the AP corpus; hits keep the chunk's text)")
}

// config is the BM25 configuration the flags give, validated.
func (b bm25Flags) config() (bm25.Config, error) {
	var cfg bm25.Config
	switch b.Preset {
	case "default", "":
		cfg = bm25.DefaultConfig()
	case "rank_bm25":
		cfg = bm25.RankBM25Config()
	default:
		return cfg, fmt.Errorf("--bm25-preset %q: want default or rank_bm25", b.Preset)
	}
	// A value given on the command line always applies, so a nonsense one
	// (--bm25-k1 -5) is refused by Validate instead of leaving the preset's.
	given := func(name string, set bool) bool {
		if b.changed != nil {
			return b.changed(name)
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

// retrieverFlags choose and configure a retriever.
type retrieverFlags struct {
	Mode search.Mode `json:"mode"`
	bm25Flags
	IndexDir    string  `json:"index_dir,omitempty"`
	Encoder     string  `json:"encoder,omitempty"`
	Factory     string  `json:"faiss,omitempty"`
	Nprobe      int     `json:"nprobe,omitempty"`
	EfSearch    int     `json:"ef_search,omitempty"`
	DenseWeight float64 `json:"dense_weight"`
	BM25Weight  float64 `json:"bm25_weight"`
	Union       bool    `json:"union"`
	// Enc configures the dense encoder (max length, prefixes, batch size).
	Enc encoderOptions `json:"encoder_options"`
	// WeightsFrom is the encoder's ragforge_fusion.json when the weights
	// came from it (chosen by selflearn) rather than from the flags.
	WeightsFrom string `json:"weights_from,omitempty"`

	pre     *data.Encoded          // a pre-encoded corpus (--corpus rag2:DIR): its vectors are indexed as they are
	changed func(name string) bool // the command's Flags().Changed
	cmd     *cobra.Command
}

func (r *retrieverFlags) add(cmd *cobra.Command) {
	r.cmd = cmd
	f := cmd.Flags()
	f.StringVar((*string)(&r.Mode), "retriever", "bm25", "retriever: bm25 | dense | hybrid (RRF of dense and BM25)")
	r.bm25Flags.add(cmd)
	f.StringVar(&r.IndexDir, "bm25-index", "", "persistent BM25 index directory (built if missing; default: in memory)")
	f.StringVar(&r.Encoder, "encoder", "", "dense encoder: a BERT model directory in HF layout (dense and hybrid)")
	f.StringVar(&r.Factory, "faiss", "Flat", "FAISS index_factory string for the dense index (Flat, HNSW32, IVF256,Flat)")
	addFAISSSearchFlags(cmd, &r.Nprobe, &r.EfSearch)
	f.Float64Var(&r.DenseWeight, "dense-weight", fusion.DenseWeight, "RRF weight of the dense retriever (hybrid; default: the encoder's ragforge_fusion.json from selflearn, else 0.3)")
	f.Float64Var(&r.BM25Weight, "bm25-weight", fusion.BM25Weight, "RRF weight of BM25 (hybrid; default: the encoder's ragforge_fusion.json, else 0.7)")
	f.BoolVar(&r.Union, "union", false, "hybrid: return the union of both top-k lists, as the AP paper's ensemble did (up to 2k results)")
	r.Enc.add(cmd)
	r.changed = f.Changed
}

// MarshalJSON stores the effective BM25 k1 and b (the preset's unless
// overridden) instead of the flags' "not set" sentinels (k1 0, b -1).
func (r retrieverFlags) MarshalJSON() ([]byte, error) {
	type plain retrieverFlags
	p := plain(r)
	if cfg, err := r.bm25Config(); err == nil {
		p.K1, p.B, p.Analyzer = cfg.K1, cfg.B, cfg.Analyzer
	}
	return json.Marshal(p)
}

func (r *retrieverFlags) validate() error {
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
	if err := r.searchParams().Validate(); err != nil {
		return err
	}
	if err := r.Enc.validate(); err != nil {
		return err
	}
	if r.Mode == search.BM25 {
		return nil
	}
	// Resolved here so that the run's config records the encoder's settings.
	return r.Enc.resolve(r.Encoder)
}

func (r *retrieverFlags) searchParams() dense.SearchParams {
	return dense.SearchParams{Nprobe: r.Nprobe, EfSearch: r.EfSearch}
}

// addFAISSSearchFlags adds --nprobe and --ef-search, the faiss search-time
// settings (0 keeps faiss's defaults: nprobe 1, efSearch 16).
func addFAISSSearchFlags(cmd *cobra.Command, nprobe, efSearch *int) {
	f := cmd.Flags()
	f.IntVar(nprobe, "nprobe", 0, "IVF indexes: inverted lists visited per query (0 = faiss's 1, which under-fills: raise it)")
	f.IntVar(efSearch, "ef-search", 0, "HNSW indexes: search beam width efSearch (0 = faiss's 16)")
}

func (r *retrieverFlags) bm25Config() (bm25.Config, error) { return r.bm25Flags.config() }

// build returns the retriever and a function that releases it: the
// encoder loaded from the flags, the rest assembled by search.Assemble.
func (r *retrieverFlags) build(g *globals, chunks []data.Chunk) (retrieval.Retriever, func(), error) {
	cfg, err := r.bm25Config()
	if err != nil {
		return nil, nil, err
	}
	// The AP paper's hybrid: RRF c 60, each side's top max(k, 100).
	a := search.Assembly{Config: search.Config{Mode: r.Mode, C: fusion.DefaultC, Depth: search.DefaultDepth, Union: r.Union},
		BM25: cfg, IndexDir: r.IndexDir, Factory: r.Factory, Search: r.searchParams(), Encoded: r.pre}
	if r.Mode != search.BM25 {
		if a.Encoder, err = loadDenseEncoder(g, r); err != nil {
			return nil, nil, err
		}
	}
	if r.Mode == search.Hybrid {
		if err := r.encoderWeights(); err != nil {
			return nil, nil, err
		}
		a.DenseWeight, a.BM25Weight = r.DenseWeight, r.BM25Weight
	}
	stages := progress.NewStages(g.Err, "")
	a.Progress = stages.Func()
	p, release, err := search.Assemble(chunks, a)
	stages.Finish()
	if err != nil {
		return nil, nil, err
	}
	return p, release, nil
}

// encoderWeights takes the hybrid's weights from the encoder directory's
// fusion.WeightsFile (written by selflearn) when neither weight flag was
// given.
func (r *retrieverFlags) encoderWeights() error {
	if r.cmd != nil && (r.cmd.Flags().Changed("dense-weight") || r.cmd.Flags().Changed("bm25-weight")) {
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
