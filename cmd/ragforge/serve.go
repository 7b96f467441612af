package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/infer/loadtest"
	"github.com/ragforge/ragforge/infer/serve"
	"github.com/ragforge/ragforge/retrieval/dense"
)

// serveOptions are the flags of `serve`: serve.RunConfig.
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
	DType       dtypeFlag // serve.RunConfig.DType

	ready chan<- string // when set, receives the bound address (not a flag)
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
			return runServe(ctx, g, o)
		},
	}
	o.addFlags(cmd)
	return cmd
}

func (o *serveOptions) addFlags(cmd *cobra.Command) {
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
}

// runServe serves until ctx ends (serve.RunWithStore, request log on
// stderr); o.ready, when set, receives the bound address.
func runServe(ctx context.Context, g *globals, o serveOptions) error {
	st, err := openStore(g)
	if err != nil {
		return err
	}
	defer st.Close()
	c := serve.RunConfig{Options: o.Opt, Pipeline: o.Pipeline, RunID: o.RunID, LLM: o.LLM, LLMTimeout: o.LLMTimeout, LLMRetries: o.LLMRetries,
		Search: o.Search, NoWorkbench: o.NoWorkbench, Backend: g.Backend, DType: o.DType.get(), Log: g.Err}
	return serve.RunWithStore(ctx, st, c, o.ready)
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
