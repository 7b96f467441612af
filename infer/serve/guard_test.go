package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ragforge/ragforge/infer/web"
)

// Acceptance 2: text/plain and form bodies get 415, a foreign Host 421, a
// foreign Origin 403, an invalid-UTF-8 asset path 404; loopback, the bind
// address and --allowed-host names pass.
func TestBrowserSafety(t *testing.T) {
	f := newFixture(t, Options{OpenRead: true, Token: "tok", AllowedHosts: []string{"rag.example"},
		Web: web.Handler(web.Options{Token: "tok", PublicRead: true})})
	body := `{"question":"x","k":2,"answer":false}`
	cases := []struct {
		name, method, path, ctype, host, origin, body string
		code                                          int
	}{
		{"json", "POST", "/v1/retrieve", "application/json; charset=utf-8", "", "", `{"query":"eosin","mode":"bm25"}`, 200},
		{"text/plain", "POST", "/v1/pipeline", "text/plain", "", "", body, 415},
		{"form", "POST", "/v1/pipeline", "application/x-www-form-urlencoded", "", "", body, 415},
		{"no content type", "POST", "/v1/pipeline", "", "", "", body, 415},
		{"api form", "POST", "/api/labels/1/review", "application/x-www-form-urlencoded", "", "", "a=b", 415},
		{"cross-site origin", "POST", "/v1/pipeline", "text/plain", "", "http://evil.example", body, 403},
		{"foreign origin with json", "POST", "/v1/retrieve", "application/json", "", "http://evil.example", `{"query":"x"}`, 403},
		{"same origin", "POST", "/v1/retrieve", "application/json", "", "http://127.0.0.1:8080", `{"query":"eosin","mode":"bm25"}`, 200},
		{"rebinding host", "GET", "/v1/labels?limit=1", "", "evil.example", "", "", 421},
		{"rebinding host api", "GET", "/api/labels?limit=1", "", "evil.example:8080", "", "", 421},
		{"localhost host", "GET", "/v1/labels?limit=1", "", "localhost:8080", "", "", 200},
		{"allowed host", "GET", "/v1/labels?limit=1", "", "RAG.example", "", "", 200},
		{"overlong dots", "GET", "/assets/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd", "", "", "", "", 404},
		{"bodyless undo", "POST", "/v1/labels/999/undo", "", "", "", "", 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rd *strings.Reader
			if c.body != "" {
				rd = strings.NewReader(c.body)
			}
			var req *http.Request
			var err error
			if rd != nil {
				req, err = http.NewRequest(c.method, f.ts.URL+c.path, rd)
			} else {
				req, err = http.NewRequest(c.method, f.ts.URL+c.path, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			if c.host != "" {
				req.Host = c.host
			}
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := f.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b := readAll(t, resp)
			resp.Body.Close()
			if resp.StatusCode != c.code {
				t.Errorf("HTTP %d, want %d: %s", resp.StatusCode, c.code, b)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := DefaultOptions()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag string
		set  func(*Options)
	}{
		{"max-body", func(o *Options) { o.MaxBodyBytes = -1 }},
		{"request-timeout", func(o *Options) { o.RequestTimeout = 0 }},
		{"max-batch", func(o *Options) { o.MaxBatch = 0 }},
		{"max-k", func(o *Options) { o.MaxK = -5 }},
		{"max-request-tokens", func(o *Options) { o.MaxRequestTokens = 0 }},
		{"allowed-host", func(o *Options) { o.AllowedHosts = []string{"http://x"} }},
	} {
		o := DefaultOptions()
		c.set(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--"+c.flag) {
			t.Errorf("%s: %v", c.flag, err)
		}
	}
	// New fills zero fields but refuses negative ones.
	f := newFixture(t, Options{})
	if _, err := New(Options{MaxBatch: -1}, f.comps); err == nil {
		t.Error("New accepted MaxBatch -1")
	}
}

// Acceptance 1 (limits): over-limit requests are 4xx errors naming the
// limit, before any model work.
func TestRequestLimits(t *testing.T) {
	f := newFixture(t, Options{MaxSnippets: 8, MaxRequestTokens: 200, MaxK: 50})
	long := strings.Repeat("hematoxylin stains nuclei blue ", 40)
	cases := []struct {
		path  string
		body  any
		code  int
		limit string
	}{
		{"/v1/filter", map[string]any{"question": "q", "snippets": make([]string, 9)}, 413, "max-snippets"},
		{"/v1/filter", map[string]any{"question": "q", "snippets": []string{long}}, 413, "max-request-tokens"},
		{"/v1/pipeline", map[string]any{"question": "q", "k": 51}, 400, "max-k"},
		{"/v1/embeddings", map[string]any{"input": make([]string, 9)}, 413, "max-snippets"},
	}
	for _, c := range cases {
		code, b := f.call(t, "POST", c.path, c.body, "")
		if code != c.code || !strings.Contains(string(b), c.limit) {
			t.Errorf("%s: HTTP %d %s, want %d naming %s", c.path, code, b, c.code, c.limit)
		}
	}
	before := f.srv.Metrics().batchCount("filter")
	if before != 0 {
		t.Errorf("%d filter batches ran for refused requests", before)
	}
}

// A request whose timeout expires stops its model work: no micro-batch
// runs for it after the 503.
func TestTimeoutStopsModelWork(t *testing.T) {
	f := newFixture(t, Options{RequestTimeout: 300 * time.Millisecond, MaxBatch: 1, MaxRequestTokens: 1 << 20, MaxSnippets: 512})
	snips := make([]string, 400)
	for i := range snips {
		snips[i] = fmt.Sprintf("snippet %d about hematoxylin and eosin staining of sections", i)
	}
	code, b := f.call(t, "POST", "/v1/filter", map[string]any{"question": "how are sections stained?", "snippets": snips}, "")
	if code != 503 || !strings.Contains(string(b), "request-timeout") {
		t.Fatalf("HTTP %d %s, want 503 naming request-timeout", code, b)
	}
	n := f.srv.Metrics().batchCount("filter")
	if n == 0 || n >= 400 {
		t.Fatalf("%d micro-batches before the timeout, want some but not all 400", n)
	}
	// The handler has returned, so its batcher calls are over.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	<-ctx.Done()
	if m := f.srv.Metrics().batchCount("filter"); m != n {
		t.Errorf("%d micro-batches after the 503, %d at it", m, n)
	}
}

// ctxFilter blocks until its request's context ends, like model work that
// checks the context at every micro-batch.
type ctxFilter struct{ entered chan struct{} }

func (c ctxFilter) Predict(ctx context.Context, q string, s []string) ([]float64, error) {
	close(c.entered)
	<-ctx.Done()
	return nil, ctx.Err()
}

// SIGTERM (Serve's context) with work that would outlast ShutdownTimeout:
// the work is cancelled, its client gets a 503, and Serve returns.
func TestShutdownCancelsLongWork(t *testing.T) {
	f := newFixture(t, Options{})
	comps := *f.comps
	cf := ctxFilter{entered: make(chan struct{})}
	comps.Filter = cf
	s, err := New(Options{ShutdownTimeout: 500 * time.Millisecond, RequestTimeout: time.Hour}, &comps)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	codes := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/v1/filter", "application/json", strings.NewReader(`{"question":"q","snippets":["a"]}`))
		if err != nil {
			codes <- 0
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}()
	<-cf.entered
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return after the shutdown timeout")
	}
	if c := <-codes; c != 503 {
		t.Errorf("in-flight request: HTTP %d, want 503", c)
	}
}
