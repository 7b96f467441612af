package lm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/openai"
)

func fixture(t *testing.T, name string) string {
	return testutil.SharedPath(t, "fixtures/"+name)
}

func TestCheckText(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{" a query \n", "a query", nil},
		{"", "", ErrEmpty},
		{" \t\n", "", ErrEmpty},
		{"bad \xff byte", "", ErrNotUTF8},
		{"replaced \ufffd", "", ErrNotUTF8},
	}
	for _, tc := range tests {
		got, err := CheckText(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("CheckText(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// A loopback server that speaks /v1/chat/completions: the prompt's last
// word picks the behaviour.
func TestOpenAIPerItemErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var body strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := r.Body.Read(buf)
			body.Write(buf[:n])
			if err != nil {
				break
			}
		}
		b := body.String()
		content := `"a generated passage"`
		switch {
		case strings.Contains(b, "EMPTY"):
			content = `""`
		case strings.Contains(b, "BADUTF"):
			content = "\"broken \xff bytes\""
		case strings.Contains(b, "FAIL"):
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		case strings.Contains(b, "SLOW"):
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":` + content + `},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	g := &OpenAI{Client: openai.New(srv.URL, openai.Options{Timeout: 200 * time.Millisecond, MaxRetries: 1, Backoff: 10 * time.Millisecond, Concurrency: 2})}
	prompts := []string{"write OK", "write EMPTY", "write BADUTF", "write FAIL", "write SLOW", "write OK too"}
	outs, errs := g.Generate(context.Background(), prompts, Options{N: 2, Temperature: 0.7})
	wantErr := []string{"", "empty", "UTF-8", "HTTP 500", "deadline", ""}
	for i := range prompts {
		if wantErr[i] == "" {
			if errs[i] != nil || len(outs[i]) != 2 || outs[i][0] != "a generated passage" {
				t.Errorf("prompt %d: outs %q err %v", i, outs[i], errs[i])
			}
			continue
		}
		if errs[i] == nil || !strings.Contains(errs[i].Error(), wantErr[i]) {
			t.Errorf("prompt %d: err %v, want one mentioning %q", i, errs[i], wantErr[i])
		}
	}
}

// Sampling is per prompt: a prompt gives the same texts alone or in a batch,
// and another seed gives other texts.
func TestT5GeneratorDeterministicPerPrompt(t *testing.T) {
	g, err := LoadT5(fixture(t, "t5-flan-tiny"), "go")
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{MaxNewTokens: 6, Temperature: 0.7, Seed: 1, N: 2}
	prompts := []string{"question: what causes gout?", "question: aspirin dose"}
	outs, errs := g.Generate(context.Background(), prompts, opt)
	alone, aerrs := g.Generate(context.Background(), prompts[1:], opt)
	if strings.Join(outs[1], "|") != strings.Join(alone[0], "|") || (errs[1] == nil) != (aerrs[0] == nil) {
		t.Fatalf("batch %q (%v) vs alone %q (%v)", outs[1], errs[1], alone[0], aerrs[0])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, cerrs := g.Generate(ctx, prompts, opt)
	for i, e := range cerrs {
		if !errors.Is(e, context.Canceled) {
			t.Errorf("cancelled prompt %d: err %v", i, e)
		}
	}
}

// Stop strings cut each text before their first occurrence; top_k, which
// models/t5 cannot sample with, fails the item by name.
func TestT5GenerateStopAndTopK(t *testing.T) {
	g, err := LoadT5(fixture(t, "t5-flan-tiny"), "go")
	if err != nil {
		t.Fatal(err)
	}
	prompt := []string{"question: what causes gout?"}
	full, errs := g.Generate(context.Background(), prompt, Options{MaxNewTokens: 8})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	text := full[0][0]
	if len(text) < 3 {
		t.Skipf("greedy text %q too short to cut", text)
	}
	stop := text[len(text)/2:]
	want, _ := CheckText(text[:strings.Index(text, stop)])
	cut, errs := g.Generate(context.Background(), prompt, Options{MaxNewTokens: 8, Stop: []string{stop}})
	if want == "" {
		if !errors.Is(errs[0], ErrEmpty) {
			t.Fatalf("stop %q: %q, %v; want ErrEmpty", stop, cut[0], errs[0])
		}
	} else if errs[0] != nil || len(cut[0]) != 1 || cut[0][0] != want {
		t.Fatalf("stop %q on %q: got %q, %v; want %q", stop, text, cut[0], errs[0], want)
	}
	_, errs = g.Generate(context.Background(), prompt, Options{MaxNewTokens: 8, TopK: 5, Temperature: 0.7})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "top_k") {
		t.Fatalf("top_k on t5: err %v, want a refusal naming top_k", errs[0])
	}
}
