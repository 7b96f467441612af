package serve

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ragforge/ragforge/infer/loadtest"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
	"github.com/ragforge/ragforge/train/filtertrain"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(filepath.Dir(buildDir))
	}
	os.Exit(code)
}

func TestRetrieveModes(t *testing.T) {
	f := newFixture(t, Options{})
	tb0 := textbook[0].Text
	cases := []struct {
		name    string
		req     RetrieveRequest
		wantIDs []string // prefix of the hit ids
		score   float64  // expected score of hit 0 (NaN: unchecked)
	}{
		// "hematoxylin" occurs in tb#0 only: one BM25 match.
		{"bm25 one term", RetrieveRequest{Query: "hematoxylin", Mode: "bm25", K: 3}, []string{"tb#0"}, math.NaN()},
		// Balanced over two corpora with k 2: each corpus's best, interleaved
		// by corpus name (pubmed before textbook).
		{"bm25 balanced", RetrieveRequest{Query: "hematoxylin formalin", Mode: "bm25", K: 2}, []string{"pm#0", "tb#0"}, math.NaN()},
		// A query equal to a chunk embeds to the chunk's unit vector: cosine 1.
		{"dense identical text", RetrieveRequest{Query: tb0, Mode: "dense", K: 1, Corpora: []string{"textbook"}}, []string{"tb#0"}, 1},
		// Rank 1 in both lists: 0.3/(60+1) + 0.7/(60+1) = 1/61.
		{"hybrid rank one in both", RetrieveRequest{Query: tb0, Mode: "hybrid", K: 2, Corpora: []string{"textbook"}}, []string{"tb#0"}, 1.0 / 61},
		// HyDE fusion of q and d′ = q is q itself (renormalised): cosine 1.
		{"hyde given document", RetrieveRequest{Query: tb0, Mode: "hyde", K: 1, Corpora: []string{"textbook"}, HypotheticalDocuments: []string{tb0}}, []string{"tb#0"}, 1},
		// HyDE with the local generator writing d′: only the plumbing is
		// checked (a random model writes arbitrary text).
		{"hyde generated", RetrieveRequest{Query: "eosin", Mode: "hyde", K: 2}, nil, math.NaN()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := f.call(t, "POST", "/v1/retrieve", c.req, "")
			if code != 200 {
				t.Fatalf("HTTP %d: %s", code, body)
			}
			var resp RetrieveResponse
			decodeInto(t, body, &resp)
			if len(resp.Hits) == 0 || len(resp.Hits) < len(c.wantIDs) || len(resp.Hits) > c.req.K {
				t.Fatalf("hits %+v, want prefix %v", resp.Hits, c.wantIDs)
			}
			for i, id := range c.wantIDs {
				if resp.Hits[i].ID != id {
					t.Errorf("hit %d = %s, want %s", i, resp.Hits[i].ID, id)
				}
			}
			if !math.IsNaN(c.score) && math.Abs(resp.Hits[0].Score-c.score) > 1e-5 {
				t.Errorf("score %v, want %v", resp.Hits[0].Score, c.score)
			}
			h := resp.Hits[0]
			ch := map[string]int{"tb#0": 0, "pm#0": 0}
			if _, ok := ch[h.ID]; ok {
				want := textbook[0]
				if h.ID == "pm#0" {
					want = pubmed[0]
				}
				if h.Text != want.Text || h.DocID != want.DocID || h.End != want.End {
					t.Errorf("hit source %+v, want chunk %+v", h, want)
				}
			}
		})
	}
}

