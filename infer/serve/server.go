// Package serve is the library behind `ragforge serve`: it loads an
// exported pipeline (infer/pipeline) — retrievers and indexes, the RAG²
// filter, an optional cross-encoder and generator — once, and serves JSON
// over HTTP with net/http:
//
//	POST /v1/retrieve           bm25 | dense | hybrid | hyde retrieval, balanced across corpora (RAG²)
//	POST /v1/filter             (question, snippets) → P([HELPFUL]) and label per snippet
//	POST /v1/pipeline           RAG²: rationale → retrieval → rerank → filter → cited answer, timed per stage
//	POST /v1/embeddings         OpenAI-compatible embeddings of the retriever
//	POST /v1/completions        OpenAI-compatible completions of the local T5 (echo + logprobs for perplexity labels)
//	POST /v1/chat/completions   OpenAI-compatible chat of the local T5
//	GET  /v1/models             OpenAI-compatible model list
//	GET  /v1/labels             label store listing (?run=&class=&method=&reviewed=&disagreement=&low_confidence=&limit=)
//	GET  /v1/labels/{id}        one label with its review state
//	POST /v1/labels/{id}/review change a label's effective class (write: bearer token)
//	POST /v1/labels/{id}/undo   undo its latest review (write: bearer token)
//	GET  /healthz               the loaded parts and those Load ran once at start ("checked"); a server
//	                            only exists once every part passed, so "ok" means each route can answer;
//	                            a remote LLM (openai:) is asked (GET /v1/models, cached RemoteHealthTTL):
//	                            503 "unavailable", "failing": {"llm": why} while it does not answer
//	GET  /metrics               Prometheus text format
//	/                           the web workbench (Options.Web): pages open, its /api reads guarded by the
//	                            workbench itself, non-GET requests are writes
//
// Concurrent filter windows and encoder texts are micro-batched (Batcher)
// in bounded micro-batches. Every request has a body size limit, limits on
// its work (Options) and a timeout that cancels its model work; bodies must
// be JSON and Host/Origin headers allowed (guard.go); errors are JSON
// {"error": {"message", "type", "param", "code"}} with a 4xx status for
// client mistakes. Writes need "Authorization: Bearer <token>" with the token set at
// start-up (no token: writes are refused); read-only endpoints need it too
// unless Options.OpenRead. The server binds to loopback unless
// Options.AllowRemote. Run serves until its context is cancelled (the CLI
// maps SIGTERM to that), then finishes in-flight requests and returns.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ragforge/ragforge/models/labelstore"
)

// Server serves the Components over HTTP.
type Server struct {
	opt     Options
	c       *Components
	eng     *engine
	metrics *Metrics
	handler http.Handler
	benc    *batchedEncoder
	reqID   atomic.Uint64
	hosts   map[string]bool // nil: any host (AllowedHosts "*")
	started time.Time
	// base is the parent of every request context; Serve cancels it when
	// the shutdown timeout is about to expire, so in-flight model work
	// stops at its next micro-batch.
	base       context.Context
	cancelBase context.CancelFunc
	inflight   sync.WaitGroup
	adm        *admission // slots of the model routes
}

// New builds a Server: it starts the micro-batchers (filter windows of a
// T5Filter, encoder texts) and the routes. Close stops the batchers.
func New(opt Options, c *Components) (*Server, error) {
	if c == nil || c.Pipeline == nil {
		return nil, errors.New("serve: a pipeline is required")
	}
	opt = opt.withDefaults()
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opt: opt, c: c, metrics: NewMetrics(), hosts: allowedHosts(opt), started: time.Now()}
	enc := c.Encoder
	if enc != nil {
		s.benc = newBatchedEncoder(enc, opt.MaxBatch, opt.BatchWait, s.metrics)
		enc = s.benc
	}
	if f, ok := c.Filter.(*T5Filter); ok {
		f.MaxTokens = opt.MaxRequestTokens
		f.startBatching(opt.MaxBatch, opt.MaxBatchTokens, opt.BatchWait, func(n int) { s.metrics.ObserveBatch("filter", n) })
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.adm = newAdmission(opt.MaxConcurrentRequests, opt.MaxQueue, opt.RequestTimeout)
	s.eng = newEngine(c.Pipeline, enc, c.LLM, opt.MaxK)
	s.handler = s.routes()
	return s, nil
}

// Metrics returns the server's metrics.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Handler returns the server's root handler (routes, auth, limits, logs,
// metrics).
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the micro-batchers; call it after the HTTP server has shut
// down. It does not close the pipeline or the label store.
func (s *Server) Close() {
	if s.benc != nil {
		s.benc.close()
	}
	if f, ok := s.c.Filter.(*T5Filter); ok {
		f.stopBatching()
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, access int, h func(http.ResponseWriter, *http.Request) error) {
		mux.Handle(pattern, s.guard(access, s.timeout(h)))
	}
	// Model routes wait for an admission slot after the token check; the
	// request timeout counts from before the wait (admission.go).
	model := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		mux.Handle(pattern, s.guard(accessRead, s.admit(s.timeout(h))))
	}
	handle("GET /healthz", accessOpen, s.healthz)
	handle("GET /metrics", accessRead, s.metricsHandler)
	model("POST /v1/retrieve", s.retrieve)
	model("POST /v1/filter", s.filter)
	model("POST /v1/pipeline", s.pipeline)
	model("POST /v1/embeddings", s.embeddings)
	model("POST /v1/completions", s.completions)
	model("POST /v1/chat/completions", s.chat)
	handle("GET /v1/models", accessRead, s.models)
	handle("GET /v1/models/{id...}", accessRead, s.model)
	handle("GET /v1/labels", accessRead, s.listLabels)
	handle("GET /v1/labels/{id}", accessRead, s.getLabel)
	handle("POST /v1/labels/{id}/review", accessWrite, s.reviewLabel)
	handle("POST /v1/labels/{id}/undo", accessWrite, s.undoLabel)
	if s.opt.Web != nil {
		mux.Handle("/", s.webHandler(s.opt.Web))
	} else {
		handle("/", accessOpen, func(w http.ResponseWriter, r *http.Request) error {
			return &requestError{code: 404, msg: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)}
		})
	}
	return s.observe(s.checkBrowser(mux))
}

