package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/evalrun"
	"github.com/ragforge/ragforge/retrieval/fusion"
)

// addBM25Flags binds --bm25-preset, --bm25-k1, --bm25-b, --analyzer and
// --bm25-meta-fields to b, the one BM25 setting.
func addBM25Flags(cmd *cobra.Command, b *evalrun.BM25) {
	f := cmd.Flags()
	f.StringVar(&b.Preset, "bm25-preset", "default", "BM25 parameters: default (k1 1.2, b 0.75) | rank_bm25 (k1 1.5, b 0.75, LangChain's BM25Retriever)")
	f.Float64Var(&b.K1, "bm25-k1", 0, "BM25 k1 (overrides the preset)")
	f.Float64Var(&b.B, "bm25-b", -1, "BM25 b (overrides the preset)")
	f.StringVar(&b.Analyzer, "analyzer", bm25.BiomedAnalyzer, "BM25 analyzer: "+strings.Join(bm25.Analyzers(), " | "))
	f.StringSliceVar(&b.MetaFields, "bm25-meta-fields", nil, "metadata fields indexed with each chunk's text, comma-separated (e.g. title,keywords of the AP corpus; hits keep the chunk's text)")
	b.Given = f.Changed
}

// retrieverFlags choose and configure a retriever (evalrun.Retriever).
type retrieverFlags struct {
	evalrun.Retriever
	pre *data.Encoded // a pre-encoded corpus (--corpus rag2:DIR): its vectors are indexed as they are
}

func (r *retrieverFlags) add(cmd *cobra.Command) { addRetrieverFlags(cmd, &r.Retriever) }

func addRetrieverFlags(cmd *cobra.Command, r *evalrun.Retriever) {
	f := cmd.Flags()
	f.StringVar((*string)(&r.Mode), "retriever", "bm25", "retriever: bm25 | dense | hybrid (RRF of dense and BM25)")
	addBM25Flags(cmd, &r.BM25)
	f.StringVar(&r.IndexDir, "bm25-index", "", "persistent BM25 index directory (built if missing; default: in memory)")
	f.StringVar(&r.Encoder, "encoder", "", "dense encoder: a BERT model directory in HF layout (dense and hybrid)")
	f.StringVar(&r.Factory, "faiss", "Flat", "FAISS index_factory string for the dense index (Flat, HNSW32, IVF256,Flat)")
	addFAISSSearchFlags(cmd, &r.Nprobe, &r.EfSearch)
	f.Float64Var(&r.DenseWeight, "dense-weight", fusion.DenseWeight, "RRF weight of the dense retriever (hybrid; default: the encoder's ragforge_fusion.json from selflearn, else 0.3)")
	f.Float64Var(&r.BM25Weight, "bm25-weight", fusion.BM25Weight, "RRF weight of BM25 (hybrid; default: the encoder's ragforge_fusion.json, else 0.7)")
	f.BoolVar(&r.Union, "union", false, "hybrid: return the union of both top-k lists, as the AP paper's ensemble did (up to 2k results)")
	addEncoderFlags(cmd, &r.Enc)
	r.Given = f.Changed
}

func (r *retrieverFlags) validate() error { return r.Check() }

// addFAISSSearchFlags adds --nprobe and --ef-search, the faiss search-time
// settings (0 keeps faiss's defaults: nprobe 1, efSearch 16).
func addFAISSSearchFlags(cmd *cobra.Command, nprobe, efSearch *int) {
	f := cmd.Flags()
	f.IntVar(nprobe, "nprobe", 0, "IVF indexes: inverted lists visited per query (0 = faiss's 1, which under-fills: raise it)")
	f.IntVar(efSearch, "ef-search", 0, "HNSW indexes: search beam width efSearch (0 = faiss's 16)")
}

// build returns the retriever over chunks and a function that releases it
// (evalrun.Retriever.Build, progress on stderr).
func (r *retrieverFlags) build(g *globals, chunks []data.Chunk) (retrieval.Retriever, func(), error) {
	return r.Build(chunks, r.pre, g.Backend, g.Err)
}
