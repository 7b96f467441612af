package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/infer/loadtest"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/infer/serve"
	"github.com/ragforge/ragforge/infer/web"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/search"
	"github.com/ragforge/ragforge/train/filtertrain"
)

type pipelineBuildOptions struct {
	Corpora   []string    `json:"corpora"` // name=path or path
	Chunk     corpusFlags `json:"chunk"`
	Retriever string      `json:"retriever,omitempty"`
	Filter    string      `json:"filter,omitempty"`
	Generator string      `json:"generator,omitempty"`
	Reranker  string      `json:"reranker,omitempty"`
	Mode      string      `json:"mode,omitempty"`
	K         int         `json:"k,omitempty"`
	Out       string      `json:"out"`
	Factory   string      `json:"faiss,omitempty"`
	Nprobe    int         `json:"nprobe,omitempty"`
	EfSearch  int         `json:"ef_search,omitempty"`
	BM25      bm25Flags   `json:"bm25"`
	FromRun   string      `json:"from_run,omitempty"`

	changed func(name string) bool // the command's Flags().Changed
}

func newPipelineBuildCmd(g *globals) *cobra.Command {
	var o pipelineBuildOptions
	build := &cobra.Command{
		Use:   "build",
		Short: "Chunk corpora, build BM25 and FAISS indexes with the retriever, and copy the models into a pipeline directory",
		Long: `Writes a pipeline directory:
  pipeline.json                  manifest (retrieval mode, k, RRF weights, prompts, filter windows)
  corpora/<name>/chunks.jsonl    chunks with ids, spans and metadata
  corpora/<name>/bm25/           BM25 index
  corpora/<name>/dense/          FAISS index (index.faiss + ids.json, --faiss factory), when --retriever is set
  retriever/ filter/ generator/ reranker/   HF model directories, when given
and records it as a run (kind pipeline), so ` + "`ragforge serve --run ID`" + ` finds it.
--nprobe (IVF) and --ef-search (HNSW) are stored in pipeline.json
(faiss_search) and applied whenever the pipeline is loaded.`,
		Example: `  ragforge pipeline build --corpus ../shared/data/ap_protocols --retriever work/selflearn/round-1/retriever \
    --filter work/filter-export --out work/pipeline`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.changed = cmd.Flags().Changed
			return runPipelineBuild(cmd.Context(), g, o)
		},
	}
	f := build.Flags()
	f.StringVar(&o.FromRun, "from-run", "", "eval-retrieval run id whose settings the pipeline serves: retriever mode and directory, hybrid weights, fusion depth, BM25, chunking, faiss and encoder options (recorded as from_run in pipeline.json; a flag that disagrees is an error)")
	f.StringSliceVar(&o.Corpora, "corpus", nil, "corpus path, name=path, or rag2:DIR[#name] (pre-encoded by ragforge encode: its vectors are the dense index); repeat for several corpora (balanced retrieval) (required)")
	f.StringVar(&o.Chunk.TextField, "text-field", "", "text field name")
	f.StringVar(&o.Chunk.IDField, "id-field", "", "id field name")
	f.IntVar(&o.Chunk.ChunkSize, "chunk-size", 512, "chunk size in characters (0: whole documents)")
	f.IntVar(&o.Chunk.Overlap, "chunk-overlap", 128, "chunk overlap in characters")
	minInt(f, 0, "chunk-size", "chunk-overlap")
	f.StringVar(&o.Retriever, "retriever", "", "BERT bi-encoder directory (dense, hybrid and hyde modes)")
	f.StringVar(&o.Filter, "filter", "", "T5 filter directory with [HELPFUL]/[NOT_HELPFUL] tokens")
	f.StringVar(&o.Generator, "generator", "", "T5 generator directory (rationale, answers, HyDE, /v1/completions)")
	f.StringVar(&o.Reranker, "reranker", "", "BERT cross-encoder directory (optional rerank stage)")
	f.StringVar(&o.Mode, "mode", "", "default retrieval mode: bm25 | dense | hybrid | hyde (default hybrid with a retriever, else bm25)")
	f.IntVar(&o.K, "k", 0, "default number of snippets (default 5)")
	minInt(f, 0, "k")
	f.StringVar(&o.Out, "out", "", "pipeline directory to create (must not exist) (required)")
	f.StringVar(&o.Factory, "faiss", "Flat", "FAISS index_factory string of the dense indexes (Flat, HNSW32, IVF256,Flat); needs --retriever")
	addFAISSSearchFlags(build, &o.Nprobe, &o.EfSearch)
	o.BM25.add(build)
	return build
}

