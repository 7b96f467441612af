// Package web is ragforge's browser workbench: run history (scalar metrics
// as tables, series as charts) and side-by-side comparison, the label review
// queue of the RAG² filter, and a playground for the inference pipeline.
//
// Handler serves the pages (plain HTML, vanilla JavaScript and CSS embedded
// with go:embed; charts are inline SVG drawn by the page, nothing is loaded
// from a CDN) and a JSON API under /api/:
//
//	GET  /api/config                    {"pipeline_url", "public_read", "writes_enabled"}; always open
//	GET  /api/runs?kind=&status=&limit=&offset=  RunList: a page of runs newest first, each with its
//	                                    final and headline metrics, the total matching, kinds and statuses
//	GET  /api/runs/{id}                 one run (id or unique prefix) with metric series and artifacts
//	GET  /api/compare?a=ID&b=ID         both runs and their MetricChange rows (better/worse by Direction)
//	GET  /api/labels?run=&class=&method=&disagreement=1&low_confidence=&reviewed=&limit=
//	GET  /api/labels/{id}               one label with its evidence highlight
//	POST /api/labels/{id}/review        {"action": "confirm"|"flip"|"[HELPFUL]"|"[NOT_HELPFUL]", "reviewer": "..."}
//	POST /api/labels/{id}/undo          delete the label's latest review
//
// The POST endpoints need "Authorization: Bearer <Options.Token>"; the GET
// endpoints need it too unless Options.PublicRead is set or no token is set
// (the rule of infer/serve: reads are guarded only when a token exists). Errors are JSON
// objects {"error": "..."} with a 4xx status for a bad request (400), missing
// or wrong token (401), writes disabled (403), unknown id or path (404), wrong
// method (405), undo of a label without review (409), a body over 1 MiB
// (413) or not JSON (415), and 503 when a store is not configured. The pages
// themselves are always served: they ask for the token once and keep it in
// the tab's sessionStorage.
//
// The playground posts {"question": "..."} to Options.PipelineURL (the
// server's /v1/pipeline by default) and renders each top-level field of the
// answer as a stage.
package web

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/bearer"
	"github.com/ragforge/ragforge/models/labelstore"
)

//go:embed assets
var assetFS embed.FS

// DefaultPipelineURL is where the playground sends questions when
// Options.PipelineURL is empty: the inference server's pipeline endpoint on
// the same origin.
const DefaultPipelineURL = "/v1/pipeline"

// maxBody caps request bodies (bytes).
const maxBody = 1 << 20

// Options configures Handler. Zero values: no stores (their endpoints answer
// 503), no token (label edits answer 403, reads are open), the playground
// posts to DefaultPipelineURL.
type Options struct {
	Runs   *tracker.Store    // run history; nil disables /api/runs and /api/compare
	Labels *labelstore.Store // label queue; nil disables /api/labels
	// Token is the bearer token, set at start-up, that state-changing
	// requests (label reviews and undo) must carry. Empty disables them.
	Token string
	// PublicRead opens the read-only GET endpoints to requests without the
	// token (infer/serve's OpenRead). Without it they need the token when
	// Token is set.
	PublicRead bool
	// PipelineURL is the playground's endpoint (same-origin path or absolute
	// URL); default DefaultPipelineURL. An absolute URL's origin is added to
	// the pages' Content-Security-Policy connect-src.
	PipelineURL string
	// Evidence returns the reference evidence of a label, highlighted in its
	// snippet on the review page (see Highlight). The label store does not
	// keep the queries' reference context, so the server supplies it, e.g. from
	// the QA file by QueryID. Default: the label's Target (rationale or
	// reference answer).
	Evidence func(labelstore.Record) string
	// MinRun is the shortest shared token run Highlight marks when the
	// evidence does not occur verbatim; default eval.MinSharedRun (5).
	MinRun int
	// RunListLimit is the page size of GET /api/runs when the request has no
	// limit (or limit=0); default 100. Each listed run's metrics are read to
	// report its final values.
	RunListLimit int
	// LabelListLimit caps GET /api/labels when the request has no limit;
	// default 500.
	LabelListLimit int
}

type server struct {
	opt    Options
	assets fs.FS
	csp    string
}

