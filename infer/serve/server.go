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
//	GET  /v1/labels             label store listing (?run=&class=&limit=)
//	GET  /v1/labels/{id}        one label with its review state
//	POST /v1/labels/{id}/review change a label's effective class (write: bearer token)
//	POST /v1/labels/{id}/undo   undo its latest review (write: bearer token)
//	GET  /healthz, GET /metrics (Prometheus text format)
//	/                           the web workbench (Options.Web): pages open, its /api reads guarded by the
//	                            workbench itself, non-GET requests are writes
//
// Concurrent filter windows and encoder texts are micro-batched (Batcher).
// Every request has a body size limit and a timeout; errors are JSON
// {"error": {"message", "type", "code"}} with a 4xx status for client
// mistakes. Writes need "Authorization: Bearer <token>" with the token set at
// start-up (no token: writes are refused); read-only endpoints need it too
// unless Options.OpenRead. The server binds to loopback unless
// Options.AllowRemote. Run serves until its context is cancelled (the CLI
// maps SIGTERM to that), then finishes in-flight requests and returns.
package serve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/rerank"
)

// Options configures the HTTP side of a Server. Zero fields take the
// defaults of DefaultOptions.
type Options struct {
	Addr string // listen address; default 127.0.0.1:8080
	// AllowRemote permits a non-loopback Addr (0.0.0.0, a LAN address).
	AllowRemote bool
	// Token is the bearer token of write endpoints (label edits, the
	// workbench's non-GET requests); empty disables writes. Read-only
	// endpoints also need it unless OpenRead. /healthz is always open.
	Token    string
	OpenRead bool

	MaxBodyBytes    int64         // request body limit; default 1 MiB
	RequestTimeout  time.Duration // per request; default 60 s
	ShutdownTimeout time.Duration // wait for in-flight requests; default 30 s
	MaxK            int           // largest k accepted; default 1000
	MaxSnippets     int           // snippets per filter request; default 256

	// MaxBatch and BatchWait tune micro-batching: a model call takes up to
	// MaxBatch items (filter windows, texts to encode) from concurrent
	// requests, waiting at most BatchWait after the first; defaults 32 and
	// 5 ms. MaxBatch 1 disables batching.
	MaxBatch  int
	BatchWait time.Duration

	Logger *slog.Logger // structured request logs; nil discards them
	Web    http.Handler // the web workbench (infer/web.Handler), mounted at /
	Labels *label.Store // label store for /v1/labels; nil: 503 there
}

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{
		Addr: "127.0.0.1:8080", MaxBodyBytes: 1 << 20, RequestTimeout: 60 * time.Second,
		ShutdownTimeout: 30 * time.Second, MaxK: 1000, MaxSnippets: 256, MaxBatch: 32, BatchWait: 5 * time.Millisecond,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Addr == "" {
		o.Addr = d.Addr
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = d.MaxBodyBytes
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = d.RequestTimeout
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = d.ShutdownTimeout
	}
	if o.MaxK <= 0 {
		o.MaxK = d.MaxK
	}
	if o.MaxSnippets <= 0 {
		o.MaxSnippets = d.MaxSnippets
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = d.MaxBatch
	}
	if o.BatchWait <= 0 {
		o.BatchWait = d.BatchWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

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
}

// Config is what Run needs: the HTTP options, where the pipeline is, and
// how to reach the LLM.
type Config struct {
	Options
	PipelineDir string
	Backend     string // GoMLX backend ("" = default, see models/backend)
	// LLM is the answering model: "openai:<url>[#model]" (Ollama, llama.cpp
	// server, vLLM), "t5:<dir>", or "" for the pipeline's generator/ (none
	// when absent).
	LLM        string
	LLMOptions openai.Options
	// LabelsDB is the SQLite file of the label store (data/runs' database);
	// "" serves no labels unless Options.Labels is set.
	LabelsDB string
}

// Load opens cfg.PipelineDir and loads its models on cfg.Backend: the
// retriever as an encode.BERTEncoder, the filter, the reranker
// (rerank.CrossEncoder with the manifest's TopN/K) and the generator, plus
// the LLM of cfg.LLM. Errors name the part that failed.
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
	m := p.Manifest
	if p.Retriever != "" {
		if c.Encoder, err = pipeline.LoadEncoder(p.Retriever, cfg.Backend, m.Retrieval); err != nil {
			return fail(err)
		}
	}
	if p.Filter != "" {
		if c.Filter, err = LoadT5Filter(p.Filter, cfg.Backend, m.Filter); err != nil {
			return fail(err)
		}
	}
	if p.Reranker != "" {
		be, err := backend.New(cfg.Backend)
		if err != nil {
			return fail(err)
		}
		bm, err := bert.Load(be, p.Reranker)
		if err != nil {
			return fail(fmt.Errorf("load reranker: %w", err))
		}
		tok, err := tokenizer.Load(p.Reranker)
		if err != nil {
			return fail(fmt.Errorf("load reranker: %w", err))
		}
		c.Reranker = &rerank.CrossEncoder{Model: bm, Tokenizer: tok, TopN: m.Rerank.TopN, K: m.Rerank.K}
	}
	if p.Generator != "" {
		if c.Local, err = LoadLocalLM(p.Generator, cfg.Backend); err != nil {
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
		case "t5":
			if c.Local, err = LoadLocalLM(spec.Dir, cfg.Backend); err != nil {
				return fail(err)
			}
			c.LLM = c.Local
		case "openai":
			g, err := generate.Open(spec, cfg.Backend, cfg.LLMOptions)
			if err != nil {
				return fail(err)
			}
			c.LLM = GeneratorLLM{G: g}
		default:
			return fail(fmt.Errorf("llm %q: want openai:<url>[#model] or t5:<dir>", cfg.LLM))
		}
	}
	return c, nil
}