func runPipelineBuild(_ context.Context, g *globals, o pipelineBuildOptions) (err error) {
	if o.Out == "" || len(o.Corpora) == 0 {
		return fmt.Errorf("--corpus and --out are required")
	}
	man := pipeline.DefaultManifest()
	var ev *evaluatedRetrieval
	if o.FromRun != "" {
		if ev, err = readEvaluatedRetrieval(g, o.FromRun); err != nil {
			return err
		}
		changed := o.changed
		if changed == nil {
			changed = func(string) bool { return false }
		}
		if err := ev.applyTo(&o, &man, changed); err != nil {
			return err
		}
	}
	if ev == nil {
		if man.BM25, err = o.BM25.config(); err != nil {
			return err
		}
	}
	if o.Mode != "" {
		man.Retrieval.Mode = search.Mode(o.Mode)
	} else if o.Retriever == "" {
		man.Retrieval.Mode = search.BM25
	}
	if o.K > 0 {
		man.Retrieval.K = o.K
	}
	man.FAISSFactory = o.Factory
	man.FAISSSearch = dense.SearchParams{Nprobe: o.Nprobe, EfSearch: o.EfSearch}
	if o.Retriever == "" && (o.Factory != "Flat" || man.FAISSSearch != (dense.SearchParams{})) {
		return fmt.Errorf("--faiss, --nprobe and --ef-search configure the dense indexes, which need --retriever")
	}
	if err := man.FAISSSearch.Validate(); err != nil {
		return fmt.Errorf("--nprobe/--ef-search: %w", err)
	}
	for _, m := range []struct {
		flag string
		dir  *string
	}{{"filter", &o.Filter}, {"retriever", &o.Retriever}, {"generator", &o.Generator}} {
		if *m.dir, err = modelDir(g, m.flag, *m.dir); err != nil {
			return err
		}
	}
	if err := pipeline.CheckParts(pipeline.Parts{Retriever: o.Retriever, Filter: o.Filter, Generator: o.Generator, Reranker: o.Reranker}); err != nil {
		return fmt.Errorf("--%w", err) // names the flag: "--filter DIR: ..."
	}
	if o.Retriever != "" {
		// The retriever's own settings (sentence-transformers files), not 512 defaults.
		es, src, err := encode.DirSettings(o.Retriever)
		if err != nil {
			return err
		}
		r := &man.Retrieval
		r.Pooling, r.Normalize, r.MaxLength, r.QueryInstruction, r.DocInstruction = string(es.Pooling), es.Normalize, es.MaxLength, es.QueryPrefix, es.PassagePrefix
		r.Sources = src
		if ev != nil {
			ev.applyEncoder(r)
		}
	}
	if o.Filter != "" {
		// The windows the filter was evaluated at (its export's config.json).
		w, from, err := filtertrain.CheckpointWindows(o.Filter)
		if err != nil {
			return err
		}
		man.Filter.MaxSeqLength, man.Filter.DocStride, man.Filter.WindowsFrom = w.MaxSeqLength, w.DocStride, from
	}
	// Record the chunking actually used (the flags' effective values).
	if o.Chunk.ChunkSize > 0 {
		man.Chunk = pipeline.ChunkInfo{Size: o.Chunk.ChunkSize, Overlap: o.Chunk.Overlap, Separators: chunk.DefaultSeparators(), Unit: "runes"}
	} else {
		man.Chunk = pipeline.ChunkInfo{Unit: "document"}
	}
	parts := pipeline.Parts{Manifest: man, Retriever: o.Retriever, Filter: o.Filter, Generator: o.Generator, Reranker: o.Reranker}
	preDone := false
	for _, spec := range o.Corpora {
		name, path, named := strings.Cut(spec, "=")
		if !named || data.IsEncodedSpec(spec) {
			path, name, named = spec, corpusName(spec), false
		}
		cf := o.Chunk
		cf.Path = path
		_, chunks, err := cf.load(g)
		if err != nil {
			return err
		}
		if cf.encoded != nil && !named {
			name = cf.encoded.Name
		}
		part := pipeline.CorpusPart{Name: name, Chunks: chunks}
		if cf.encoded != nil {
			if part, err = preEncodedPart(&parts.Manifest, &preDone, o.Retriever, name, chunks, cf.encoded); err != nil {
				return err
			}
			defer part.Dense.Close()
		}
		parts.Corpora = append(parts.Corpora, part)
	}
	st, run, err := startRun(g, "pipeline", o)
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	stages := progress.NewStages(g.Err, "pipeline")
	parts.Progress = stages.Func()
	err = pipeline.Build(o.Out, pipeline.BuildOptions{Parts: parts, Backend: g.Backend})
	stages.Finish()
	if err != nil {
		return err
	}
	if err := run.Artifact(pipeline.ArtifactKind, filepath.Join(o.Out, "pipeline.json")); err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, map[string]any{"run_id": run.ID, "dir": o.Out})
	}
	fmt.Fprintf(g.Out, "run %s: pipeline in %s (mode %s, k %d)\n", run.ID, o.Out, man.Retrieval.Mode, man.Retrieval.K)
	if ev != nil {
		fmt.Fprintf(g.Out, "settings of evaluation run %s: %s\n", ev.RunID, retrievalLabel(string(man.Retrieval.Mode), man.Retrieval.DenseWeight, man.Retrieval.BM25Weight))
	}
	if o.Retriever != "" {
		fmt.Fprintf(g.Out, "dense indexes: faiss %s, nprobe %d, efSearch %d (0 = faiss's default)\n", man.FAISSFactory, man.FAISSSearch.Nprobe, man.FAISSSearch.EfSearch)
	}
	return nil
}

