package serve

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Metrics holds the server's counters and histograms and writes them in
// the Prometheus text exposition format (version 0.0.4):
//
//	ragforge_http_requests_total{endpoint,code}            counter
//	ragforge_http_request_duration_seconds{endpoint}       histogram (seconds)
//	ragforge_http_in_flight_requests                       gauge
//	ragforge_batch_size{batcher}                           histogram (items per model call)
//	process_resident_memory_bytes                          gauge, from /proc/self/statm
//	go_goroutines, go_memstats_heap_inuse_bytes            gauges
//
// endpoint is the route pattern ("POST /v1/retrieve"), never the raw URL,
// so label cardinality stays bounded. It is safe for concurrent use.
type Metrics struct {
	mu        sync.Mutex
	requests  map[[2]string]uint64 // endpoint, code
	durations map[string]*histogram
	batches   map[string]*histogram
	inFlight  int64
}

// batchCount is the number of batches a batcher has run.
func (m *Metrics) batchCount(name string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.batches[name]; h != nil {
		return h.n
	}
	return 0
}

// Histogram bucket upper bounds.
var (
	DurationBuckets  = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	BatchSizeBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128}
)

type histogram struct {
	bounds []float64
	counts []uint64 // per bucket (not cumulative); last = +Inf
	sum    float64
	n      uint64
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound ≥ v: Prometheus buckets are le (≤)
	h.counts[i]++
	h.sum += v
	h.n++
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{requests: map[[2]string]uint64{}, durations: map[string]*histogram{}, batches: map[string]*histogram{}}
}

// ObserveRequest counts one finished request of endpoint with HTTP status
// code and its duration in seconds.
func (m *Metrics) ObserveRequest(endpoint string, code int, seconds float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[2]string{endpoint, strconv.Itoa(code)}]++
	h := m.durations[endpoint]
	if h == nil {
		h = newHistogram(DurationBuckets)
		m.durations[endpoint] = h
	}
	h.observe(seconds)
}

// ObserveBatch records a model call of n items by the named batcher.
func (m *Metrics) ObserveBatch(batcher string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.batches[batcher]
	if h == nil {
		h = newHistogram(BatchSizeBuckets)
		m.batches[batcher] = h
	}
	h.observe(float64(n))
}

// BatchStats returns the number of batches and of items the named batcher
// ran (0, 0 when it never ran).
func (m *Metrics) BatchStats(batcher string) (batches, items uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.batches[batcher]; h != nil {
		return h.n, uint64(h.sum)
	}
	return 0, 0
}

// RequestCount returns the count of endpoint's requests answered with code.
func (m *Metrics) RequestCount(endpoint string, code int) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[[2]string{endpoint, strconv.Itoa(code)}]
}

func (m *Metrics) addInFlight(d int64) {
	m.mu.Lock()
	m.inFlight += d
	m.mu.Unlock()
}

// WriteTo writes all metrics in the Prometheus text format, families and
// label sets sorted.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	m.mu.Lock()
	b.WriteString("# HELP ragforge_http_requests_total HTTP requests answered, by route and status code.\n# TYPE ragforge_http_requests_total counter\n")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "ragforge_http_requests_total{endpoint=%s,code=%s} %d\n", quote(k[0]), quote(k[1]), m.requests[k])
	}
	writeHistograms(&b, "ragforge_http_request_duration_seconds", "Request latency in seconds, by route.", "endpoint", m.durations)
	fmt.Fprintf(&b, "# HELP ragforge_http_in_flight_requests Requests being served.\n# TYPE ragforge_http_in_flight_requests gauge\nragforge_http_in_flight_requests %d\n", m.inFlight)
	writeHistograms(&b, "ragforge_batch_size", "Items per batched model call (micro-batching), by batcher.", "batcher", m.batches)
	m.mu.Unlock()
	if rss, err := ResidentMemory(); err == nil {
		fmt.Fprintf(&b, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %d\n", rss)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(&b, "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
	fmt.Fprintf(&b, "# HELP go_memstats_heap_inuse_bytes Bytes in in-use heap spans.\n# TYPE go_memstats_heap_inuse_bytes gauge\ngo_memstats_heap_inuse_bytes %d\n", ms.HeapInuse)
	return b.WriteTo(w)
}

func writeHistograms(b *bytes.Buffer, name, help, label string, hs map[string]*histogram) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	names := make([]string, 0, len(hs))
	for k := range hs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		h := hs[k]
		var cum uint64
		for i, c := range h.counts {
			cum += c
			le := "+Inf"
			if i < len(h.bounds) {
				le = formatFloat(h.bounds[i])
			}
			fmt.Fprintf(b, "%s_bucket{%s=%s,le=%s} %d\n", name, label, quote(k), quote(le), cum)
		}
		fmt.Fprintf(b, "%s_sum{%s=%s} %s\n", name, label, quote(k), formatFloat(h.sum))
		fmt.Fprintf(b, "%s_count{%s=%s} %d\n", name, label, quote(k), h.n)
	}
}

func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// quote writes a label value with the escapes of the text format (\\, \",
// \n).
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// ResidentMemory returns the process's resident set size in bytes: the
// second field of /proc/self/statm (pages) times the page size. Errors: no
// /proc (not Linux) or an unparsable file.
func ResidentMemory() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	return parseStatm(b, os.Getpagesize())
}

func parseStatm(b []byte, pageSize int) (int64, error) {
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/self/statm: %d fields, want ≥ 2", len(f))
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/self/statm: field 2 (resident): %w", err)
	}
	return pages * int64(pageSize), nil
}