// Handler returns the workbench: the pages at /, /runs, /runs/{id},
// /runs/compare, /labels and /playground, their assets under /assets/, and
// the JSON API under /api/ (see the package documentation). It is meant to be
// mounted at the server's root; requests to other paths answer 404.
func Handler(opts Options) http.Handler {
	if opts.PipelineURL == "" {
		opts.PipelineURL = DefaultPipelineURL
	}
	if opts.RunListLimit <= 0 {
		opts.RunListLimit = 100
	}
	if opts.LabelListLimit <= 0 {
		opts.LabelListLimit = 500
	}
	if opts.Evidence == nil {
		opts.Evidence = func(r labelstore.Record) string { return r.Target }
	}
	sub, err := fs.Sub(assetFS, "assets")
	if err != nil {
		panic(err) // the embedded tree always has assets/
	}
	s := &server{opt: opts, assets: sub, csp: csp(opts.PipelineURL)}
	mux := http.NewServeMux()
	mux.Handle("/api/config", s.method("GET", s.config, false))
	mux.Handle("/api/runs", s.method("GET", s.listRuns, true))
	mux.Handle("/api/runs/{id}", s.method("GET", s.getRun, true))
	mux.Handle("/api/compare", s.method("GET", s.compare, true))
	mux.Handle("/api/labels", s.method("GET", s.listLabels, true))
	mux.Handle("/api/labels/{id}", s.method("GET", s.getLabel, true))
	mux.Handle("/api/labels/{id}/review", s.write(s.review))
	mux.Handle("/api/labels/{id}/undo", s.write(s.undo))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no API endpoint %s", r.URL.Path))
	})
	mux.Handle("/assets/", http.StripPrefix("/assets/", http.FileServerFS(sub)))
	page := http.HandlerFunc(s.page)
	for _, p := range []string{"/{$}", "/runs", "/runs/{id}", "/labels", "/playground"} {
		mux.Handle(p, page)
	}
	return securityHeaders(s.csp, mux)
}

// csp returns the pages' Content-Security-Policy: everything from the same
// origin only (no inline script or CDN), plus the pipeline's origin for fetch.
func csp(pipelineURL string) string {
	connect := "'self'"
	if u, err := url.Parse(pipelineURL); err == nil && u.Scheme != "" && u.Host != "" {
		connect += " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src " + connect +
		"; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
}

func securityHeaders(policy string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", policy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// page serves the single-page app shell; the script picks the view from the
// path.
func (s *server) page(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	b, err := fs.ReadFile(s.assets, "index.html")
	if err != nil {
		http.Error(w, "index.html missing from the embedded assets", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

// apiFunc handles one API request and returns the value to encode as JSON
// with status 200, or an error (see httpError).
type apiFunc func(r *http.Request) (any, error)

// httpError is an error with its HTTP status.
type httpError struct {
	status int
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func errStatus(status int, format string, args ...any) error {
	return &httpError{status: status, err: fmt.Errorf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func (s *server) serveAPI(w http.ResponseWriter, r *http.Request, f apiFunc) {
	v, err := f(r)
	if err != nil {
		status := http.StatusInternalServerError
		var he *httpError
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &he):
			status = he.status
		case errors.As(err, &mbe):
			status = http.StatusRequestEntityTooLarge
		}
		writeError(w, status, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// method answers only GET (and HEAD) requests with f; needAuth applies the
// read rule (token unless PublicRead).
func (s *server) method(m string, f apiFunc, needAuth bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m && !(m == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", m)
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: method not allowed (use %s)", r.Method, r.URL.Path, m))
			return
		}
		if needAuth && !s.opt.PublicRead && s.opt.Token != "" && !s.authorized(w, r) {
			return
		}
		s.serveAPI(w, r, f)
	})
}

// write answers only POST requests with f, after the token check.
func (s *server) write(f apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: method not allowed (use POST)", r.Method, r.URL.Path))
			return
		}
		if s.opt.Token == "" {
			writeError(w, http.StatusForbidden, errors.New("label edits are disabled: the server was started without a token"))
			return
		}
		if !s.authorized(w, r) {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		s.serveAPI(w, r, f)
	})
}

// authorized checks "Authorization: Bearer <token>" in constant time and
// answers 401 when it is missing or wrong.
func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	_, ok := bearer.Token(r)
	if bearer.Match(r, s.opt.Token) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="ragforge"`)
	msg := "missing bearer token"
	if ok {
		msg = "wrong bearer token"
	}
	writeError(w, http.StatusUnauthorized, errors.New(msg))
	return false
}

func (s *server) config(*http.Request) (any, error) {
	return map[string]any{
		"pipeline_url":   s.opt.PipelineURL,
		"public_read":    s.opt.PublicRead,
		"writes_enabled": s.opt.Token != "",
		"runs":           s.opt.Runs != nil,
		"labels":         s.opt.Labels != nil,
	}, nil
}