type serveOptions struct {
	Search      dense.SearchParams
	Pipeline    string
	RunID       string
	LLM         string
	Opt         serve.Options
	TokenEnv    string
	LLMTimeout  time.Duration
	LLMRetries  int
	NoWorkbench bool
	DType       dtypeFlag
}

func newServeCmd(g *globals) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a pipeline over HTTP: /v1/retrieve, /v1/filter, /v1/pipeline, OpenAI-compatible endpoints and the web workbench",
		Long: `Loads a pipeline directory (ragforge pipeline build) once and serves JSON:
  POST /v1/retrieve          bm25 | dense | hybrid | hyde, k, corpora, balanced
  POST /v1/filter            (question, snippets) → [HELPFUL]/[NOT_HELPFUL] and P
  POST /v1/pipeline          rationale → balanced retrieval → rerank → filter → cited answer
  POST /v1/embeddings        OpenAI-compatible (the retriever)
  POST /v1/completions       OpenAI-compatible, with echo + logprobs (ragforge's perplexity labeler can use it)
  POST /v1/chat/completions  OpenAI-compatible (the local generator)
  GET  /v1/models, /healthz, /metrics (Prometheus)
  /                          the web workbench: runs, label review, playground
Binds to loopback unless --allow-remote. Label edits need the bearer token
(--token or $RAGFORGE_TOKEN); reads need it too unless --open-read. SIGTERM
or Ctrl-C finishes in-flight requests and exits.
At most --max-concurrent-requests requests do model work at once and
--max-queue more wait; the rest are refused at once with 429 or 503 and
Retry-After, so the admitted ones finish under overload. On SIGTERM the
running requests finish (up to --shutdown-timeout) and queued or new ones
get 503.`,
		Example: `  RAGFORGE_TOKEN=secret ragforge serve --pipeline work/pipeline --addr 127.0.0.1:8080 --open-read`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every limit flag has a positive default, so a 0 or negative
			// value is the user's mistake, not "use the default".
			if err := o.Opt.Validate(); err != nil {
				return err
			}
			// pflag reads --allowed-host '' as no hosts at all.
			if cmd.Flags().Changed("allowed-host") && len(o.Opt.AllowedHosts) == 0 {
				return fmt.Errorf("--allowed-host '': want a host name or address without scheme or port, or *")
			}
			ctx, stop := signal.NotifyContext(cmdContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// In-flight requests may finish before a signal forces the exit.
			life.graceAtLeast(max(o.Opt.ShutdownTimeout, serve.DefaultOptions().ShutdownTimeout) + 5*time.Second)
			return runServe(ctx, g, o, nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Pipeline, "pipeline", "", "pipeline directory")
	f.StringVar(&o.RunID, "run", "", "serve the pipeline recorded by this run (ragforge pipeline build)")
	addDTypeFlag(cmd, &o.DType)
	f.StringVar(&o.LLM, "llm", "", "answering LLM: openai:URL[#model] (vLLM, llama.cpp server, Ollama), t5:DIR, or hf:DIR (a T5 or a Llama/Qwen2/Qwen3 decoder by config.json model_type, served with its chat template) (default: the pipeline's generator)")
	f.StringVar(&o.Opt.Addr, "addr", "127.0.0.1:8080", "listen address")
	f.BoolVar(&o.Opt.AllowRemote, "allow-remote", false, "allow a non-loopback listen address")
	f.StringVar(&o.Opt.Token, "token", os.Getenv("RAGFORGE_TOKEN"), "bearer token for write endpoints ($RAGFORGE_TOKEN)")
	f.BoolVar(&o.Opt.OpenRead, "open-read", false, "serve read endpoints without the token")
	d := serve.DefaultOptions()
	f.Int64Var(&o.Opt.MaxBodyBytes, "max-body", d.MaxBodyBytes, "request body limit in bytes")
	f.DurationVar(&o.Opt.RequestTimeout, "request-timeout", d.RequestTimeout, "per-request timeout: model work stops at the next micro-batch and the client gets a 503")
	f.DurationVar(&o.Opt.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "on SIGTERM, how long in-flight requests may finish before they are cancelled")
	f.IntVar(&o.Opt.MaxK, "max-k", d.MaxK, "largest k of /v1/retrieve and /v1/pipeline")
	f.IntVar(&o.Opt.MaxSnippets, "max-snippets", d.MaxSnippets, "most snippets per /v1/filter call (and texts per /v1/embeddings call)")
	f.IntVar(&o.Opt.MaxRequestTokens, "max-request-tokens", d.MaxRequestTokens, "most filter-window tokens per request (and prompt tokens of one scoring or generation)")
	f.IntVar(&o.Opt.MaxConcurrentRequests, "max-concurrent-requests", d.MaxConcurrentRequests, "most requests doing model work at once (retrieve, filter, pipeline, embeddings, completions, chat; fewer when that many would miss --request-timeout); more wait in the queue")
	f.IntVar(&o.Opt.MaxQueue, "max-queue", d.MaxQueue, "requests waiting for a model slot, each while it can still finish within --request-timeout; beyond, 429 with Retry-After")
	f.IntVar(&o.Opt.MaxBatch, "max-batch", d.MaxBatch, "micro-batch size (items) for the filter and encoders")
	f.IntVar(&o.Opt.MaxBatchTokens, "max-batch-tokens", d.MaxBatchTokens, "most tokens per filter micro-batch")
	f.DurationVar(&o.Opt.BatchWait, "batch-wait", d.BatchWait, "how long a micro-batch waits to fill")
	f.StringSliceVar(&o.Opt.AllowedHosts, "allowed-host", nil, "host name accepted in Host/Origin headers besides loopback and the bind address; repeat, or * for any")
	f.DurationVar(&o.LLMTimeout, "llm-timeout", 120*time.Second, "timeout of HTTP LLM calls")
	f.IntVar(&o.LLMRetries, "llm-retries", 2, "retries of HTTP LLM calls")
	f.BoolVar(&o.NoWorkbench, "no-workbench", false, "do not serve the web workbench")
	f.IntVar(&o.Search.Nprobe, "nprobe", 0, "IVF dense indexes: lists visited per query (0 = pipeline.json's faiss_search, else faiss's 1)")
	f.IntVar(&o.Search.EfSearch, "ef-search", 0, "HNSW dense indexes: efSearch (0 = pipeline.json's faiss_search, else faiss's 16)")
	return cmd
}

