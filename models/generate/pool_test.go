package generate

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

// fakeChat serves /v1/chat/completions deterministically: the reply is a
// function of the prompt and the request's seed, as a sampling server
// with a fixed seed is. The first failFirst requests answer 503 (retried
// by the client); delay slows every reply.
func fakeChat(t *testing.T, calls *atomic.Int64, failFirst int64, delay time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
			Seed     int64                      `json:"seed"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if calls.Add(1) <= failFirst {
			http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
			return
		}
		time.Sleep(delay)
		h := fnv.New64a()
		fmt.Fprintf(h, "%s|%d", req.Messages[len(req.Messages)-1].Content, req.Seed)
		text := fmt.Sprintf("answer %x", h.Sum64())
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, text)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Two servers behind a Pool generate what one server generates (same
// texts in prompt order, N samples per prompt), both take prompts, and a
// 503 on the second server is retried by its client.
func TestPoolEqualsOneServer(t *testing.T) {
	var c1, c2, c0 atomic.Int64
	one := fakeChat(t, &c0, 0, 0)
	s1, s2 := fakeChat(t, &c1, 0, 5*time.Millisecond), fakeChat(t, &c2, 1, 5*time.Millisecond)
	opt := openai.Options{Model: "toy", Backoff: time.Millisecond}
	var prompts []string
	for i := range 23 {
		prompts = append(prompts, fmt.Sprintf("Write a passage answering question %d.", i))
	}
	gopt := lm.Options{MaxNewTokens: 16, Temperature: 0.7, Seed: 42, N: 2}
	ctx := context.Background()
	single, err := OpenList("openai:"+one.URL+"/v1", "go", opt, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, werrs := single.Generate(ctx, prompts, gopt)
	pool, err := OpenList("openai:"+s1.URL+"/v1, openai:"+s2.URL+"/v1#toy", "go", opt, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pool.(*Pool); !ok || !strings.HasPrefix(pool.Name(), "pool(openai:") {
		t.Fatalf("OpenList of two servers = %T %s, want a *Pool", pool, pool.Name())
	}
	got, gerrs := pool.Generate(ctx, prompts, gopt)
	for i := range prompts {
		if werrs[i] != nil || gerrs[i] != nil {
			t.Fatalf("prompt %d: errors %v / %v", i, werrs[i], gerrs[i])
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pool outputs differ from one server's:\n%v\n%v", got, want)
	}
	if c1.Load() == 0 || c2.Load() < 2 || c1.Load()+c2.Load() != int64(2*len(prompts))+1 {
		t.Errorf("server requests %d and %d, want both used and %d in all (one retried 503)", c1.Load(), c2.Load(), 2*len(prompts)+1)
	}
}

func TestParseGeneratorSpecs(t *testing.T) {
	for _, c := range []struct {
		in, err string
		n       int
	}{
		{"ict", "", 1},
		{"openai:http://a:1/v1,openai:http://b:2/v1#m", "", 2},
		{"openai:http://a:1/v1,t5:dir", "one openai:<url> per server", 0},
		{"openai:http://a:1/v1,", "unknown kind", 0},
	} {
		specs, err := ParseGeneratorSpecs(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || len(specs) != c.n {
			t.Errorf("%q: %d specs, %v; want %d", c.in, len(specs), err, c.n)
		}
	}
}