func TestFilterMatchesTrainEvaluate(t *testing.T) {
	f := newFixture(t, Options{})
	q := "how long are sections stained with hematoxylin?"
	snips := []string{textbook[0].Text, pubmed[0].Text, strings.Repeat("long snippet with many words ", 20)}
	code, body := f.call(t, "POST", "/v1/filter", FilterRequest{Question: q, Snippets: snips}, "")
	if code != 200 {
		t.Fatalf("HTTP %d: %s", code, body)
	}
	var resp FilterResponse
	decodeInto(t, body, &resp)
	// train/filtertrain's own evaluation path scores the same checkpoint.
	var exs []filter.Example
	for i, s := range snips {
		exs = append(exs, filter.Example{ID: fmt.Sprint(i), Question: filter.Instruction(s, q), Answer: filter.Helpful})
	}
	rep, err := filtertrain.Evaluate(f.filterDir, exs, filtertrain.EvalOptions{Windowing: filter.Windowing{MaxSeqLength: 64, DocStride: 16}, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != len(snips) || resp.Threshold != 0.5 {
		t.Fatalf("response %+v", resp)
	}
	for i, r := range resp.Results {
		want := rep.Predictions[i].PHelpful
		if math.Abs(r.PHelpful-want) > 1e-5 {
			t.Errorf("snippet %d: p %v, train/filtertrain.Evaluate %v", i, r.PHelpful, want)
		}
		if wantLabel := map[bool]string{true: filter.Helpful, false: filter.NotHelpful}[r.PHelpful >= 0.5]; r.Label != wantLabel {
			t.Errorf("snippet %d: label %s for p %v", i, r.Label, r.PHelpful)
		}
	}
	if rep.Predictions[2].Windows < 2 {
		t.Errorf("the long snippet should span several 64-token windows, got %d", rep.Predictions[2].Windows)
	}
}

func TestEmbeddingsMatchEncoder(t *testing.T) {
	f := newFixture(t, Options{})
	for _, body := range []any{
		map[string]any{"model": f.comps.Encoder.Name(), "input": []string{textbook[1].Text, "eosin"}},
		map[string]any{"input": "eosin", "input_type": "query"},
	} {
		code, b := f.call(t, "POST", "/v1/embeddings", body, "")
		if code != 200 {
			t.Fatalf("HTTP %d: %s", code, b)
		}
		var resp openai.EmbeddingResponse
		decodeInto(t, b, &resp)
		last := resp.Data[len(resp.Data)-1]
		want, err := f.comps.Encoder.EncodeDocs([]string{"eosin"})
		if err != nil {
			t.Fatal(err)
		}
		if len(last.Embedding) != 128 {
			t.Fatalf("dim %d, want 128 (BERT-tiny hidden size)", len(last.Embedding))
		}
		for i := range want[0] {
			if math.Abs(float64(last.Embedding[i]-want[0][i])) > 1e-5 {
				t.Fatalf("component %d: %v, encoder %v", i, last.Embedding[i], want[0][i])
			}
		}
	}
}

// The labeler's HTTP scorer (openai.Client.TargetLogprobs) against the
// server equals t5.TokenLogProbs of the same pieces after an empty encoder
// input, the convention documented on LocalLM.
func TestCompletionsEchoForPerplexityLabeler(t *testing.T) {
	f := newFixture(t, Options{})
	prompt, target := "Question: what stains nuclei?\nAnswer:", " hematoxylin stains  nuclei blue"
	code, b := f.call(t, "POST", "/v1/completions", map[string]any{"prompt": prompt + target, "max_tokens": 1, "echo": true, "logprobs": 0}, "")
	if code != 200 {
		t.Fatalf("HTTP %d: %s", code, b)
	}
	var resp openai.CompletionResponse
	decodeInto(t, b, &resp)
	lp := resp.Choices[0].Logprobs
	if lp == nil || lp.TokenLogprobs[0] != nil {
		t.Fatalf("want logprobs with a null first entry, got %+v", lp)
	}
	if got := strings.Join(lp.Tokens, ""); !strings.HasPrefix(got, prompt+target) {
		t.Fatalf("tokens spell %q", got)
	}
	c := openai.New(f.ts.URL, openai.Options{MaxRetries: -1})
	got, err := c.TargetLogprobs(context.Background(), prompt, target)
	if err != nil {
		t.Fatal(err)
	}
	// Reference: teacher-forced log-probs of all pieces given "</s>".
	sp := f.comps.Local.Local.(*lm.T5).Tokenizer.(*sentencepiece.T5).SentencePiece()
	toks := sp.Encode(prompt + target)
	ids := make([]int, len(toks))
	nPrompt := 0
	for i, tk := range toks {
		ids[i] = tk.ID
		if tk.End <= len(prompt) {
			nPrompt = i + 1
		}
	}
	ref, err := f.comps.Local.Local.(*lm.T5).Model.TokenLogProbs([][]int{{f.comps.Local.Local.(*lm.T5).Tokenizer.EOSID()}}, nil, [][]int{ids})
	if err != nil {
		t.Fatal(err)
	}
	want := ref[0][nPrompt:]
	if len(got) != len(want) {
		t.Fatalf("%d target log-probs, want %d", len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-float64(want[i])) > 1e-4 || got[i] > 0 {
			t.Errorf("target token %d: %v, t5.TokenLogProbs %v", i, got[i], want[i])
		}
	}
}

func TestGenerationEndpointsAndModels(t *testing.T) {
	f := newFixture(t, Options{})
	code, b := f.call(t, "POST", "/v1/completions", map[string]any{"prompt": "stain with", "max_tokens": 3, "stream": false}, "")
	if code != 200 {
		t.Fatalf("completions HTTP %d: %s", code, b)
	}
	var cr openai.CompletionResponse
	decodeInto(t, b, &cr)
	if cr.Usage.CompletionTokens > 3 || cr.Usage.PromptTokens < 2 {
		t.Errorf("usage %+v", cr.Usage)
	}
	// Greedy chat = greedy generation of the joined contents.
	msgs := []openai.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "what is eosin?"}}
	code, b = f.call(t, "POST", "/v1/chat/completions", openai.ChatRequest{Messages: msgs, MaxTokens: 4}, "")
	if code != 200 {
		t.Fatalf("chat HTTP %d: %s", code, b)
	}
	var ch openai.ChatResponse
	decodeInto(t, b, &ch)
	want, err := f.comps.Local.Complete(context.Background(), "be brief\n\nwhat is eosin?", 4)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Choices[0].Message.Content != want || ch.Choices[0].Message.Role != "assistant" {
		t.Errorf("chat %+v, want content %q", ch.Choices[0], want)
	}
	code, b = f.call(t, "GET", "/v1/models", nil, "")
	if code != 200 || !strings.Contains(string(b), `"kind":"filter"`) || !strings.Contains(string(b), `"kind":"retriever"`) {
		t.Errorf("models HTTP %d: %s", code, b)
	}
}