// runServe serves until ctx ends; ready, when set, receives the bound address.
func runServe(ctx context.Context, g *globals, o serveOptions, ready chan<- string) error {
	st, err := openStore(g)
	if err != nil {
		return err
	}
	defer st.Close()
	dir := o.Pipeline
	if (dir == "") == (o.RunID == "") {
		return fmt.Errorf("exactly one of --pipeline or --run is required")
	}
	if o.RunID != "" {
		if dir, err = pipeline.FromRun(st, o.RunID); err != nil {
			return err
		}
	}
	if err := serve.CheckAddr(o.Opt.Addr, o.Opt.AllowRemote); err != nil {
		return err
	}
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		return err
	}
	opt := o.Opt
	opt.Labels = ls
	opt.Logger = slog.New(slog.NewJSONHandler(g.Err, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if !o.NoWorkbench {
		opt.Web = web.Handler(web.Options{Runs: st, Labels: ls, Token: opt.Token, PublicRead: opt.OpenRead})
	}
	if err := o.Search.Validate(); err != nil {
		return fmt.Errorf("--nprobe/--ef-search: %w", err)
	}
	cfg := serve.Config{Options: opt, PipelineDir: dir, Backend: g.Backend, DType: o.DType.get(), LLM: o.LLM, Search: o.Search,
		LLMOptions: openai.Options{Timeout: o.LLMTimeout, MaxRetries: o.LLMRetries}}
	comps, err := serve.Load(cfg)
	if err != nil {
		return err
	}
	defer comps.Pipeline.Close()
	s, err := serve.New(opt, comps)
	if err != nil {
		return err
	}
	ln, err := listen(opt.Addr)
	if err != nil {
		s.Close()
		return err
	}
	addr := ln.Addr().String()
	fmt.Fprintf(g.Err, "ragforge serve: pipeline %s on http://%s (workbench at /, token %s)\n", dir, addr, map[bool]string{true: "set", false: "not set: label edits disabled"}[opt.Token != ""])
	if ready != nil {
		ready <- addr
	}
	return s.Serve(ctx, ln)
}

// benchServeOptions are the flags of `bench serve`.
type benchServeOptions struct {
	Load       loadtest.Options
	Endpoints  string // comma-separated: retrieve, filter
	FilterBody string // JSON file replacing the filter request's body
}

func newBenchServeCmd(g *globals) *cobra.Command {
	var o benchServeOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Load a running ragforge server from this process: throughput, p50/p95/p99 latency, errors, server RSS",
		Example: `  ragforge serve --pipeline work/pipeline --open-read &
  ragforge bench serve --url http://127.0.0.1:8080 --duration 30s --concurrency 32`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchServe(cmdContext(cmd), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Load.BaseURL, "url", "http://127.0.0.1:8080", "server base URL (loopback)")
	f.DurationVar(&o.Load.Duration, "duration", 30*time.Second, "how long to send requests")
	f.IntVar(&o.Load.Concurrency, "concurrency", 32, "concurrent clients")
	minInt(f, 1, "concurrency")
	f.StringVar(&o.Endpoints, "endpoints", "retrieve,filter", "endpoints to load: retrieve, filter")
	f.StringVar(&o.FilterBody, "filter-body", "", "JSON file sent as the /v1/filter body (default: one question, two snippets)")
	f.StringVar(&o.Load.Token, "token", os.Getenv("RAGFORGE_TOKEN"), "bearer token, when the server needs one for reads")
	return cmd
}

func runBenchServe(ctx context.Context, g *globals, o benchServeOptions) error {
	want := map[string]bool{}
	for _, e := range strings.Split(o.Endpoints, ",") {
		want[strings.TrimSpace(e)] = true
	}
	for _, e := range loadtest.DefaultEndpoints() {
		if e.Name == "filter" && o.FilterBody != "" {
			b, err := os.ReadFile(o.FilterBody)
			if err != nil {
				return fmt.Errorf("--filter-body: %w", err)
			}
			if !json.Valid(b) {
				return fmt.Errorf("--filter-body %s: not a JSON value", o.FilterBody)
			}
			e.Body = b
		}
		if want[e.Name] {
			o.Load.Endpoints = append(o.Load.Endpoints, e)
			delete(want, e.Name)
		}
	}
	for e := range want {
		if e != "" {
			return fmt.Errorf("--endpoints: unknown endpoint %q (want retrieve, filter)", e)
		}
	}
	rep, err := loadtest.Run(ctx, o.Load)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, rep)
	}
	return printLoadReport(g, rep)
}