// Server serves the Components over HTTP.
type Server struct {
	opt     Options
	c       *Components
	eng     *engine
	metrics *Metrics
	handler http.Handler
	benc    *batchedEncoder
	reqID   atomic.Uint64
}

// New builds a Server: it starts the micro-batchers (filter windows of a
// T5Filter, encoder texts) and the routes. Close stops the batchers.
func New(opt Options, c *Components) (*Server, error) {
	if c == nil || c.Pipeline == nil {
		return nil, errors.New("serve: a pipeline is required")
	}
	opt = opt.withDefaults()
	s := &Server{opt: opt, c: c, metrics: NewMetrics()}
	enc := c.Encoder
	if enc != nil {
		s.benc = newBatchedEncoder(enc, opt.MaxBatch, opt.BatchWait, s.metrics)
		enc = s.benc
	}
	if f, ok := c.Filter.(*T5Filter); ok {
		f.startBatching(opt.MaxBatch, opt.BatchWait, func(n int) { s.metrics.ObserveBatch("filter", n) })
	}
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

// access levels of routes.
const (
	accessOpen  = iota // no token ever (/healthz)
	accessRead         // token unless OpenRead
	accessWrite        // token always
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, access int, h func(http.ResponseWriter, *http.Request) error) {
		mux.Handle(pattern, s.guard(access, s.timeout(h)))
	}
	handle("GET /healthz", accessOpen, s.healthz)
	handle("GET /metrics", accessRead, s.metricsHandler)
	handle("POST /v1/retrieve", accessRead, s.retrieve)
	handle("POST /v1/filter", accessRead, s.filter)
	handle("POST /v1/pipeline", accessRead, s.pipeline)
	handle("POST /v1/embeddings", accessRead, s.embeddings)
	handle("POST /v1/completions", accessRead, s.completions)
	handle("POST /v1/chat/completions", accessRead, s.chat)
	handle("GET /v1/models", accessRead, s.models)
	handle("GET /v1/labels", accessRead, s.listLabels)
	handle("GET /v1/labels/{id}", accessRead, s.getLabel)
	handle("POST /v1/labels/{id}/review", accessWrite, s.reviewLabel)
	handle("POST /v1/labels/{id}/undo", accessWrite, s.undoLabel)
	if s.opt.Web != nil {
		web := s.opt.Web
		mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Pages and assets are open: a browser sends no Authorization
			// header when it opens a page, and the workbench enforces the
			// same token rule on its own /api reads (web.Options.PublicRead).
			access := accessOpen
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
			default:
				access = accessWrite
			}
			s.guard(access, http.MaxBytesHandler(web, s.opt.MaxBodyBytes)).ServeHTTP(w, r)
		}))
	} else {
		handle("/", accessOpen, func(w http.ResponseWriter, r *http.Request) error {
			return &requestError{code: 404, msg: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)}
		})
	}
	return s.observe(mux)
}