func TestPipelineStages(t *testing.T) {
	f := newFixture(t, Options{})
	th := 0.0 // keep every snippet so the answer's context is known
	code, b := f.call(t, "POST", "/v1/pipeline", PipelineRequest{Question: "how are sections stained?", K: 4, Threshold: &th, MaxTokens: 4}, "")
	if code != 200 {
		t.Fatalf("HTTP %d: %s", code, b)
	}
	var resp PipelineResponse
	decodeInto(t, b, &resp)
	var names []string
	for _, s := range resp.Stages {
		names = append(names, s.Name)
		if s.Skipped || s.Ms < 0 {
			t.Errorf("stage %+v", s)
		}
	}
	if strings.Join(names, ",") != "rationale,retrieve,rerank,filter,answer" {
		t.Errorf("stages %v", names)
	}
	if len(resp.Retrieved) != 4 || len(resp.Reranked) != 2 || len(resp.Filtered) != 2 || len(resp.Kept) != 2 {
		t.Errorf("retrieved %d, reranked %d (want rerank K 2), filtered %d, kept %d", len(resp.Retrieved), len(resp.Reranked), len(resp.Filtered), len(resp.Kept))
	}
	// Off switches skip stages; no LLM work with a given rationale.
	off := false
	code, b = f.call(t, "POST", "/v1/pipeline", PipelineRequest{Question: "q", Rationale: "hematoxylin", Mode: "bm25", K: 1, Rerank: &off, Filter: &off, Answer: &off}, "")
	if code != 200 {
		t.Fatalf("HTTP %d: %s", code, b)
	}
	decodeInto(t, b, &resp)
	if resp.Query != "hematoxylin" || len(resp.Kept) != 1 || resp.Kept[0].ID != "tb#0" {
		t.Errorf("query %q kept %+v", resp.Query, resp.Kept)
	}
	for _, s := range resp.Stages {
		if s.Name != "retrieve" && !s.Skipped {
			t.Errorf("stage %s ran", s.Name)
		}
	}
}

