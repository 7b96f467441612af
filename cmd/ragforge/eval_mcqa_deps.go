package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/ragforge/ragforge/infer/eval/mcqa"
	"github.com/ragforge/ragforge/infer/serve"
	"github.com/ragforge/ragforge/models/openai"
)

// openMCQADeps opens the answerer, the retrieval (a served pipeline, or a
// pipeline directory served in-process on loopback) and the scorer.
func openMCQADeps(ctx context.Context, g *globals, o evalMCQAOptions) (mcqa.Deps, func(), error) {
	var deps mcqa.Deps
	closers := []func(){}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (mcqa.Deps, func(), error) { closeAll(); return deps, nil, err }
	if o.Answerer == "" {
		return fail(fmt.Errorf("--answerer is required (or --outputs to re-score)"))
	}
	kind, target, model, err := splitSpec(o.Answerer, "answerer")
	if err != nil {
		return fail(err)
	}
	copt := openai.Options{Model: model, Timeout: o.Timeout, MaxRetries: o.Retries, Concurrency: o.Concurrency}
	switch kind {
	case "openai":
		client := openai.New(target, copt)
		if err := client.Preflight(ctx); err != nil {
			return fail(fmt.Errorf("--answerer %s: %w", o.Answerer, err))
		}
		deps.Answerer = &mcqa.ChatAnswerer{Client: client, MaxTokens: o.MaxTokens}
	case "t5":
		lm, err := serve.LoadLocalLM(target, g.Backend)
		if err != nil {
			return fail(fmt.Errorf("--answerer %s: %w", o.Answerer, err))
		}
		deps.Answerer = &mcqa.CompleteAnswerer{LM: lm, MaxTokens: o.MaxTokens}
	default:
		return fail(fmt.Errorf("--answerer %q: want openai:URL[#model] or t5:DIR", o.Answerer))
	}
	if o.Pipeline != "" {
		url, stop, err := pipelineURL(ctx, g, o)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, stop)
		// A served pipeline may need serve's token for reads (no --open-read).
		sr := &mcqa.ServeRetriever{Client: openai.New(url, openai.Options{APIKey: os.Getenv("RAGFORGE_TOKEN"), Timeout: o.Timeout, MaxRetries: o.Retries, Concurrency: o.Concurrency})}
		if slices.Contains(strings.Split(o.Conditions, ","), mcqa.CondRAG2) {
			if err := sr.CheckFilter(ctx); err != nil {
				return fail(fmt.Errorf("--conditions rag2 with --pipeline %s: %w", o.Pipeline, err))
			}
		}
		deps.Retriever = sr
	} else if o.Filter != "" {
		return fail(fmt.Errorf("--filter needs --pipeline DIR"))
	}
	if o.Scorer != "" {
		if deps.Scorer, err = newScorer(g, o.Scorer, o.Timeout, o.Retries, o.Concurrency); err != nil {
			return fail(err)
		}
	}
	return deps, closeAll, nil
}

// pipelineURL returns --pipeline when it is a URL; a directory is loaded
// (with --filter's filter in place of its own) and served on a loopback
// port until stop.
func pipelineURL(ctx context.Context, g *globals, o evalMCQAOptions) (url string, stop func(), err error) {
	if strings.HasPrefix(o.Pipeline, "http://") || strings.HasPrefix(o.Pipeline, "https://") {
		if o.Filter != "" {
			return "", nil, fmt.Errorf("--filter applies to a pipeline directory; the server at %s serves its own", o.Pipeline)
		}
		return o.Pipeline, func() {}, nil
	}
	comps, err := serve.Load(serve.Config{PipelineDir: o.Pipeline, Backend: g.Backend})
	if err != nil {
		return "", nil, fmt.Errorf("--pipeline %s: %w", o.Pipeline, err)
	}
	if o.Filter != "" {
		if comps.Filter, err = serve.LoadT5Filter(o.Filter, g.Backend, comps.Pipeline.Manifest.Filter); err != nil {
			comps.Pipeline.Close()
			return "", nil, fmt.Errorf("--filter %s: %w", o.Filter, err)
		}
	}
	srv, err := serve.New(serve.Options{OpenRead: true}, comps) // loopback, this process only
	if err != nil {
		comps.Pipeline.Close()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { _ = srv.Serve(sctx, ln); close(done) }()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done; comps.Pipeline.Close() }, nil
}
