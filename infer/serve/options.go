package serve

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ragforge/ragforge/models/labelstore"
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

	// MaxConcurrentRequests and MaxQueue bound the requests of model
	// routes (/v1/retrieve, /v1/filter, /v1/pipeline, /v1/embeddings,
	// /v1/completions, /v1/chat/completions): at most MaxConcurrentRequests
	// do model work at once (default 4: the models share the CPU, so more
	// only slows every one), fewer when requests are so heavy that that
	// many sharing the model would miss RequestTimeout; up to MaxQueue more
	// wait for a slot (default
	// 16) while they can still finish within RequestTimeout; the rest are
	// refused at once with 429 or 503 and Retry-After (admission.go).
	MaxConcurrentRequests int
	MaxQueue              int

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

	Logger *slog.Logger      // structured request logs; nil discards them
	Web    http.Handler      // the web workbench (infer/web.Handler), mounted at /
	Labels *labelstore.Store // label store for /v1/labels; nil: 503 there
}

// MinRequestTimeout is the shortest RequestTimeout Validate accepts: a
// BM25 retrieval takes about a millisecond, a model call tens of them.
const MinRequestTimeout = 10 * time.Millisecond

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{
		Addr: "127.0.0.1:8080", MaxBodyBytes: 1 << 20, RequestTimeout: 60 * time.Second,
		ShutdownTimeout: 30 * time.Second, MaxK: 1000, MaxSnippets: 128, MaxRequestTokens: 262144,
		MaxConcurrentRequests: 4, MaxQueue: 16,
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
	set(&o.MaxConcurrentRequests, d.MaxConcurrentRequests)
	set(&o.MaxQueue, d.MaxQueue)
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
		{"max-concurrent-requests", o.MaxConcurrentRequests > 0, o.MaxConcurrentRequests},
		{"max-queue", o.MaxQueue > 0, o.MaxQueue},
		{"max-batch-tokens", o.MaxBatchTokens > 0, o.MaxBatchTokens},
		{"batch-wait", o.BatchWait > 0, o.BatchWait},
	} {
		if !c.ok {
			return fmt.Errorf("serve: --%s %v: must be positive", c.name, c.v)
		}
	}
	if o.RequestTimeout < MinRequestTimeout {
		return fmt.Errorf("serve: --request-timeout %v: under %v, no request could be answered", o.RequestTimeout, MinRequestTimeout)
	}
	for _, h := range o.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			return fmt.Errorf("serve: --allowed-host %q: want a host name or address without scheme or port, or *", h)
		}
	}
	return nil
}