func TestCitations(t *testing.T) {
	kept := []Hit{{ID: "a", Corpus: "c1", DocID: "da"}, {ID: "b", Corpus: "c2", DocID: "db"}}
	cases := []struct {
		answer string
		want   string
	}{
		{"see [2] and [1], again [2]", "2:b,1:a"},
		{"[0] [3] [x] none valid", ""},
		{"no citations", ""},
	}
	for _, c := range cases {
		var got []string
		for _, ci := range Citations(c.answer, kept) {
			got = append(got, fmt.Sprintf("%d:%s", ci.N, ci.ID))
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("Citations(%q) = %v, want %s", c.answer, got, c.want)
		}
	}
	if got := ContextBlock(kept[:1]); got != "[1] " {
		t.Errorf("ContextBlock = %q", got)
	}
}

// Acceptance 3: bad requests get a 4xx JSON error, the server keeps
// serving, and no label changes.
func TestBadRequests(t *testing.T) {
	f := newFixture(t, Options{Token: "s3cret", OpenRead: true, MaxBodyBytes: 4096, MaxK: 50})
	before, err := f.store.Get(f.labelID)
	if err != nil {
		t.Fatal(err)
	}
	review := fmt.Sprintf("/v1/labels/%d/review", f.labelID)
	big := []byte(`{"query":"` + strings.Repeat("a", 5000) + `"}`)
	cases := []struct {
		name, method, path string
		body               any
		token              string
		code               int
	}{
		{"bad json", "POST", "/v1/retrieve", []byte(`{"query": "x",`), "", 400},
		{"not json", "POST", "/v1/filter", []byte(`hello`), "", 400},
		{"unknown field", "POST", "/v1/retrieve", map[string]any{"query": "x", "kk": 3}, "", 400},
		{"oversize body", "POST", "/v1/retrieve", big, "", 413},
		{"unknown mode", "POST", "/v1/retrieve", map[string]any{"query": "x", "mode": "sparse"}, "", 400},
		{"k negative", "POST", "/v1/retrieve", map[string]any{"query": "x", "k": -1}, "", 400},
		{"k absurd", "POST", "/v1/retrieve", map[string]any{"query": "x", "k": 1000000}, "", 400},
		{"k above max", "POST", "/v1/retrieve", map[string]any{"query": "x", "k": 51}, "", 400},
		{"unknown corpus", "POST", "/v1/retrieve", map[string]any{"query": "x", "corpora": []string{"nope"}}, "", 400},
		{"empty query", "POST", "/v1/retrieve", map[string]any{"query": "  "}, "", 400},
		{"filter no snippets", "POST", "/v1/filter", map[string]any{"question": "q", "snippets": []string{}}, "", 400},
		{"filter bad threshold", "POST", "/v1/filter", map[string]any{"question": "q", "snippets": []string{"s"}, "threshold": 2}, "", 400},
		{"review without token", "POST", review, map[string]any{"action": "flip", "reviewer": "me"}, "", 401},
		{"review wrong token", "POST", review, map[string]any{"action": "flip", "reviewer": "me"}, "guess", 401},
		{"undo without token", "POST", fmt.Sprintf("/v1/labels/%d/undo", f.labelID), nil, "", 401},
		{"review bad action", "POST", review, map[string]any{"action": "maybe", "reviewer": "me"}, "s3cret", 400},
		{"review unknown label", "POST", "/v1/labels/999/review", map[string]any{"action": "flip", "reviewer": "me"}, "s3cret", 404},
		{"wrong method", "GET", "/v1/retrieve", nil, "", 404},
		{"no route", "GET", "/v2/nothing", nil, "", 404},
		{"completions absurd max_tokens", "POST", "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 99999}, "", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, b := f.call(t, c.method, c.path, c.body, c.token)
			if code != c.code {
				t.Fatalf("HTTP %d, want %d: %s", code, c.code, b)
			}
			var e ErrorBody
			decodeInto(t, b, &e)
			if e.Error.Type == "" || e.Error.Message == "" {
				t.Errorf("error body %s", b)
			}
		})
	}
	if code, _ := f.call(t, "GET", "/healthz", nil, ""); code != 200 {
		t.Fatalf("healthz after bad requests: %d", code)
	}
	after, err := f.store.Get(f.labelID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Effective != before.Effective || after.Reviews != 0 {
		t.Fatalf("label changed: %+v → %+v", before, after)
	}
	// With the token the write goes through.
	code, b := f.call(t, "POST", review, ReviewRequest{Action: labelstore.ReviewFlip, Reviewer: "me"}, "s3cret")
	if code != 200 {
		t.Fatalf("review with token: %d %s", code, b)
	}
	var rec labelstore.Record
	decodeInto(t, b, &rec)
	if rec.Effective != filter.Helpful || rec.Reviews != 1 {
		t.Errorf("after flip %+v", rec)
	}
}

