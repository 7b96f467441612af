package answers

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/ragforge/ragforge/internal/testutil"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// judgeServer is a loopback OpenAI-compatible chat server; reply maps the
// user prompt to the answer text, or sleeps when it returns delay > 0.
func judgeServer(t *testing.T, reply func(prompt string) (string, time.Duration)) *openai.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req openai.ChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", 400)
			return
		}
		text, delay := reply(req.Messages[len(req.Messages)-1].Content)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		json.NewEncoder(w).Encode(openai.ChatResponse{Choices: []openai.ChatChoice{{Message: openai.Message{Role: "assistant", Content: text}, FinishReason: "stop"}}})
	}))
	t.Cleanup(srv.Close)
	return openai.New(srv.URL, openai.Options{Model: "judge", Timeout: 200 * time.Millisecond, MaxRetries: 1, Backoff: 5 * time.Millisecond})
}

const (
	goodFaith  = `{"statements": [{"statement": "s1", "supported": true}, {"statement": "s2", "supported": false}]}`
	goodRel    = "```json\n{\"questions\": [\"Qual é o fixador usado?\", \"Como se faz a coloração?\"], \"noncommittal\": false}\n```"
	goodRecall = `{"statements": [{"statement": "r1", "attributed": true}, {"statement": "r2", "attributed": true}, {"statement": "r3", "attributed": false}]}`
)

func goodReply(p string) (string, time.Duration) {
	switch {
	case strings.Contains(p, "Break the ANSWER"):
		return goodFaith, 0
	case strings.Contains(p, "different questions"):
		return goodRel, 0
	case strings.Contains(p, "REFERENCE ANSWER"):
		return goodRecall, 0
	}
	return "?", 0
}

