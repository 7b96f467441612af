package serve

import (
	"context"
	"fmt"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/rerank"
)

// Components are the loaded models and indexes a Server uses. Only Pipeline
// is required; a nil part turns its endpoints or stages off (404 with a
// message, or the stage skipped in /v1/pipeline).
type Components struct {
	Pipeline *pipeline.Pipeline
	Encoder  encode.Encoder       // query/document encoder of the dense indexes
	Filter   Filter               // RAG² filter
	Reranker *rerank.CrossEncoder // cross-encoder of /v1/pipeline
	LLM      LLM                  // rationale, answer and HyDE documents
	Local    *LocalLM             // /v1/completions and /v1/chat/completions
	// Checked are the parts Load ran once at start-up (probe), as /healthz
	// lists them.
	Checked []string
	// LLMHealth checks a remote LLM (openai:) on /healthz; nil for none.
	LLMHealth *RemoteCheck
}

// Config is what Run needs: the HTTP options, where the pipeline is, and
// how to reach the LLM.
type Config struct {
	Options
	PipelineDir string
	Backend     string // GoMLX backend ("" = default, see models/backend)
	// DType is the dtype the local models' weights are held in (nn.DType,
	// HF's torch_dtype; "" = auto: as stored, a BF16 checkpoint stays
	// bfloat16); they compute in float32 either way.
	DType nn.DType
	// LLM is the answering model: "openai:<url>[#model]" (Ollama, llama.cpp
	// server, vLLM), "t5:<dir>", "hf:<dir>" (a T5 or a Llama/Qwen2/Qwen3
	// decoder by config.json model_type, served with its chat template), or
	// "" for the pipeline's generator/ (none when absent).
	LLM        string
	LLMOptions openai.Options
	// LabelsDB is the SQLite file of the label store (data/tracker' database);
	// "" serves no labels unless Options.Labels is set.
	LabelsDB string
	// Search overrides, field by field when non-zero, the pipeline's
	// faiss search settings (pipeline.json faiss_search: nprobe, efSearch).
	Search dense.SearchParams
}

// Load opens cfg.PipelineDir and loads its models on cfg.Backend: the
// retriever as an encode.BERTEncoder, the filter, the reranker
// (rerank.CrossEncoder with the manifest's TopN/K) and the generator, plus
// the LLM of cfg.LLM, with cfg.Search applied to the dense indexes, then
// runs each part once (probe). Errors name the part that failed: one of the
// wrong family (pipeline.CheckParts), a tokenizer with ids past the model's
// vocab_size, a retriever of another width than its dense indexes, a part
// that loads but fails its start-up check.
func Load(cfg Config) (*Components, error) {
	p, err := pipeline.Load(cfg.PipelineDir)
	if err != nil {
		return nil, err
	}
	c := &Components{Pipeline: p}
	fail := func(err error) (*Components, error) {
		p.Close()
		return nil, err
	}
	if err := p.SetSearch(cfg.Search); err != nil {
		return fail(err)
	}
	// A part of the wrong family (a BERT copied over filter/) is refused
	// by name before its weights are read.
	if err := pipeline.CheckParts(pipeline.Parts{Retriever: p.Retriever, Filter: p.Filter, Generator: p.Generator, Reranker: p.Reranker}); err != nil {
		return fail(fmt.Errorf("pipeline %s: %w", p.Dir, err))
	}
	m := p.Manifest
	if p.Retriever != "" {
		if c.Encoder, err = pipeline.LoadEncoderAs(p.Retriever, cfg.Backend, m.Retrieval, cfg.DType); err != nil {
			return fail(err)
		}
		// A retriever swapped for one of another width would answer every
		// dense, hybrid and pipeline request 500: refuse to start instead.
		for _, co := range p.Corpora {
			if co.Dense != nil && co.Dense.Dim() != c.Encoder.Dim() {
				return fail(fmt.Errorf("pipeline %s: the retriever embeds %d dimensions but corpus %q's dense index holds %d: the retriever is not the one the index was built with; rebuild the pipeline", p.Dir, c.Encoder.Dim(), co.Name, co.Dense.Dim()))
			}
		}
	}
	if p.Filter != "" {
		if c.Filter, err = LoadT5FilterAs(p.Filter, cfg.Backend, m.Filter, cfg.DType); err != nil {
			return fail(err)
		}
	}
	if p.Reranker != "" {
		bm, tok, err := bert.LoadWithTokenizerAs(p.Reranker, cfg.Backend, bert.BERT, cfg.DType)
		if err != nil {
			return fail(fmt.Errorf("load reranker: %w", err))
		}
		c.Reranker = &rerank.CrossEncoder{Model: bm, Tokenizer: tok, TopN: m.Rerank.TopN, K: m.Rerank.K}
	}
	if p.Generator != "" {
		if c.Local, err = LoadLocalLMAs(p.Generator, cfg.Backend, cfg.DType); err != nil {
			return fail(err)
		}
		c.LLM = c.Local
	}
	if cfg.LLM != "" {
		spec, err := generate.ParseGeneratorSpec(cfg.LLM)
		if err != nil {
			return fail(err)
		}
		switch spec.Kind {
		case "t5", "hf":
			if c.Local, err = LoadLocalLMAs(spec.Dir, cfg.Backend, cfg.DType); err != nil {
				return fail(err)
			}
			c.LLM = c.Local
		case "openai":
			g, err := generate.Open(spec, cfg.Backend, cfg.LLMOptions)
			if err != nil {
				return fail(err)
			}
			c.LLM = GeneratorLLM{G: g}
			c.LLMHealth = &RemoteCheck{Check: openai.New(spec.URL, cfg.LLMOptions).Preflight}
		default:
			return fail(fmt.Errorf("llm %q: want openai:<url>[#model], t5:<dir> or hf:<dir>", cfg.LLM))
		}
	}
	if c.Checked, err = c.probe(context.Background()); err != nil {
		return fail(err)
	}
	return c, nil
}
