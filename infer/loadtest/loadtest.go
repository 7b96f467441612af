// Package loadtest drives a running `ragforge serve` over HTTP for a bounded
// time with a fixed number of concurrent clients (closed loop: each client
// sends its next request when the previous one is answered) and reports,
// per endpoint, throughput, goodput (served requests per second), latency
// percentiles, refusals and errors, plus the
// server's resident memory at the start and the end (its /metrics
// process_resident_memory_bytes). It is the library of `ragforge bench
// serve`; it prints nothing.
package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Endpoint is one request the clients send: Body is POSTed as JSON to
// BaseURL+Path (GET when Body is nil).
type Endpoint struct {
	Name string
	Path string
	Body []byte
}

// Options configures Run. Zero fields take the defaults: 30 s, 32 clients,
// DefaultEndpoints().
type Options struct {
	BaseURL     string // e.g. http://127.0.0.1:8080
	Duration    time.Duration
	Concurrency int
	Endpoints   []Endpoint
	Token       string       // sent as "Authorization: Bearer <token>" when set
	Client      *http.Client // default: a client with 60 s timeout and Concurrency idle connections per host
}

// DefaultEndpoints returns the two endpoints of the acceptance run:
// /v1/retrieve (bm25 mode, k 5) and /v1/filter (one question,
// two snippets).
func DefaultEndpoints() []Endpoint {
	return []Endpoint{
		{Name: "retrieve", Path: "/v1/retrieve", Body: []byte(`{"query":"hematoxylin and eosin staining of tissue sections","mode":"bm25","k":5}`)},
		{Name: "filter", Path: "/v1/filter", Body: []byte(`{"question":"How long are tissue sections stained with hematoxylin?","snippets":["Stain the sections in Harris hematoxylin for 5 minutes.","Fix the specimen in 10% neutral buffered formalin."]}`)},
	}
}

// EndpointReport is one endpoint's result. Latencies are in milliseconds,
// percentiles by the nearest-rank method over successful and failed
// requests alike; Throughput is answered requests per second of the run.
type EndpointReport struct {
	Name     string `json:"name"`
	Requests int    `json:"requests"`
	Served   int    `json:"served"` // 2xx answers
	// Refused counts 429 and 503 answers carrying Retry-After (the
	// server's admission control); the client waits that long, at most
	// MaxRetryAfter, before its next request, as OpenAI's clients do.
	Refused    int     `json:"refused"`
	Errors     int     `json:"errors"` // transport errors and other non-2xx answers
	Throughput float64 `json:"throughput_rps"`
	Goodput    float64 `json:"goodput_rps"` // Served per second of the run
	MeanMs     float64 `json:"mean_ms"`
	P50Ms      float64 `json:"p50_ms"`
	P95Ms      float64 `json:"p95_ms"`
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	FirstError string  `json:"first_error,omitempty"`
}

// Report is the result of Run. RSS values are the server's resident memory
// in bytes (0 when its /metrics has none); RSSGrowth is End/Start − 1.
type Report struct {
	Duration    float64          `json:"duration_s"` // measured wall time
	Concurrency int              `json:"concurrency"`
	Endpoints   []EndpointReport `json:"endpoints"`
	Errors      int              `json:"errors"`
	RSSStart    int64            `json:"rss_start_bytes"`
	RSSEnd      int64            `json:"rss_end_bytes"`
	RSSGrowth   float64          `json:"rss_growth"`
}

type sample struct {
	ms         float64
	err        string        // "" when ok
	refused    bool          // 429/503 with Retry-After
	retryAfter time.Duration // the wait it asked for
}

// MaxRetryAfter caps a refused client's wait before its next request.
const MaxRetryAfter = 10 * time.Second