// statusWriter records the status code and body size.
type statusWriter struct {
	http.ResponseWriter
	code  int
	bytes int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// observe logs every request (log/slog) and records its metrics under its
// route pattern.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := s.reqID.Add(1)
		s.metrics.addInFlight(1)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		s.metrics.addInFlight(-1)
		if sw.code == 0 {
			sw.code = 200
		}
		endpoint := r.Pattern
		if endpoint == "" || endpoint == "/" {
			endpoint = "other"
		}
		d := time.Since(start)
		s.metrics.ObserveRequest(endpoint, sw.code, d.Seconds())
		s.opt.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.Uint64("id", id), slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("route", endpoint), slog.Int("status", sw.code), slog.Int("bytes", sw.bytes),
			slog.Float64("ms", float64(d.Microseconds())/1000), slog.String("remote", r.RemoteAddr))
	})
}

// guard enforces the bearer token for the access level.
func (s *Server) guard(access int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := access == accessWrite || (access == accessRead && !s.opt.OpenRead && s.opt.Token != "")
		if need {
			if s.opt.Token == "" {
				writeError(w, &requestError{code: 403, msg: "write endpoints are disabled: the server was started without a token"})
				return
			}
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.opt.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ragforge"`)
				writeError(w, &requestError{code: 401, msg: "missing or wrong bearer token"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// timeout wraps an error-returning handler with the body limit, the
// request timeout (the request context is cancelled after
// RequestTimeout; a handler still running then is answered 503) and JSON
// error responses.
func (s *Server) timeout(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes)
		if err := h(w, r); err != nil {
			if r.Context().Err() != nil && !isRequestError(err) {
				return // the timeout handler answers
			}
			if !isRequestError(err) {
				s.opt.Logger.Error("request failed", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
			}
			writeError(w, err)
		}
	})
	return http.TimeoutHandler(inner, s.opt.RequestTimeout, `{"error":{"message":"request timed out","type":"timeout","code":503}}`)
}

func isRequestError(err error) bool {
	var re *requestError
	return errors.As(err, &re)
}

// ErrorBody is the JSON of every error response (the OpenAI error shape).
type ErrorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	code := 500
	typ := "server_error"
	var re *requestError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &re):
		code, typ = re.code, "invalid_request_error"
	case errors.As(err, &mbe):
		code, typ = 413, "invalid_request_error"
	case errors.Is(err, ErrBadPrompt):
		code, typ = 400, "invalid_request_error"
	case errors.Is(err, context.DeadlineExceeded):
		code, typ = 503, "timeout"
	}
	var b ErrorBody
	b.Error.Message, b.Error.Type, b.Error.Code = err.Error(), typ, code
	writeJSON(w, code, b)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// decode reads one JSON value into v: strict (unknown fields are errors)
// for ragforge's own endpoints, lenient for the OpenAI-compatible ones
// (clients send fields such as "stream" or "user" we ignore). Errors are
// 400, or 413 for a body over the limit.
func decode(r *http.Request, v any, strict bool) error {
	dec := json.NewDecoder(r.Body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &requestError{code: 413, msg: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
		}
		return badRequest("bad JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("bad JSON body: more than one value")
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &requestError{code: 413, msg: fmt.Sprintf("request body over %d bytes", mbe.Limit)}
		}
	}
	return nil
}

// Serve serves on ln until ctx is cancelled, then shuts down gracefully:
// it stops accepting, waits up to ShutdownTimeout for in-flight requests,
// and stops the batchers. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.opt.RequestTimeout,
		WriteTimeout:      s.opt.RequestTimeout + 5*time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.opt.Logger.Handler(), slog.LevelWarn),
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
	sctx, cancel := context.WithTimeout(context.Background(), s.opt.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	<-errc // http.ErrServerClosed
	s.Close()
	if err != nil {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
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
		st, err := label.OpenStore(cfg.LabelsDB)
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