// Acceptance 1: 20 AP dev questions, BM25 top-5 chunks as fixed context, a
// tiny random Flan-T5 as answerer, bert-tiny as the relevance encoder and a
// loopback judge; every metric is reported for every K and 100 item rows
// with their judge calls land in SQLite.
func TestRunAPAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the AP answer-evaluation run")
	}
	docs, err := data.LoadHFDataset(testutil.SharedPath(t, "data/ap_protocols"), data.HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	qs, err := data.LoadAPQA(testutil.SharedPath(t, "data/ap_protocols_qa/dev.csv"))
	if err != nil {
		t.Fatal(err)
	}
	qs = qs[:20]
	chunks, _, err := chunk.SplitAll(docs, chunk.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := bm25.NewMemory(chunks, bm25.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	textOf := map[string]string{}
	for _, c := range chunks {
		textOf[c.ID] = c.Text
	}
	retrieve := func(_ context.Context, q data.Query) ([]string, error) {
		hits, err := ix.Search(q.Text, 5)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(hits))
		for i, h := range hits {
			out[i] = textOf[h.ID]
		}
		return out, nil
	}

	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	t5dir := testutil.SharedPath(t, "fixtures/t5-flan-tiny")
	gen, err := lm.LoadT5(t5dir, "go")
	if err != nil {
		t.Fatal(err)
	}
	answerer := &LMAnswerer{LM: gen, MaxNewTokens: 8}
	bdir := testutil.SharedPath(t, "fixtures/bert-tiny")
	bm, err := bert.Load(be, bdir)
	if err != nil {
		t.Fatal(err)
	}
	wp, err := wordpiece.Load(bdir)
	if err != nil {
		t.Fatal(err)
	}
	judge := &Judge{Client: judgeServer(t, goodReply), Embedder: encode.NewBERTEncoder(bm, wp, "bert-tiny")}

	store, err := tracker.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := Config{}
	run, err := store.Start("eval-answers", cfg, "test", "go")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	start := time.Now()
	rep, err := Run(context.Background(), cfg, qs, retrieve, answerer, judge, run, func(done, total int) {
		calls++
		if testing.Verbose() && done%10 == 0 {
			t.Logf("%d/%d items after %v", done, total, time.Since(start))
		}
		if done != calls || total != 100 {
			t.Errorf("progress (%d, %d) at call %d", done, total, calls)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Finish(nil); err != nil {
		t.Fatal(err)
	}
	if len(rep.PerK) != 5 || calls != 100 {
		t.Fatalf("%d K reports, %d progress calls", len(rep.PerK), calls)
	}
	for i, kr := range rep.PerK {
		if kr.K != i+1 {
			t.Errorf("report %d has K %d", i, kr.K)
		}
		for _, m := range []string{MetricBLEU, MetricSentenceBLEU, MetricROUGE1, MetricROUGE2, MetricROUGEL, Faithfulness, AnswerRelevance, ContextRecall} {
			v, ok := kr.Means[m]
			if !ok || kr.Counts[m] != 20 || math.IsNaN(v) {
				t.Errorf("K=%d %s: mean %v (present %v), count %d", kr.K, m, v, ok, kr.Counts[m])
			}
		}
		if !near(kr.Means[Faithfulness], 0.5) || !near(kr.Means[ContextRecall], 2.0/3) || len(kr.Errors) != 0 {
			t.Errorf("K=%d: faithfulness %v recall %v errors %v", kr.K, kr.Means[Faithfulness], kr.Means[ContextRecall], kr.Errors)
		}
		if r := kr.Means[AnswerRelevance]; r < -1-1e-6 || r > 1+1e-6 {
			t.Errorf("K=%d: answer relevance %v outside [-1, 1]", kr.K, r)
		}
	}
	items, err := run.Items(ItemKind)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 100 {
		t.Fatalf("%d items stored, want 100", len(items))
	}
	var it Item
	if ok, err := run.GetItem(ItemKind, ItemKey(qs[3].ID, 4), &it); !ok || err != nil {
		t.Fatalf("item %s: %v %v", ItemKey(qs[3].ID, 4), ok, err)
	}
	if it.K != 4 || len(it.Contexts) != 4 || len(it.Judge) != 3 || it.Judge[0].Raw != goodFaith || it.Faithfulness == nil || it.ROUGEL == nil {
		t.Errorf("item %+v", it)
	}
	d, err := store.Get(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range d.Metrics {
		names[m.Name] = true
	}
	for _, n := range []string{"bleu@1", "faithfulness@5", "answer_relevance@3", "context_recall@2", "rougeL@4"} {
		if !names[n] {
			t.Errorf("metric %s not logged", n)
		}
	}
}

type fakeAnswerer struct{}

func (fakeAnswerer) Answer(_ context.Context, q string, contexts []string) (string, error) {
	if q == "Q3" && len(contexts) == 2 {
		return "", errors.New("generator exploded")
	}
	return "the answer to " + q, nil
}

type constEmbedder struct{}

func (constEmbedder) EncodeQueries(texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, 1}
	}
	return out, nil
}

// Acceptance 3: malformed JSON (faithfulness), refusals (relevance) and a
// timeout (recall of Q2), plus a failing answer (Q3 at K=2) and a failing
// retrieval (Q4): all are counted per item and kind, the run completes,
// means cover only the successes.
func TestRunJudgeFailures(t *testing.T) {
	client := judgeServer(t, func(p string) (string, time.Duration) {
		switch {
		case strings.Contains(p, "Break the ANSWER"):
			return `{"statements": [{"statement": "s1", "supported": tr`, 0
		case strings.Contains(p, "different questions"):
			return "I'm sorry, but I can't help with that request.", 0
		case strings.Contains(p, "REFERENCE ANSWER") && strings.Contains(p, "QUESTION: Q2"):
			return goodRecall, 2 * time.Second // beyond the 200 ms timeout, twice
		case strings.Contains(p, "REFERENCE ANSWER"):
			return goodRecall, 0
		}
		return "?", 0
	})
	qs := []data.Query{{ID: "1", Text: "Q1", Answer: "ref one"}, {ID: "2", Text: "Q2", Answer: "ref two"},
		{ID: "3", Text: "Q3", Answer: "ref three"}, {ID: "4", Text: "Q4", Answer: "ref four"}}
	retrieve := func(_ context.Context, q data.Query) ([]string, error) {
		if q.Text == "Q4" {
			return nil, errors.New("index offline")
		}
		return []string{"c1", "c2", "c3"}, nil
	}
	store, err := tracker.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	run, err := store.Start("eval-answers", nil, "test", "go")
	if err != nil {
		t.Fatal(err)
	}
	judge := &Judge{Client: client, Embedder: constEmbedder{}}
	rep, err := Run(context.Background(), Config{Ks: []int{1, 2}}, qs, retrieve, fakeAnswerer{}, judge, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		errors, kinds, causes map[string]int
		recallCount           int
	}{
		{map[string]int{MetricRetrieve: 1, Faithfulness: 3, AnswerRelevance: 3, ContextRecall: 1},
			map[string]int{"faithfulness/parse": 3, "answer_relevance/parse": 3, "context_recall/request": 1},
			map[string]int{MetricRetrieve: 1, CauseMalformed: 3, CauseRefusal: 3, "timeout": 1}, 2},
		{map[string]int{MetricRetrieve: 1, MetricAnswer: 1, Faithfulness: 2, AnswerRelevance: 2, ContextRecall: 1},
			map[string]int{"faithfulness/parse": 2, "answer_relevance/parse": 2, "context_recall/request": 1},
			map[string]int{MetricRetrieve: 1, "request": 1, CauseMalformed: 2, CauseRefusal: 2, "timeout": 1}, 1},
	}
	for i, w := range want {
		kr := rep.PerK[i]
		if !mapsEqual(kr.Errors, w.errors) || !mapsEqual(kr.ErrorKinds, w.kinds) {
			t.Errorf("K=%d: errors %v kinds %v, want %v %v", kr.K, kr.Errors, kr.ErrorKinds, w.errors, w.kinds)
		}
		if !mapsEqual(kr.ErrorCauses, w.causes) {
			t.Errorf("K=%d: error causes %v, want %v", kr.K, kr.ErrorCauses, w.causes)
		}
		if _, ok := kr.Means[Faithfulness]; ok {
			t.Errorf("K=%d: faithfulness mean %v with no success", kr.K, kr.Means[Faithfulness])
		}
		if kr.Counts[ContextRecall] != w.recallCount || !near(kr.Means[ContextRecall], 2.0/3) {
			t.Errorf("K=%d: recall count %d mean %v", kr.K, kr.Counts[ContextRecall], kr.Means[ContextRecall])
		}
	}
	var it Item
	if ok, _ := run.GetItem(ItemKind, ItemKey("2", 1), &it); !ok {
		t.Fatal("item 2/K1 missing")
	}
	if it.ContextRecall != nil || !strings.Contains(it.Errors[ContextRecall], "request error") || len(it.Judge) != 3 || it.Judge[2].ErrorKind != ErrRequest {
		t.Errorf("timed-out item: %+v", it)
	}
	if it.Judge[0].Raw == "" || it.Judge[0].ErrorKind != ErrParse {
		t.Errorf("malformed JSON not recorded raw: %+v", it.Judge[0])
	}
	items, _ := run.Items(ItemKind)
	if len(items) != 8 {
		t.Errorf("%d items, want 8", len(items))
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