// Serve serves on ln until ctx is cancelled, then shuts down gracefully:
// it stops accepting and waits for in-flight requests; shortly before
// ShutdownTimeout (a quarter of it, at most 5 s, is kept for this) it cancels
// the requests still running, whose model work stops at its next
// micro-batch (they are answered 503), waits for them in the time left,
// and stops the batchers. It returns nil once every request has ended, an
// error when some did not stop within ShutdownTimeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.opt.RequestTimeout,
		// The 503 of a timed-out request comes after its running
		// micro-batch; the write deadline leaves room for it.
		WriteTimeout: s.opt.RequestTimeout + 30*time.Second,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(s.opt.Logger.Handler(), slog.LevelWarn),
		BaseContext:  func(net.Listener) context.Context { return s.base },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.opt.Logger.Info("serving", slog.String("addr", ln.Addr().String()))
	select {
	case err := <-errc:
		s.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.opt.Logger.Info("shutting down: finishing in-flight requests")
	s.adm.drain()
	start := time.Now()
	keep := min(s.opt.ShutdownTimeout/4, 5*time.Second)
	sctx, cancel := context.WithTimeout(context.Background(), s.opt.ShutdownTimeout-keep)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		// Cancel what is still running and give it the rest of the time.
		s.cancelBase()
		done := make(chan struct{})
		go func() { s.inflight.Wait(); close(done) }()
		select {
		case <-done:
			s.opt.Logger.Warn("shutdown: in-flight requests cancelled", slog.Duration("after", time.Since(start).Round(time.Millisecond)))
			err = nil
		case <-time.After(s.opt.ShutdownTimeout - time.Since(start)):
			err = fmt.Errorf("serve: shutdown: requests still running after %v", s.opt.ShutdownTimeout)
		}
		// Let the 503s of the cancelled requests reach their clients.
		rctx, rcancel := context.WithDeadline(context.Background(), start.Add(s.opt.ShutdownTimeout))
		if hs.Shutdown(rctx) != nil {
			hs.Close()
		}
		rcancel()
	}
	<-errc // http.ErrServerClosed
	s.cancelBase()
	if err != nil {
		// Do not wait for a micro-batch still running: the process is
		// about to exit and the shutdown timeout is spent.
		go s.Close()
		return err
	}
	s.Close()
	s.opt.Logger.Info("stopped")
	return nil
}

// CheckAddr returns an error when addr does not bind to loopback and
// allowRemote is false. A missing host (":8080") binds every interface.
func CheckAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("addr %q: %w", addr, err)
	}
	if allowRemote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("addr %q is not a loopback address; pass the allow-remote option to serve other hosts", addr)
}

// Run loads cfg's pipeline and models, listens on cfg.Addr (loopback unless
// cfg.AllowRemote), and serves until ctx is cancelled; then it finishes
// in-flight requests, closes the label store it opened and the indexes,
// and returns nil. Errors: load, listen and shutdown failures.
func Run(ctx context.Context, cfg Config) error {
	opt := cfg.Options.withDefaults()
	if err := CheckAddr(opt.Addr, opt.AllowRemote); err != nil {
		return err
	}
	c, err := Load(cfg)
	if err != nil {
		return err
	}
	defer c.Pipeline.Close()
	if cfg.LabelsDB != "" && opt.Labels == nil {
		st, err := labelstore.OpenStore(cfg.LabelsDB)
		if err != nil {
			return err
		}
		defer st.Close()
		opt.Labels = st
	}
	s, err := New(opt, c)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opt.Addr)
	if err != nil {
		s.Close()
		return fmt.Errorf("serve: %w", err)
	}
	return s.Serve(ctx, ln)
}

// healthz says ok only while every part can serve: the local parts were
// checked at start-up, a remote LLM is asked (cached, RemoteHealthTTL). A
// remote that stopped answering makes it 503 naming the part, since the
// routes needing it would fail.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	body := map[string]any{
		"status": "ok", "corpora": s.c.Pipeline.Manifest.Corpora,
		"retriever": s.c.Encoder != nil, "filter": s.c.Filter != nil, "reranker": s.c.Reranker != nil,
		"llm": s.c.LLM != nil, "generator": s.c.Local != nil, "checked": s.c.Checked,
	}
	code := 200
	if s.c.LLMHealth != nil {
		if err := s.c.LLMHealth.Err(r.Context()); err != nil {
			code, body["status"] = 503, "unavailable"
			body["failing"] = map[string]string{"llm": err.Error()}
			w.Header().Set("Retry-After", strconv.Itoa(int(RemoteHealthTTL.Seconds())))
		}
	}
	writeJSON(w, code, body)
	return nil
}

func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, err := s.metrics.WriteTo(w)
	return err
}
