package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ragforge/ragforge/internal/bearer"
)

// access levels of routes.
const (
	accessOpen  = iota // no token ever (/healthz)
	accessRead         // token unless OpenRead
	accessWrite        // token always
)

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

// bearerOK checks "Authorization: Bearer <token>" (internal/bearer, as
// infer/web does for its routes).
func bearerOK(r *http.Request, token string) bool { return bearer.Match(r, token) }

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
