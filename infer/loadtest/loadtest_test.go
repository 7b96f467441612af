package loadtest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	// 1..10: rank ⌈p/100·10⌉.
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	cases := []struct{ p, want float64 }{{50, 5}, {95, 10}, {90, 9}, {99, 10}, {10, 1}, {0, 1}, {100, 10}, {51, 6}}
	for _, c := range cases {
		if got := Percentile(v, c.p); got != c.want {
			t.Errorf("Percentile(1..10, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("empty input should give NaN")
	}
	// Summarize: mean of 1..4 is 2.5; 8 requests over 2 s is 4 req/s.
	r := Summarize("x", []float64{4, 1, 3, 2, 1, 2, 3, 4}, 2)
	if r.MeanMs != 2.5 || r.P50Ms != 2 || r.P99Ms != 4 || r.MaxMs != 4 || r.Throughput != 4 || r.Requests != 8 {
		t.Errorf("Summarize = %+v", r)
	}
}

func TestParseGauge(t *testing.T) {
	text := "# HELP process_resident_memory_bytes x\n# TYPE process_resident_memory_bytes gauge\n" +
		"process_resident_memory_bytes_total 9\nprocess_resident_memory_bytes 1.5e+07\ngo_goroutines 3\n"
	cases := []struct {
		name string
		want int64
		ok   bool
	}{
		{"process_resident_memory_bytes", 15000000, true},
		{"go_goroutines", 3, true},
		{"absent_metric", 0, true},
	}
	for _, c := range cases {
		got, err := ParseGauge(strings.NewReader(text), c.name)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseGauge(%s) = %d, %v", c.name, got, err)
		}
	}
	if _, err := ParseGauge(strings.NewReader("x abc\n"), "x"); err == nil {
		t.Error("bad value accepted")
	}
}

// A fake server: /ok answers 200, /fail 500; /metrics reports an RSS that
// grows by 1000 bytes per scrape. Every answered request is counted by the
// report (requests cut by the deadline are left out on both sides only if
// the handler never answered).
func TestRunCountsRequestsAndErrors(t *testing.T) {
	var ok, fail, scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			if r.Header.Get("Authorization") != "Bearer tk" {
				w.WriteHeader(401)
				return
			}
			fmt.Fprintf(w, "process_resident_memory_bytes %d\n", 100000+1000*scrapes.Add(1)-1000)
		case "/ok":
			if r.Method != "POST" || r.Header.Get("Content-Type") != "application/json" {
				w.WriteHeader(400)
				return
			}
			ok.Add(1)
			w.Write([]byte(`{}`))
		case "/fail":
			fail.Add(1)
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	rep, err := Run(context.Background(), Options{
		BaseURL: srv.URL, Duration: 300 * time.Millisecond, Concurrency: 3, Token: "tk",
		Endpoints: []Endpoint{{Name: "ok", Path: "/ok", Body: []byte(`{}`)}, {Name: "fail", Path: "/fail", Body: []byte(`{}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	okRep, failRep := rep.Endpoints[0], rep.Endpoints[1]
	if okRep.Requests == 0 || okRep.Errors != 0 || okRep.Served != okRep.Requests || int64(okRep.Requests) > ok.Load() || okRep.Goodput <= 0 {
		t.Errorf("ok endpoint %+v (server saw %d)", okRep, ok.Load())
	}
	if failRep.Requests == 0 || failRep.Errors != failRep.Requests || !strings.Contains(failRep.FirstError, "HTTP 500") {
		t.Errorf("fail endpoint %+v", failRep)
	}
	if rep.Errors != failRep.Errors || rep.Concurrency != 3 {
		t.Errorf("report %+v", rep)
	}
	if rep.RSSStart != 100000 || rep.RSSEnd != 101000 || math.Abs(rep.RSSGrowth-0.01) > 1e-12 {
		t.Errorf("rss %d → %d growth %v, want 100000 → 101000, 0.01", rep.RSSStart, rep.RSSEnd, rep.RSSGrowth)
	}
	// A wrong token fails the first scrape: the run does not start.
	if _, err := Run(context.Background(), Options{BaseURL: srv.URL, Duration: time.Millisecond}); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("no token: %v", err)
	}
}

// A refusal with Retry-After (admission control) is counted apart from
// errors, and the client waits before its next request: one client over
// 1.5 s against a server that always answers 429 "Retry-After: 1" sends 2
// requests, not thousands.
func TestRunHonoursRetryAfter(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			return
		}
		n.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(429)
	}))
	defer srv.Close()
	rep, err := Run(context.Background(), Options{BaseURL: srv.URL, Duration: 1500 * time.Millisecond, Concurrency: 1,
		Endpoints: []Endpoint{{Name: "busy", Path: "/busy", Body: []byte(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	e := rep.Endpoints[0]
	if e.Refused != 2 || e.Errors != 0 || e.Served != 0 || e.Goodput != 0 || n.Load() != 2 {
		t.Errorf("report %+v, server saw %d requests; want 2 refused", e, n.Load())
	}
}