func TestAuthLevels(t *testing.T) {
	f := newFixture(t, Options{Token: "tok"})
	body := map[string]any{"query": "eosin", "mode": "bm25", "k": 1}
	cases := []struct {
		method, path string
		body         any
		token        string
		code         int
	}{
		{"GET", "/healthz", nil, "", 200},          // always open
		{"POST", "/v1/retrieve", body, "", 401},    // read needs the token without OpenRead
		{"POST", "/v1/retrieve", body, "tok", 200}, //
		{"GET", "/metrics", nil, "", 401},          //
		{"GET", "/v1/labels?run=run1", nil, "tok", 200},
	}
	for _, c := range cases {
		if code, b := f.call(t, c.method, c.path, c.body, c.token); code != c.code {
			t.Errorf("%s %s token %q: HTTP %d, want %d: %s", c.method, c.path, c.token, code, c.code, b)
		}
	}
	// The scheme is case-insensitive (RFC 9110 §11.1).
	for _, scheme := range []string{"bearer", "BEARER"} {
		req, _ := http.NewRequest("GET", f.ts.URL+"/metrics", nil)
		req.Header.Set("Authorization", scheme+" tok")
		if resp, err := f.ts.Client().Do(req); err != nil || resp.StatusCode != 200 {
			t.Errorf("Authorization %q: %v %v, want 200", scheme+" tok", resp, err)
		} else {
			resp.Body.Close()
		}
	}
	// Without a token, writes are refused even with a header.
	g := newFixture(t, Options{OpenRead: true})
	if code, _ := g.call(t, "POST", fmt.Sprintf("/v1/labels/%d/undo", g.labelID), nil, "anything"); code != 403 {
		t.Errorf("write without configured token: HTTP %d, want 403", code)
	}
}

// Concurrent filter requests share model calls: the batch-size histogram
// records fewer batches than requests.
func TestMicroBatching(t *testing.T) {
	f := newFixture(t, Options{BatchWait: 300 * time.Millisecond, MaxBatch: 64})
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, b := f.call(t, "POST", "/v1/filter", FilterRequest{Question: fmt.Sprintf("question %d?", i), Snippets: []string{textbook[i%3].Text}}, "")
			if code != 200 {
				errs <- string(b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	batches, items := f.srv.Metrics().BatchStats("filter")
	// Each request's windows form one call when alone, so fewer batches
	// than requests means requests shared model calls.
	if items < n || batches == 0 || batches >= n {
		t.Fatalf("filter: %d batches for %d requests (%d windows): no request was batched with another", batches, n, items)
	}
	code, b := f.call(t, "GET", "/metrics", nil, "")
	if code != 200 || !strings.Contains(string(b), fmt.Sprintf("ragforge_batch_size_count{batcher=\"filter\"} %d\n", batches)) ||
		!strings.Contains(string(b), "ragforge_http_requests_total{endpoint=\"POST /v1/filter\",code=\"200\"} 6\n") ||
		!strings.Contains(string(b), "\nprocess_resident_memory_bytes ") {
		t.Errorf("metrics:\n%s", b)
	}
}

// blockingFilter holds Predict until release is closed.
type blockingFilter struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingFilter) Predict(ctx context.Context, q string, s []string) ([]float64, error) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	out := make([]float64, len(s))
	for i := range out {
		out[i] = 0.75
	}
	return out, nil
}