// Run drives the server for opt.Duration (or until ctx ends) with
// opt.Concurrency clients; client i starts at endpoint i mod n and cycles
// through the endpoints, so the load is spread evenly. The server's RSS is
// scraped before the first and after the last request. Requests cut off by
// the end of the run are not counted. Errors: an empty BaseURL, a /metrics
// scrape failure at the start (the server is not reachable).
func Run(ctx context.Context, opt Options) (*Report, error) {
	if opt.BaseURL == "" {
		return nil, errors.New("loadtest: BaseURL is required")
	}
	base := strings.TrimRight(opt.BaseURL, "/")
	if opt.Duration <= 0 {
		opt.Duration = 30 * time.Second
	}
	if opt.Concurrency <= 0 {
		opt.Concurrency = 32
	}
	if len(opt.Endpoints) == 0 {
		opt.Endpoints = DefaultEndpoints()
	}
	client := opt.Client
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: opt.Concurrency, MaxConnsPerHost: opt.Concurrency}}
	}
	rssStart, err := ScrapeRSS(ctx, client, base, opt.Token)
	if err != nil {
		return nil, fmt.Errorf("loadtest: server not ready: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, opt.Duration)
	defer cancel()
	samples := make([][]sample, len(opt.Endpoints))
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for c := range opt.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([][]sample, len(opt.Endpoints))
			for i := c; rctx.Err() == nil; i++ {
				e := i % len(opt.Endpoints)
				s, counted := do(rctx, client, base, opt.Token, opt.Endpoints[e])
				if counted {
					local[e] = append(local[e], s)
				}
				if s.refused {
					select {
					case <-time.After(min(s.retryAfter, MaxRetryAfter)):
					case <-rctx.Done():
					}
				}
			}
			mu.Lock()
			for e := range local {
				samples[e] = append(samples[e], local[e]...)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	rep := &Report{Duration: elapsed, Concurrency: opt.Concurrency, RSSStart: rssStart}
	for e, ep := range opt.Endpoints {
		r := Summarize(ep.Name, samplesMs(samples[e]), elapsed)
		for _, s := range samples[e] {
			switch {
			case s.refused:
				r.Refused++
			case s.err == "":
				r.Served++
			default:
				r.Errors++
				if r.FirstError == "" {
					r.FirstError = s.err
				}
			}
		}
		if elapsed > 0 {
			r.Goodput = float64(r.Served) / elapsed
		}
		rep.Errors += r.Errors
		rep.Endpoints = append(rep.Endpoints, r)
	}
	if rep.RSSEnd, err = ScrapeRSS(ctx, client, base, opt.Token); err != nil {
		return rep, fmt.Errorf("loadtest: scrape after the run: %w", err)
	}
	if rep.RSSStart > 0 {
		rep.RSSGrowth = float64(rep.RSSEnd)/float64(rep.RSSStart) - 1
	}
	return rep, nil
}

func samplesMs(s []sample) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = x.ms
	}
	return out
}

// do sends one request; counted is false when the run ended during it.
func do(ctx context.Context, client *http.Client, base, token string, e Endpoint) (sample, bool) {
	method := http.MethodGet
	var body io.Reader
	if e.Body != nil {
		method = http.MethodPost
		body = bytes.NewReader(e.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+e.Path, body)
	if err != nil {
		return sample{err: err.Error()}, true
	}
	if e.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	t := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return sample{}, false
		}
		return sample{ms: msSince(t), err: err.Error()}, true
	}
	_, cerr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ms := msSince(t)
	if cerr != nil && ctx.Err() != nil {
		return sample{}, false
	}
	if resp.StatusCode/100 != 2 {
		s := sample{ms: ms, err: fmt.Sprintf("%s %s: HTTP %d", method, e.Path, resp.StatusCode)}
		if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && ra >= 0 && (resp.StatusCode == 429 || resp.StatusCode == 503) {
			s.refused, s.retryAfter = true, time.Duration(ra)*time.Second
		}
		return s, true
	}
	return sample{ms: ms}, true
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }

// Summarize computes an endpoint's latency statistics (ms) and throughput
// (len(ms)/seconds). Errors are left at 0 for the caller.
func Summarize(name string, ms []float64, seconds float64) EndpointReport {
	r := EndpointReport{Name: name, Requests: len(ms)}
	if len(ms) == 0 {
		return r
	}
	sorted := append([]float64(nil), ms...)
	sort.Float64s(sorted)
	var sum float64
	for _, v := range sorted {
		sum += v
	}
	r.MeanMs = sum / float64(len(sorted))
	r.P50Ms = Percentile(sorted, 50)
	r.P95Ms = Percentile(sorted, 95)
	r.P99Ms = Percentile(sorted, 99)
	r.MaxMs = sorted[len(sorted)-1]
	if seconds > 0 {
		r.Throughput = float64(len(ms)) / seconds
	}
	return r
}

// Percentile is the nearest-rank percentile of ascending sorted values:
// the value at rank ⌈p/100 · n⌉ (1-based), the smallest value for p ≤ 0.
// It returns NaN for no values.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// ScrapeRSS reads process_resident_memory_bytes from base+"/metrics"
// (Prometheus text format); 0 when the server does not export it. Errors:
// transport errors, a non-200 answer, an unparsable value.
func ScrapeRSS(ctx context.Context, client *http.Client, base, token string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	return ParseGauge(resp.Body, "process_resident_memory_bytes")
}

// ParseGauge returns the value of an unlabelled sample name in a Prometheus
// text exposition (0 when absent). Values may be written as floats
// ("1.5e+07"). Errors: an unparsable value, a read error.
func ParseGauge(r io.Reader, name string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name+" ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, fmt.Errorf("metric %s: no value", name)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", name, err)
		}
		return int64(v), nil
	}
	return 0, sc.Err()
}
