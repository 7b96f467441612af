package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/infer/web"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/retrieval/dense"
)

// RunConfig is a server as `ragforge serve` starts it (RunWithStore).
type RunConfig struct {
	Options // address, token, limits (DefaultOptions)
	// Pipeline is the pipeline directory, or RunID the pipeline run
	// (pipeline.RunKind) recorded in the store; exactly one.
	Pipeline string
	RunID    string
	// LLM is Config.LLM; LLMTimeout and LLMRetries configure HTTP LLMs.
	LLM        string
	LLMTimeout time.Duration
	LLMRetries int
	// Search overrides the pipeline's faiss search settings (Config.Search).
	Search      dense.SearchParams
	NoWorkbench bool   // do not serve the web workbench at /
	Backend     string // GoMLX backend ("": default)
	// DType is Config.DType: the dtype the local models' weights are held
	// in ("" = nn.Auto, as stored).
	DType nn.DType
	// Log gets the start line and the request log (JSON lines); nil: none.
	Log io.Writer
}

// DefaultRunConfig serves the pipeline directory dir on addr with the
// default limits, 120 s LLM timeout and 2 retries (the CLI's defaults).
func DefaultRunConfig(dir, addr string) RunConfig {
	o := DefaultOptions()
	o.Addr = addr
	return RunConfig{Options: o, Pipeline: dir, LLMTimeout: 120 * time.Second, LLMRetries: 2}
}

// RunWithStore serves the pipeline until ctx ends, with the labels and runs of st
// (the label store shares its database); ready, when set, receives the
// bound address ("127.0.0.1:PORT") once the server listens.
func RunWithStore(ctx context.Context, st *tracker.Store, c RunConfig, ready chan<- string) error {
	dir := c.Pipeline
	if (dir == "") == (c.RunID == "") {
		return fmt.Errorf("exactly one of --pipeline or --run is required")
	}
	var err error
	if c.RunID != "" {
		if dir, err = pipeline.FromRun(st, c.RunID); err != nil {
			return err
		}
	}
	if err := CheckAddr(c.Addr, c.AllowRemote); err != nil {
		return err
	}
	// Checked before anything loads: a pipeline without local models would
	// otherwise never read it.
	if err := c.DType.Check(); err != nil {
		return fmt.Errorf("serve %s: %w", dir, err)
	}
	log := c.Log
	if log == nil {
		log = io.Discard
	}
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		return err
	}
	opt := c.Options
	opt.Labels = ls
	opt.Logger = slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if !c.NoWorkbench {
		opt.Web = web.Handler(web.Options{Runs: st, Labels: ls, Token: opt.Token, PublicRead: opt.OpenRead})
	}
	if err := c.Search.Validate(); err != nil {
		return fmt.Errorf("--nprobe/--ef-search: %w", err)
	}
	cfg := Config{Options: opt, PipelineDir: dir, Backend: c.Backend, DType: c.DType, LLM: c.LLM, Search: c.Search,
		LLMOptions: openai.Options{Timeout: c.LLMTimeout, MaxRetries: c.LLMRetries}}
	return serveLoaded(ctx, cfg, dir, log, ready)
}

// serveLoaded loads cfg's components, listens and serves until ctx ends.
func serveLoaded(ctx context.Context, cfg Config, dir string, log io.Writer, ready chan<- string) error {
	comps, err := Load(cfg)
	if err != nil {
		return err
	}
	defer comps.Pipeline.Close()
	s, err := New(cfg.Options, comps)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		s.Close()
		return err
	}
	addr := ln.Addr().String()
	fmt.Fprintf(log, "ragforge serve: pipeline %s on http://%s (workbench at /, token %s)\n", dir, addr, map[bool]string{true: "set", false: "not set: label edits disabled"}[cfg.Token != ""])
	if ready != nil {
		ready <- addr
	}
	return s.Serve(ctx, ln)
}