// Acceptance 4: cancelling Serve's context lets an in-flight request
// finish, refuses new ones, and leaves the SQLite store consistent.
func TestGracefulShutdown(t *testing.T) {
	f := newFixture(t, Options{})
	bf := &blockingFilter{entered: make(chan struct{}), release: make(chan struct{})}
	comps := *f.comps
	comps.Filter = bf
	s, err := New(Options{Labels: f.store, Token: "t", OpenRead: true}, &comps)
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
	url := "http://" + ln.Addr().String()
	type result struct {
		code int
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := http.Post(url+"/v1/filter", "application/json", strings.NewReader(`{"question":"q","snippets":["a","b"]}`))
		if err != nil {
			inflight <- result{err: err}
			return
		}
		resp.Body.Close()
		inflight <- result{code: resp.StatusCode}
	}()
	// A write lands in SQLite while the filter request is in flight.
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/v1/labels/%d/review", url, f.labelID), strings.NewReader(`{"action":"confirm","reviewer":"x"}`))
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("Content-Type", "application/json")
	select {
	case <-bf.entered:
	case r := <-inflight:
		t.Fatalf("filter request ended before reaching the filter: %+v", r)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("review during load: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v while a request was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(bf.release)
	if r := <-inflight; r.err != nil || r.code != 200 {
		t.Fatalf("in-flight request: %+v", r)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("server still accepts connections after shutdown")
	}
	var check string
	if err := f.store.DB().QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check %q %v", check, err)
	}
}

func TestCheckAddr(t *testing.T) {
	cases := []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"[::1]:8080", false, true},
		{"localhost:0", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"192.168.1.5:80", false, false},
		{"0.0.0.0:8080", true, true},
		{"nonsense", true, false},
	}
	for _, c := range cases {
		if err := CheckAddr(c.addr, c.remote); (err == nil) != c.ok {
			t.Errorf("CheckAddr(%q, %v) = %v, want ok %v", c.addr, c.remote, err, c.ok)
		}
	}
}

// Acceptance 2 in miniature: loadtest drives /v1/retrieve and /v1/filter
// of a real server from 8 clients; no request fails and the server's RSS
// is reported at both ends.
func TestLoadtestAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: load run in -short mode")
	}
	f := newFixture(t, Options{Token: "lt"})
	rep, err := loadtest.Run(context.Background(), loadtest.Options{
		BaseURL: f.ts.URL, Duration: time.Second, Concurrency: 8, Token: "lt",
		Endpoints: []loadtest.Endpoint{
			{Name: "retrieve", Path: "/v1/retrieve", Body: []byte(`{"query":"hematoxylin eosin","mode":"hybrid","k":3}`)},
			{Name: "filter", Path: "/v1/filter", Body: []byte(`{"question":"what stains nuclei?","snippets":["hematoxylin stains nuclei"]}`)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Endpoints {
		if e.Requests == 0 || e.Errors != 0 || e.P50Ms > e.P99Ms {
			t.Errorf("endpoint %+v", e)
		}
	}
	if rep.RSSStart <= 0 || rep.RSSEnd <= 0 {
		t.Errorf("rss %d → %d", rep.RSSStart, rep.RSSEnd)
	}
}

// Run refuses a non-loopback address before loading anything, and with a
// cancelled context loads the pipeline, opens the label database, serves
// and shuts down cleanly.
func TestRun(t *testing.T) {
	err := Run(context.Background(), Config{Options: Options{Addr: "0.0.0.0:0"}, PipelineDir: "/nonexistent"})
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("remote addr: %v", err)
	}
	dir := buildPipeline(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	db := filepath.Join(t.TempDir(), "labels.sqlite")
	if err := Run(ctx, Config{Options: Options{Addr: "127.0.0.1:0"}, PipelineDir: dir, LabelsDB: db}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st, err := labelstore.OpenStore(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var check string
	if err := st.DB().QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check %q %v", check, err)
	}
}
