package label

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

var tokenRE = regexp.MustCompile(`\s*\S+`)

// echoLM is a deterministic "language model" behind /v1/completions in vLLM's
// echo convention: tokens are whitespace-led words; the first token has a null
// log-probability; a later token costs -0.5 when its word (lowercased,
// punctuation trimmed) occurred earlier in the text, else -2.5. The generated
// token is "!" with -9.
func echoLM(t *testing.T, requests *atomic.Int64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path != "/v1/completions" {
			http.Error(w, "no route "+r.URL.Path, 404)
			return
		}
		var req openai.CompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if !req.Echo || req.MaxTokens != 1 || req.Logprobs == nil || *req.Logprobs != 0 {
			t.Errorf("request echo=%v max_tokens=%d logprobs=%v; want true, 1, 0", req.Echo, req.MaxTokens, req.Logprobs)
		}
		var lp openai.Logprobs
		seen := map[string]bool{}
		off := 0
		for i, tok := range tokenRE.FindAllString(req.Prompt, -1) {
			word := strings.ToLower(strings.Trim(strings.TrimSpace(tok), ".,?!:;"))
			lp.Tokens = append(lp.Tokens, tok)
			lp.TextOffset = append(lp.TextOffset, off)
			off += len([]rune(tok))
			switch {
			case i == 0:
				lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
			case seen[word]:
				lp.TokenLogprobs = append(lp.TokenLogprobs, ptr(-0.5))
			default:
				lp.TokenLogprobs = append(lp.TokenLogprobs, ptr(-2.5))
			}
			seen[word] = true
		}
		lp.Tokens = append(lp.Tokens, "!")
		lp.TokenLogprobs = append(lp.TokenLogprobs, ptr(-9))
		lp.TextOffset = append(lp.TextOffset, off)
		json.NewEncoder(w).Encode(openai.CompletionResponse{Model: req.Model, Choices: []openai.CompletionChoice{{Text: "!", Logprobs: &lp}}})
	}))
}

// llamaLM answers like llama.cpp server / Ollama: log-probabilities of the
// generated token only, whatever echo says.
func llamaLM(requests *atomic.Int64) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		lp := openai.Logprobs{Tokens: []string{" the"}, TokenLogprobs: []*float64{ptr(-0.7)}, TextOffset: []int{0}}
		json.NewEncoder(w).Encode(openai.CompletionResponse{Choices: []openai.CompletionChoice{{Text: " the", Logprobs: &lp}}})
	}))
}

func ptr(v float64) *float64 { return &v }

func aspirinTask() Task {
	return Task{QueryID: "q1", Question: "What does aspirin block?", Target: "COX enzymes", Candidates: []data.Chunk{
		{ID: "d1#0", Text: "Aspirin blocks COX enzymes."},
		{ID: "d2#0", Text: "Paracetamol relieves fever."},
		{ID: "d3#0", Text: "COX is an enzyme."},
	}}
}

func TestHTTPScorer(t *testing.T) {
	var n atomic.Int64
	srv := echoLM(t, &n)
	defer srv.Close()
	sc := lm.NewHTTPScorer(openai.New(srv.URL, openai.Options{Model: "toy", MaxRetries: -1}))
	if want := "http:" + srv.URL + "/v1/toy"; sc.Name() != want {
		t.Errorf("Name = %q, want %q", sc.Name(), want)
	}
	// " COX" and " enzymes" are new words: -2.5 each. With the snippet first, both were seen: -0.5 each.
	for _, tc := range []struct {
		prompt string
		want   []float64
	}{
		{"Question: What does aspirin block?\nAnswer:", []float64{-2.5, -2.5}},
		{"Context: Aspirin blocks COX enzymes.\nQuestion: What does aspirin block?\nAnswer:", []float64{-0.5, -0.5}},
		{"Context: COX is an enzyme.\nQuestion: What does aspirin block?\nAnswer:", []float64{-0.5, -2.5}},
	} {
		got, err := sc.TargetLogProbs(context.Background(), tc.prompt, "COX enzymes")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) || got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Errorf("%q: logprobs %v, want %v", tc.prompt, got, tc.want)
		}
	}
}

