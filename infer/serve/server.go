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
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/retrieval/dense"
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

	// Limits on the work of one request, each answered 400 or 413 naming
	// it. MaxK: largest k (default 1000, the README's largest example);
	// MaxSnippets: snippets per /v1/filter call and texts per
	// /v1/embeddings call (default 128); MaxRequestTokens: tokens of the
	// filter windows of one request, /v1/filter or /v1/pipeline, and of
	// one echo or generation prompt (default 262144 = 512 windows of 512;
	// memory does not grow with it, see MaxBatchTokens, only the time).
	MaxK             int
	MaxSnippets      int
	MaxRequestTokens int

	// MaxBatch, MaxBatchTokens and BatchWait tune micro-batching: a model
	// call takes up to MaxBatch items (filter windows, texts to encode)
	// holding up to MaxBatchTokens tokens (default 4096 = 8 windows of 512,
	// as encode.BERTEncoder's MaxBatchTokens; small, so a cancelled request
	// stops soon) from concurrent requests, waiting at most BatchWait after the
	// first; defaults 32 and 5 ms. MaxBatch 1 disables batching. A request
	// with more items runs as several micro-batches, so the memory of a
	// model call does not grow with the request, and a request whose
	// context ends (client gone, timeout, shutdown) stops at its next one.
	MaxBatch       int
	MaxBatchTokens int
	BatchWait      time.Duration

	// AllowedHosts are the host names (no port) accepted in the Host and
	// Origin headers besides localhost, 127.0.0.1, ::1 and the bind
	// address; "*" accepts any. A foreign Host is answered 421 and a
	// foreign Origin 403 (DNS rebinding, cross-site requests).
	AllowedHosts []string

	Logger *slog.Logger // structured request logs; nil discards them
	Web    http.Handler // the web workbench (infer/web.Handler), mounted at /
	Labels *label.Store // label store for /v1/labels; nil: 503 there
}

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{
		Addr: "127.0.0.1:8080", MaxBodyBytes: 1 << 20, RequestTimeout: 60 * time.Second,
		ShutdownTimeout: 30 * time.Second, MaxK: 1000, MaxSnippets: 128, MaxRequestTokens: 262144,
		MaxBatch: 32, MaxBatchTokens: 4096, BatchWait: 5 * time.Millisecond,
	}
}

// withDefaults fills the zero fields; negative ones are left for Validate.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	if o.Addr == "" {
		o.Addr = d.Addr
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = d.MaxBodyBytes
	}
	setD(&o.RequestTimeout, d.RequestTimeout)
	setD(&o.ShutdownTimeout, d.ShutdownTimeout)
	setD(&o.BatchWait, d.BatchWait)
	set(&o.MaxK, d.MaxK)
	set(&o.MaxSnippets, d.MaxSnippets)
	set(&o.MaxRequestTokens, d.MaxRequestTokens)
	set(&o.MaxBatch, d.MaxBatch)
	set(&o.MaxBatchTokens, d.MaxBatchTokens)
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Validate reports the first limit that is not positive, by its flag name
// (a zero left in options the CLI filled in is a user's 0, not "default").
// New validates after filling zero fields with the defaults.
func (o Options) Validate() error {
	for _, c := range []struct {
		name string
		ok   bool
		v    any
	}{
		{"max-body", o.MaxBodyBytes > 0, o.MaxBodyBytes},
		{"request-timeout", o.RequestTimeout > 0, o.RequestTimeout},
		{"shutdown-timeout", o.ShutdownTimeout > 0, o.ShutdownTimeout},
		{"max-k", o.MaxK > 0, o.MaxK},
		{"max-snippets", o.MaxSnippets > 0, o.MaxSnippets},
		{"max-request-tokens", o.MaxRequestTokens > 0, o.MaxRequestTokens},
		{"max-batch", o.MaxBatch > 0, o.MaxBatch},
		{"max-batch-tokens", o.MaxBatchTokens > 0, o.MaxBatchTokens},
		{"batch-wait", o.BatchWait > 0, o.BatchWait},
	} {
		if !c.ok {
			return fmt.Errorf("serve: --%s %v: must be positive", c.name, c.v)
		}
	}
	for _, h := range o.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			return fmt.Errorf("serve: --allowed-host %q: want a host name or address without scheme or port, or *", h)
		}
	}
	return nil
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
	// Search overrides, field by field when non-zero, the pipeline's
	// faiss search settings (pipeline.json faiss_search: nprobe, efSearch).
	Search dense.SearchParams
}

