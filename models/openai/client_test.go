package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func f(v float64) *float64 { return &v }

// echoServer answers completions like vLLM with echo: one token per word.
func echoServer(t *testing.T, promptOnlyGenerated bool) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req CompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var lp Logprobs
		if promptOnlyGenerated {
			// llama.cpp / Ollama: only the generated token.
			lp = Logprobs{Tokens: []string{" x"}, TokenLogprobs: []*float64{f(-0.5)}, TextOffset: []int{len(req.Prompt)}}
		} else {
			words := strings.SplitAfter(req.Prompt, " ")
			off := 0
			for i, wd := range words {
				lp.Tokens = append(lp.Tokens, wd)
				lp.TextOffset = append(lp.TextOffset, off)
				off += len(wd)
				if i == 0 {
					lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
				} else {
					lp.TokenLogprobs = append(lp.TokenLogprobs, f(-float64(i)))
				}
			}
			lp.Tokens = append(lp.Tokens, "!")
			lp.TokenLogprobs = append(lp.TokenLogprobs, f(-9))
			lp.TextOffset = append(lp.TextOffset, off)
		}
		json.NewEncoder(w).Encode(CompletionResponse{Choices: []CompletionChoice{{Text: "!", Logprobs: &lp}}})
	}))
}

func TestTargetLogprobs(t *testing.T) {
	srv := echoServer(t, false)
	defer srv.Close()
	c := New(srv.URL, Options{})
	// tokens: "Q: " "a " "b " "c" → prompt "Q: a " is 2 tokens, target "b c" 2 tokens.
	got, err := c.TargetLogprobs(context.Background(), "Q: a ", "b c")
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{-2, -3}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v want %v", got, want)
	}
}

// vLLM echoes Llama 3's bos as "<|begin_of_text|>" (null log-probability),
// a token the text does not hold: it is skipped, the rest must spell the
// text; any other stray token is refused.
func TestTargetFromEchoLeadingSpecial(t *testing.T) {
	lp := &Logprobs{Tokens: []string{"<|begin_of_text|>", "Q: ", "a ", "b ", "c", "!"},
		TokenLogprobs: []*float64{nil, f(-1), f(-2), f(-3), f(-4), f(-9)}}
	got, err := TargetFromEcho(lp, "Q: a ", "Q: a b c")
	if err != nil || len(got) != 2 || got[0] != -3 || got[1] != -4 {
		t.Fatalf("got %v, %v; want [-3 -4]", got, err)
	}
	lp.TokenLogprobs[0] = f(-0.5) // a scored token that is not in the text
	if _, err := TargetFromEcho(lp, "Q: a ", "Q: a b c"); !errors.Is(err, ErrNoPromptLogprobs) {
		t.Fatalf("stray scored token: %v, want ErrNoPromptLogprobs", err)
	}
}

func TestTargetLogprobsDetectsGeneratedOnly(t *testing.T) {
	srv := echoServer(t, true)
	defer srv.Close()
	c := New(srv.URL, Options{})
	_, err := c.TargetLogprobs(context.Background(), "Q: a ", "b c")
	if !errors.Is(err, ErrNoPromptLogprobs) {
		t.Fatalf("want ErrNoPromptLogprobs, got %v", err)
	}
}

func TestRetriesOn500ThenSucceeds(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			http.Error(w, `{"error":"busy"}`, 503)
			return
		}
		json.NewEncoder(w).Encode(ChatResponse{Choices: []ChatChoice{{Message: Message{Role: "assistant", Content: "ok"}}}})
	}))
	defer srv.Close()
	c := New(srv.URL+"/v1", Options{Backoff: time.Millisecond})
	text, err := c.ChatText(context.Background(), "", "hi", 8, 0)
	if err != nil || text != "ok" || calls.Load() != 3 {
		t.Fatalf("text %q err %v calls %d", text, err, calls.Load())
	}
}

func TestNoRetryOn400(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, `{"error":"bad"}`, 400)
	}))
	defer srv.Close()
	c := New(srv.URL, Options{Backoff: time.Millisecond})
	_, err := c.ChatText(context.Background(), "", "hi", 8, 0)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 400 || calls.Load() != 1 {
		t.Fatalf("err %v calls %d", err, calls.Load())
	}
}

func TestTimeoutIsRetriedThenReported(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer srv.Close()
	c := New(srv.URL, Options{Timeout: 30 * time.Millisecond, MaxRetries: 2, Backoff: time.Millisecond})
	_, err := c.ChatText(context.Background(), "", "hi", 8, 0)
	if err == nil || calls.Load() != 3 {
		t.Fatalf("err %v calls %d", err, calls.Load())
	}
}

func TestEmptyAndInvalidUTF8AnswersAreErrors(t *testing.T) {
	for _, content := range []string{"  ", "\xff\xfe"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(ChatResponse{Choices: []ChatChoice{{Message: Message{Content: content}}}})
		}))
		c := New(srv.URL, Options{})
		if _, err := c.ChatText(context.Background(), "", "hi", 8, 0); err == nil {
			t.Errorf("content %q: want error", content)
		}
		srv.Close()
	}
}

func TestConcurrencyLimit(t *testing.T) {
	var inFlight, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		json.NewEncoder(w).Encode(EmbeddingResponse{Data: []EmbeddingData{{Index: 0, Embedding: []float32{1}}}})
	}))
	defer srv.Close()
	c := New(srv.URL, Options{Concurrency: 2})
	done := make(chan error)
	for i := 0; i < 8; i++ {
		go func() { _, err := c.Embeddings(context.Background(), []string{"a"}); done <- err }()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if peak.Load() > 2 {
		t.Fatalf("peak in flight %d > 2", peak.Load())
	}
}

// A 429 with Retry-After: 1 is retried no sooner than a second later, though
// the backoff alone would retry after a millisecond.
func TestRetryAfterHonored(t *testing.T) {
	var calls atomic.Int32
	var first time.Time
	var gap time.Duration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			first = time.Now()
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":"overloaded"}`, http.StatusTooManyRequests)
			return
		}
		gap = time.Since(first)
		json.NewEncoder(w).Encode(ChatResponse{Choices: []ChatChoice{{Message: Message{Role: "assistant", Content: "ok"}}}})
	}))
	defer srv.Close()
	c := New(srv.URL+"/v1", Options{Backoff: time.Millisecond})
	if text, err := c.ChatText(context.Background(), "", "hi", 8, 0); err != nil || text != "ok" {
		t.Fatalf("text %q err %v", text, err)
	}
	if gap < time.Second {
		t.Errorf("retried after %v, want ≥ 1s (Retry-After: 1)", gap)
	}
}

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {"-1", 0}, {"soon", 0}, {"100000", MaxRetryAfter},
		{now.Add(7 * time.Second).Format(http.TimeFormat), 7 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.in, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// IsContextLength: vLLM's and OpenAI's over-context refusals, not other 400s
// or other statuses.
func TestIsContextLength(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&StatusError{Code: 400, Body: `{"error":{"message":"This model's maximum context length is 512 tokens. However, you requested 527 tokens"}}`}, true},
		{fmt.Errorf("answer: %w", &StatusError{Code: 400, Body: `{"error":{"code":"context_length_exceeded"}}`}), true},
		{&StatusError{Code: 400, Body: `{"error":{"message":"model not loaded"}}`}, false},
		{&StatusError{Code: 500, Body: "maximum context length"}, false},
		{errors.New("maximum context length"), false},
		{nil, false},
	} {
		if got := IsContextLength(tc.err); got != tc.want {
			t.Errorf("IsContextLength(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
