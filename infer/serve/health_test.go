package serve

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragforge/ragforge/models/openai"
)

// Issue 30: /healthz said ok after the remote --llm server went down, while
// every route needing it failed. It now asks the remote (cached per TTL) and
// says 503 naming it until it answers again.
func TestHealthzRemoteLLMGoesDown(t *testing.T) {
	f := newFixture(t, Options{})
	var gets atomic.Int32 // the handler runs on the server's goroutine
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		if r.URL.Path != "/v1/models" {
			t.Errorf("health check asked %s, want /v1/models", r.URL.Path)
		}
		w.Write([]byte(`{"data":[]}`))
	}))
	ttl := 200 * time.Millisecond
	f.comps.LLMHealth = &RemoteCheck{Check: openai.New(remote.URL+"/v1", openai.Options{}).Preflight, TTL: ttl}
	health := func() (int, map[string]any) {
		t.Helper()
		code, b := f.call(t, "GET", "/healthz", nil, "")
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("healthz body %s: %v", b, err)
		}
		return code, m
	}
	for _, step := range []struct {
		name     string
		before   func()
		code     int
		status   string
		failing  string // substring of failing.llm
		wantGets int32
	}{
		{"remote up", func() {}, 200, "ok", "", 1},
		{"cached within the TTL", func() {}, 200, "ok", "", 1},
		{"remote down, cached answer still fresh", remote.Close, 200, "ok", "", 1},
		{"remote down after the TTL", func() { time.Sleep(ttl + 50*time.Millisecond) }, 503, "unavailable", remote.URL, 1},
	} {
		step.before()
		code, m := health()
		if code != step.code || m["status"] != step.status {
			t.Errorf("%s: HTTP %d status %v, want %d %q: %v", step.name, code, m["status"], step.code, step.status, m)
		}
		failing, _ := m["failing"].(map[string]any)
		if got, _ := failing["llm"].(string); step.failing != "" && !strings.Contains(got, step.failing) || step.failing == "" && failing != nil {
			t.Errorf("%s: failing %v, want the llm naming %q", step.name, m["failing"], step.failing)
		}
		if n := gets.Load(); n != step.wantGets {
			t.Errorf("%s: the remote got %d GETs, want %d (one per TTL)", step.name, n, step.wantGets)
		}
	}
}