func printLoadReport(g *globals, rep *loadtest.Report) error {
	fmt.Fprintf(g.Out, "%.1f s at %d clients, %d errors; server RSS %.1f MiB → %.1f MiB (%+.1f%%)\n",
		rep.Duration, rep.Concurrency, rep.Errors, float64(rep.RSSStart)/(1<<20), float64(rep.RSSEnd)/(1<<20), 100*rep.RSSGrowth)
	fmt.Fprintf(g.Out, "%-10s %9s %7s %8s %7s %9s %9s %8s %8s %8s %8s\n", "ENDPOINT", "REQUESTS", "SERVED", "REFUSED", "ERRORS", "REQ/S", "SERVED/S", "P50 MS", "P95 MS", "P99 MS", "MAX MS")
	for _, e := range rep.Endpoints {
		fmt.Fprintf(g.Out, "%-10s %9d %7d %8d %7d %9.1f %9.2f %8.1f %8.1f %8.1f %8.1f\n", e.Name, e.Requests, e.Served, e.Refused, e.Errors, e.Throughput, e.Goodput, e.P50Ms, e.P95Ms, e.P99Ms, e.MaxMs)
		if e.FirstError != "" {
			fmt.Fprintf(g.Out, "  first error: %s\n", e.FirstError)
		}
	}
	return nil
}