func TestPerplexityLabelerHTTP(t *testing.T) {
	// Hand-computed: without e^2.5 = 12.18249396; d1 e^0.5 = 1.64872127;
	// d2 e^2.5 (no change); d3 e^1.5 = 4.48168907. Relative reductions:
	// d1 1-e^-2 = 0.86466472, d3 1-e^-1 = 0.63212056.
	for _, tc := range []struct {
		name     string
		margin   float64
		relative bool
		want     []string
	}{
		{"absolute 0", 0, false, []string{filter.Helpful, filter.NotHelpful, filter.Helpful}},
		{"absolute 8", 8, false, []string{filter.Helpful, filter.NotHelpful, filter.NotHelpful}},
		{"relative 0.7", 0.7, true, []string{filter.Helpful, filter.NotHelpful, filter.NotHelpful}},
		{"relative 0.6", 0.6, true, []string{filter.Helpful, filter.NotHelpful, filter.Helpful}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			srv := echoLM(t, &n)
			defer srv.Close()
			store, err := labelstore.OpenStore(filepath.Join(t.TempDir(), "l.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			sc := lm.NewHTTPScorer(openai.New(srv.URL, openai.Options{Model: "toy", Concurrency: 2}))
			l := &PerplexityLabeler{Scorer: sc, Margin: tc.margin, Relative: tc.relative, Store: store, RunID: "http"}
			got, err := l.Label(context.Background(), []Task{aspirinTask()})
			if err != nil {
				t.Fatal(err)
			}
			wantWith := []float64{math.Exp(0.5), math.Exp(2.5), math.Exp(1.5)}
			for i, g := range got {
				if g.Label != tc.want[i] || !near(g.PPLWithout, 12.18249396, 1e-7) || !near(g.PPLWith, wantWith[i], 1e-7) {
					t.Errorf("%s: %s ppl %v → %v; want %s, 12.18249396 → %v", g.ChunkID, g.Label, g.PPLWithout, g.PPLWith, tc.want[i], wantWith[i])
				}
			}
			// 4 distinct prompts: the no-snippet prompt is scored once.
			if n.Load() != 4 {
				t.Errorf("%d requests, want 4", n.Load())
			}
			recs, _ := store.List(labelstore.Filter{RunID: "http"})
			if len(recs) != 3 {
				t.Fatalf("stored %d labels, want 3", len(recs))
			}
			for _, r := range recs {
				if r.ChunkID == "d3#0" && (r.Scorer != sc.Name() || !near(r.PPLWith, 4.48168907, 1e-7) || r.Label.Label != tc.want[2]) {
					t.Errorf("stored %+v", r)
				}
			}
		})
	}
}

func TestPerplexityLabelerRejectsGeneratedOnlyLogprobs(t *testing.T) {
	var n atomic.Int64
	srv := llamaLM(&n)
	defer srv.Close()
	store, err := labelstore.OpenStore(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sc := lm.NewHTTPScorer(openai.New(srv.URL, openai.Options{MaxRetries: -1}))
	l := &PerplexityLabeler{Scorer: sc, Store: store, RunID: "llama", Concurrency: 1}
	_, err = l.Label(context.Background(), []Task{aspirinTask()})
	if !errors.Is(err, openai.ErrNoPromptLogprobs) {
		t.Fatalf("error %v, want openai.ErrNoPromptLogprobs", err)
	}
	if !strings.Contains(err.Error(), "llama.cpp") || !strings.Contains(err.Error(), `query "q1"`) {
		t.Errorf("error does not explain the server or name the query: %v", err)
	}
	if n.Load() != 1 {
		t.Errorf("labeler kept going: %d requests, want 1", n.Load())
	}
	var cached, labels int
	store.DB().QueryRow(`SELECT COUNT(*) FROM score_cache`).Scan(&cached)
	store.DB().QueryRow(`SELECT COUNT(*) FROM labels`).Scan(&labels)
	if cached != 0 || labels != 0 {
		t.Errorf("stored %d scores and %d labels from a wrong server", cached, labels)
	}
}

func TestHTTPScorerRetriesAndTimeouts(t *testing.T) {
	var n atomic.Int64
	good := echoLM(t, &n)
	defer good.Close()
	var calls atomic.Int64
	// First attempt 503, second hangs past the timeout, third is proxied to the echo LM.
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case 2:
			select {
			case <-r.Context().Done():
			case <-time.After(400 * time.Millisecond):
			}
		default:
			resp, err := http.Post(good.URL+r.URL.Path, "application/json", r.Body)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			defer resp.Body.Close()
			var v any
			json.NewDecoder(resp.Body).Decode(&v)
			json.NewEncoder(w).Encode(v)
		}
	}))
	defer flaky.Close()
	sc := lm.NewHTTPScorer(openai.New(flaky.URL, openai.Options{MaxRetries: 3, Backoff: time.Millisecond, Timeout: 100 * time.Millisecond}))
	got, err := sc.TargetLogProbs(context.Background(), "Question: x?\nAnswer:", "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != -0.5 || calls.Load() != 3 {
		t.Fatalf("logprobs %v after %d attempts; want [-0.5] after 3", got, calls.Load())
	}
}