// Load opens cfg.PipelineDir and loads its models on cfg.Backend: the
// retriever as an encode.BERTEncoder, the filter, the reranker
// (rerank.CrossEncoder with the manifest's TopN/K) and the generator, plus
// the LLM of cfg.LLM, with cfg.Search applied to the dense indexes. Errors
// name the part that failed.
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
		bm, tok, err := bert.LoadWithTokenizer(p.Reranker, cfg.Backend)
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
	hosts   map[string]bool // nil: any host (AllowedHosts "*")
	started time.Time
	// base is the parent of every request context; Serve cancels it when
	// the shutdown timeout is about to expire, so in-flight model work
	// stops at its next micro-batch.
	base       context.Context
	cancelBase context.CancelFunc
	inflight   sync.WaitGroup
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
	handle("GET /v1/models/{id...}", accessRead, s.model)
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
				if strings.HasPrefix(r.URL.Path, "/api/") {
					access = accessRead // the same token check as /v1 reads
				}
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
	return s.observe(s.checkBrowser(mux))
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

// Flush lets streamed answers (server-sent events) through.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.code == 0 {
			w.code = 200
		}
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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
		s.inflight.Add(1)
		defer s.inflight.Done()
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
			if !bearerOK(r, s.opt.Token) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ragforge"`)
				writeError(w, &requestError{code: 401, msg: "missing or wrong bearer token"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bearerOK checks "Authorization: Bearer <token>" in constant time, the
// token trimmed of surrounding spaces, as infer/web does for its routes.
func bearerOK(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && token != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

// timeout wraps an error-returning handler with the body limit, the
// request timeout and JSON error responses. The request context ends after
// RequestTimeout (or when the client goes away, or at a forced shutdown);
// model work checks it at every micro-batch or decoding step, so the
// handler returns soon after, and a timed-out request that has written
// nothing yet is answered 503. (http.TimeoutHandler is not used: it
// buffers whole responses, which breaks streaming, and answers while the
// work goes on.)
func (s *Server) timeout(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.opt.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		r.Body = http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes)
		err := h(w, r)
		if err == nil {
			return
		}
		sw, _ := w.(*statusWriter)
		written := sw != nil && sw.code != 0
		if ctx.Err() != nil && !isRequestError(err) {
			switch {
			case written:
				return // the answer has begun
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				writeError(w, &requestError{code: 503, errCode: "timeout", msg: fmt.Sprintf("request timed out after %v (request-timeout)", s.opt.RequestTimeout)})
			case s.base.Err() != nil:
				writeError(w, &requestError{code: 503, msg: "the server is shutting down"})
			}
			return // otherwise the client is gone
		}
		if !isRequestError(err) {
			s.opt.Logger.Error("request failed", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		}
		if written {
			return // a stream already started: nothing more can be said
		}
		writeError(w, err)
	})
}

func isRequestError(err error) bool {
	var re *requestError
	return errors.As(err, &re)
}

// ErrorBody is the JSON of every error response, the OpenAI error shape:
// message, type (invalid_request_error, authentication_error,
// server_error, timeout), param (the field at fault or null) and code (a
// machine-readable string such as model_not_found, or null).
type ErrorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// statusCodes are the OpenAI-style codes of error statuses.
var statusCodes = map[int]string{
	401: "invalid_api_key", 403: "forbidden", 404: "not_found", 409: "conflict",
	413: "limit_exceeded", 415: "unsupported_media_type", 421: "misdirected_request",
	503: "unavailable",
}

func writeError(w http.ResponseWriter, err error) {
	code := 500
	typ := "server_error"
	var param, ecode string
	var re *requestError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &re):
		code, typ, param, ecode = re.code, "invalid_request_error", re.param, re.errCode
		switch {
		case code == 401:
			typ = "authentication_error"
		case code == 503:
			typ = "timeout"
		}
	case errors.As(err, &mbe):
		code, typ = 413, "invalid_request_error"
	case errors.Is(err, ErrBadPrompt):
		code, typ = 400, "invalid_request_error"
	case errors.Is(err, context.DeadlineExceeded):
		code, typ, ecode = 503, "timeout", "timeout"
	}
	if ecode == "" {
		ecode = statusCodes[code]
	}
	var b ErrorBody
	b.Error.Message, b.Error.Type = err.Error(), typ
	if param != "" {
		b.Error.Param = &param
	}
	if ecode != "" {
		b.Error.Code = &ecode
	}
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
