package mcqa

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ragforge/ragforge/models/openai"
)

// memRecorder is an in-memory run store (items round-trip through JSON as
// in data/tracker).
type memRecorder struct {
	mu      sync.Mutex
	items   map[string][]byte
	metrics map[string]float64
}

func newMemRecorder() *memRecorder { return &memRecorder{items: map[string][]byte{}} }

func (m *memRecorder) PutItem(kind, key string, v any) error {
	b, err := json.Marshal(v)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items[kind+"|"+key] = b
	return err
}

func (m *memRecorder) GetItem(kind, key string, v any) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.items[kind+"|"+key]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

func (m *memRecorder) LogMetrics(values map[string]float64, step int) error {
	m.metrics = values
	return nil
}

// replies are the fixed outputs of the test server per condition and
// question stem, malformed ones included; the comments give each parser's
// reading (gold in brackets).
var replies = map[string]map[string]string{
	"cot": {
		"Which organ produces insulin?":               `{"step_by_step_thinking": "islets", "answer_choice": "A"}`,   // [A] strict A, mirage A
		"Which vitamin deficiency causes scurvy?":     `The answer is B.`,                                            // [B] strict B, mirage fallback A
		"Which stain shows nuclei blue?":              `{"step_by_step_thinking": "unsure", "answer_choice": `,       // [C] malformed_json, mirage fallback A
		"Which fixative is most common in histology?": `{"step_by_step_thinking": "both fit", "answer_choice": "E"}`, // [D] not_an_option, mirage fallback A
		"Which cells make antibodies?":                `The answer is B, but option C also fits`,                     // [B] ambiguous, mirage C ("[Oo]ption")
		"Does X cause Y?":                             `yes`,                                                         // [A] strict A by text, mirage fallback A
		"Does Y cause Z?":                             `{"step_by_step_thinking": "no link", "answer_choice": "B"}`,  // [B] B, B
		"Does X cause Z?":                             `Answer: A`,                                                   // [C] A, A
	},
	"rag": {
		"Which organ produces insulin?":               `{"answer_choice": "B"}`,
		"Which vitamin deficiency causes scurvy?":     `{"answer_choice": "B"}`,
		"Which stain shows nuclei blue?":              `{"answer_choice": "C"}`,
		"Which fixative is most common in histology?": `{"answer_choice": "D"}`,
		"Which cells make antibodies?":                `{"answer_choice": "B"}`,
		"Does X cause Y?":                             `{"answer_choice": "A"}`,
		"Does Y cause Z?":                             `{"answer_choice": "maybe"}`, // [B] strict C by text, mirage fallback A
		"Does X cause Z?":                             `{"answer_choice": "C"}`,
	},
}

// replayServer is an OpenAI-compatible chat server answering from replies;
// it counts requests per (condition, stem).
func replayServer(t *testing.T) (*httptest.Server, *sync.Map) {
	counts := &sync.Map{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req openai.ChatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "bad request", 400)
			return
		}
		user := req.Messages[len(req.Messages)-1].Content
		cond := "cot"
		if strings.Contains(user, "Here are the relevant documents:") {
			cond = "rag"
		}
		for stem, out := range replies[cond] {
			if strings.Contains(user, "Here is the question:\n"+stem+"\n") {
				n, _ := counts.LoadOrStore(cond+"|"+stem, new(int))
				*n.(*int)++
				json.NewEncoder(w).Encode(openai.ChatResponse{Choices: []openai.ChatChoice{{Message: openai.Message{Role: "assistant", Content: out}, FinishReason: "stop"}}})
				return
			}
		}
		http.Error(w, "unknown question", 500)
	}))
	t.Cleanup(ts.Close)
	return ts, counts
}

// fixedRetriever returns one snippet per query; it records the queries.
type fixedRetriever struct {
	mu      sync.Mutex
	queries []string
}

func (f *fixedRetriever) Search(ctx context.Context, query string, k int) ([]Snippet, error) {
	f.mu.Lock()
	f.queries = append(f.queries, query)
	f.mu.Unlock()
	return []Snippet{{ID: "d#0", Title: "Doc", Text: "some text"}}, nil
}

func (f *fixedRetriever) Pipeline(ctx context.Context, question, rationale string, k int, filter bool) (Retrieval, error) {
	return Retrieval{}, fmt.Errorf("not used")
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestRunGolden: accuracies, parse failures, MIRAGE-parse accuracies,
// Wilson intervals and McNemar values of the replayed outputs, computed by
// hand (see replies).
func TestRunGolden(t *testing.T) {
	ds, err := Load("testdata/tiny_benchmark.json", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts, counts := replayServer(t)
	client := openai.New(ts.URL, openai.Options{MaxRetries: -1})
	ret := &fixedRetriever{}
	deps := Deps{Answerer: &ChatAnswerer{Client: client}, Retriever: ret}
	for _, mode := range []string{ParseStrict, ParseMIRAGE} {
		rec := newMemRecorder()
		rep, err := Run(context.Background(), Config{Conditions: []string{CondCoT, CondRAG}, Parse: mode, Concurrency: 3}, ds, deps, rec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(rep.Datasets); got != "[medqa pubmedqa]" {
			t.Fatalf("datasets %s, want MIRAGE order [medqa pubmedqa]", got)
		}
		type want struct {
			correct, n, fails int
			low, high         float64
		}
		golden := map[string]map[string][]want{
			ParseStrict: {
				"cot": {{2, 5, 3, 0.1176207742, 0.7692757187}, {2, 3, 0, 0.2076596008, 0.9385080553}},
				"rag": {{4, 5, 0, 0.3755346298, 0.9637758914}, {2, 3, 0, 0.2076596008, 0.9385080553}},
			},
			ParseMIRAGE: {
				"cot": {{1, 5, 3, 0.0362241086, 0.6244653702}, {2, 3, 0, 0.2076596008, 0.9385080553}},
				"rag": {{4, 5, 0, 0.3755346298, 0.9637758914}, {2, 3, 0, 0.2076596008, 0.9385080553}},
			},
		}[mode]
		for _, c := range rep.Conditions {
			for i, d := range c.Datasets {
				g := golden[c.Condition][i]
				if d.Correct != g.correct || d.N != g.n || d.ParseFailures != g.fails || math.Abs(d.CI.Low-g.low) > 1e-9 || math.Abs(d.CI.High-g.high) > 1e-9 {
					t.Errorf("%s %s %s: got %d/%d fails %d CI [%.10f, %.10f], want %+v", mode, c.Condition, d.Dataset, d.Correct, d.N, d.ParseFailures, d.CI.Low, d.CI.High, g)
				}
			}
		}
		cot := rep.Conditions[0]
		if mode == ParseStrict {
			if !near(cot.Average, (0.4+2.0/3)/2) || math.Abs(cot.AverageCI.Low-0.1909364406) > 1e-9 || math.Abs(cot.AverageCI.High-0.8757302261) > 1e-9 {
				t.Errorf("cot average %v %+v", cot.Average, cot.AverageCI)
			}
			if fc := cot.Datasets[0].FailureCauses; fc[FailMalformed] != 1 || fc[FailNotOption] != 1 || fc[FailAmbiguous] != 1 {
				t.Errorf("cot medqa failure causes %v", fc)
			}
			if cot.Datasets[0].MIRAGEFallbacks != 3 || cot.Datasets[1].MIRAGEFallbacks != 1 {
				t.Errorf("MIRAGE fallbacks %d, %d; want 3, 1", cot.Datasets[0].MIRAGEFallbacks, cot.Datasets[1].MIRAGEFallbacks)
			}
		}
		// McNemar cot vs rag. strict: only cot right on 0001, 10002 (2),
		// only rag on 0003, 0004, 0005, 10003 (4): p = 2·22/64. mirage: only
		// cot 0001, 10002 (2), only rag 0002..0005, 10003 (5): p = 2·29/128.
		p := rep.Pairs[0]
		wantA, wantB, wantP := 2, 4, 44.0/64
		if mode == ParseMIRAGE {
			wantA, wantB, wantP = 2, 5, 58.0/128
		}
		if p.N != 8 || p.OnlyA != wantA || p.OnlyB != wantB || !near(p.P, wantP) {
			t.Errorf("%s McNemar %+v, want %d/%d p %v", mode, p, wantA, wantB, wantP)
		}
		if rec.metrics["cot/medqa/accuracy"] != float64(golden["cot"][0].correct)/5 {
			t.Errorf("metric cot/medqa/accuracy = %v", rec.metrics["cot/medqa/accuracy"])
		}
	}
	// rag retrieved with the question alone, never the options.
	for _, q := range ret.queries {
		if strings.Contains(q, "Vitamin") || strings.Contains(q, "maybe") {
			t.Errorf("rag query %q holds options", q)
		}
	}
	counts.Range(func(k, v any) bool {
		if *v.(*int) != 2 { // once per parse mode
			t.Errorf("%s asked %d times, want 2", k, *v.(*int))
		}
		return true
	})
}

// TestRunResume: a run whose store already holds some items asks only the
// others; a failing question is not stored, and the resumed run asks it.
func TestRunResume(t *testing.T) {
	ds, err := Load("testdata/tiny_benchmark.json", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts, counts := replayServer(t)
	rec := newMemRecorder()
	ret := &fixedRetriever{}
	// First run: medqa only, as if killed after one dataset.
	first := []Dataset{ds[0]}
	deps := Deps{Answerer: &ChatAnswerer{Client: openai.New(ts.URL, openai.Options{MaxRetries: -1})}, Retriever: ret}
	if _, err := Run(context.Background(), Config{Conditions: []string{CondCoT, CondRAG}}, first, deps, rec, nil); err != nil {
		t.Fatal(err)
	}
	// A question the server cannot answer fails and is left out.
	bad := ds[1]
	bad.Questions = append([]Question{{Dataset: "pubmedqa", ID: "09999", Question: "Unknown?", Options: bad.Questions[0].Options, Answer: "A"}}, bad.Questions...)
	all := []Dataset{ds[0], bad}
	rep, err := Run(context.Background(), Config{Conditions: []string{CondCoT, CondRAG}}, all, deps, rec, nil)
	if err == nil || !strings.Contains(err.Error(), "1 of 9 questions failed") {
		t.Fatalf("err %v, want 1 of 9 failed", err)
	}
	if rep.Conditions[0].Missing != 1 || rep.Conditions[0].Datasets[0].N != 5 || rep.Conditions[0].Datasets[1].N != 3 {
		t.Errorf("report %+v", rep.Conditions[0])
	}
	counts.Range(func(k, v any) bool {
		if *v.(*int) != 1 {
			t.Errorf("%s asked %d times, want once", k, *v.(*int))
		}
		return true
	})
	if _, ok := rec.items[ItemKind+"|cot/pubmedqa/09999"]; ok {
		t.Error("a failed question was stored")
	}
	var it Item
	if found, _ := rec.GetItem(ItemKind, "cot/medqa/0003", &it); !found || it.Prompt == nil || !strings.Contains(it.Prompt.User, "C. Hematoxylin") || it.Parsed.Failure != FailMalformed || it.MIRAGEChoice != "A" || !it.MIRAGEFallback {
		t.Errorf("stored item %+v", it)
	}
}

func TestParseAnswer(t *testing.T) {
	q := Question{Options: []Option{{"A", "Pancreas"}, {"B", "Liver"}, {"C", "Kidney"}, {"D", "Spleen"}}}
	cases := []struct{ raw, choice, fail string }{
		{`{"step_by_step_thinking": "x", "answer_choice": "C"}`, "C", ""},
		{"```json\n{\"answer_choice\": \"B. Liver\"}\n```", "B", ""},
		{`{"answer_choice": "(D)"}`, "D", ""},
		{`{"answer_choice": "kidney"}`, "C", ""},
		{`{"answer_choice": "E"}`, "", FailNotOption},
		{`{"answer_choice": "A or B"}`, "", FailNotOption},
		{`{"step": "x"}`, "", FailNoAnswer},
		{`C`, "C", ""},
		{` (B) `, "B", ""},
		{`The answer is D.`, "D", ""},
		{`Answer: A. The answer is A`, "A", ""},
		{`The answer is A; option B is also right`, "", FailAmbiguous},
		{`Spleen.`, "D", ""},
		{`A 45-year-old man`, "", FailNoAnswer},
		{`{"step_by_step_thinking": "x", "answer_choice": "A"`, "A", ""}, // JSON cut short, its answer_choice still plain
		{`{"step_by_step_thinking": "x", "answer_choice": `, "", FailMalformed},
		{"  \n", "", FailEmpty},
	}
	for _, c := range cases {
		p := ParseAnswer(c.raw, q)
		if p.Choice != c.choice || p.Failure != c.fail {
			t.Errorf("ParseAnswer(%q) = %+v, want choice %q failure %q", c.raw, p, c.choice, c.fail)
		}
	}
}

// TestMIRAGEAnswer follows locate_answer (MIRAGE src/utils.py) rule by rule.
func TestMIRAGEAnswer(t *testing.T) {
	cases := []struct {
		raw, want string
		fallback  bool
	}{
		{`{"step_by_step_thinking": "x", "answer_choice": "C"}`, "C", false}, // tail `C"}`: ^\s*(X)"
		{`{"answer_choice":"B"}`, "A", true},                                 // compact JSON: no split, and ":\"B" is not ":\s*B"
		{`"answer_choice": " D"}`, "D", false},                               // strip, then ^\s*(X)"
		{`B or C`, "B", false},
		{`C and D`, "C", false},
		{`D/A`, "D", false},
		{`B, since`, "B", false},
		{`I pick option D`, "D", false},
		{`Answer: C`, "C", false},
		{`C. Kidney`, "C", false},
		{`D: Spleen`, "D", false},
		{"\u00a0B", "B", false}, // Python strips U+00A0
		{`E`, "A", true},
		{`The answer is B.`, "A", true},
		{`Option B; ratio 2:C`, "B", false}, // [Oo]ption before :\s*
		{`{"step_by_step_thinking": "Note: B is wrong", "answer_choice": "C"}`, "C", false},
		{`{"step_by_step_thinking": "x", "answer_choice": "C"} Note: Because`, "B", false}, // ":\s*(A|B|C|D)" finds ": B"
	}
	for _, c := range cases {
		got, fb := MIRAGEAnswer(c.raw)
		if got != c.want || fb != c.fallback {
			t.Errorf("MIRAGEAnswer(%q) = %q %v, want %q %v", c.raw, got, fb, c.want, c.fallback)
		}
	}
}

func TestStats(t *testing.T) {
	for _, c := range []struct {
		b, c int
		p    float64
	}{{0, 0, 1}, {0, 3, 0.25}, {1, 5, 14.0 / 64}, {2, 2, 1}, {10, 0, 2.0 / 1024}, {3, 12, 2 * (1 + 15 + 105 + 455) / 32768.0}} {
		if got := McNemar(c.b, c.c); !near(got, c.p) {
			t.Errorf("McNemar(%d, %d) = %v, want %v", c.b, c.c, got, c.p)
		}
	}
	if w := Wilson(0, 0); w != (Interval{0, 1}) {
		t.Errorf("Wilson(0,0) = %v", w)
	}
	if w := Wilson(10, 10); !near(w.High, 1) || math.Abs(w.Low-0.7224672) > 1e-6 {
		t.Errorf("Wilson(10,10) = %v, want [0.7224672, 1]", w)
	}
}

// TestRunKilledAndResumed: a run cancelled after two questions (as SIGINT
// does) stops with the context's error and keeps those two; the resumed run
// asks only the other six, so every question is asked once and none is lost.
func TestRunKilledAndResumed(t *testing.T) {
	ds, err := Load("testdata/tiny_benchmark.json", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts, counts := replayServer(t)
	deps := Deps{Answerer: &ChatAnswerer{Client: openai.New(ts.URL, openai.Options{MaxRetries: -1})}, Retriever: &fixedRetriever{}}
	cfg := Config{Conditions: []string{CondCoT, CondRAG}, Concurrency: 1}
	rec := newMemRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	_, err = Run(ctx, cfg, ds, deps, rec, func(done, total int) {
		if done == 2 {
			cancel()
		}
	})
	if err != context.Canceled || len(rec.items) != 4 {
		t.Fatalf("killed run: err %v, %d items stored; want context.Canceled and 2 questions × 2 conditions", err, len(rec.items))
	}
	rep, err := Run(context.Background(), cfg, ds, deps, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.items) != 16 || rep.Conditions[0].Missing != 0 || rep.Conditions[1].Missing != 0 {
		t.Errorf("resumed: %d items, missing %d/%d", len(rec.items), rep.Conditions[0].Missing, rep.Conditions[1].Missing)
	}
	n := 0
	counts.Range(func(k, v any) bool {
		n++
		if *v.(*int) != 1 {
			t.Errorf("%s asked %d times, want once", k, *v.(*int))
		}
		return true
	})
	if n != 16 {
		t.Errorf("%d (condition, question) pairs asked, want 16", n)
	}
}

// TestRunStopsAfterFailures: against a server that fails every request, a
// run with MaxFailures 3 and one question at a time starts no fourth
// question, and stores nothing.
func TestRunStopsAfterFailures(t *testing.T) {
	ds, err := Load("testdata/tiny_benchmark.json", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		http.Error(w, "model not loaded", 400) // not retried
	}))
	defer ts.Close()
	rec := newMemRecorder()
	deps := Deps{Answerer: &ChatAnswerer{Client: openai.New(ts.URL, openai.Options{MaxRetries: -1})}}
	_, err = Run(context.Background(), Config{Conditions: []string{CondCoT}, Concurrency: 1, MaxFailures: 3}, ds, deps, rec, nil)
	if err == nil || !strings.Contains(err.Error(), "stopped after 3 failed questions (0 of 8 answered)") || n != 3 || len(rec.items) != 0 {
		t.Errorf("err %v, %d requests, %d items; want stopped after 3 with 3 requests and none stored", err, n, len(rec.items))
	}
}

// TestRunOverContext: a prompt the answerer refuses as longer than its
// context (vLLM's 400) is stored as that question's answer, wrong with cause
// over_context, not retried and not counted as a failed request; any other
// 400 still fails the question.
func TestRunOverContext(t *testing.T) {
	ds, err := Load("testdata/tiny_benchmark.json", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		w.Write([]byte(`{"error":{"message":"This model's maximum context length is 512 tokens. However, you requested 527 tokens (527 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":null}}`))
	}))
	defer ts.Close()
	rec := newMemRecorder()
	deps := Deps{Answerer: &ChatAnswerer{Client: openai.New(ts.URL, openai.Options{MaxRetries: 2})}}
	rep, err := Run(context.Background(), Config{Conditions: []string{CondCoT}, Concurrency: 1, MaxFailures: 3}, ds, deps, rec, nil)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	total, over := 0, 0
	for _, c := range rep.Conditions {
		for _, d := range c.Datasets {
			total += d.N
			over += d.FailureCauses[FailOverContext]
			if d.Correct != 0 && rep.Parse == ParseStrict {
				t.Errorf("%s: %d correct, want 0", d.Dataset, d.Correct)
			}
		}
	}
	if total != 8 || over != 8 || n != 8 || len(rec.items) != 8 {
		t.Errorf("%d scored, %d over_context, %d requests, %d items; want 8 of each (one request per question)", total, over, n, len(rec.items))
	}
}

// fixedScorer returns fixed log-probabilities per target.
type fixedScorer map[string][]float64

func (f fixedScorer) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
	return f[target], nil
}

// TestAccNorm: acc takes the largest sum, acc_norm the largest sum per
// byte: "no" -3 (−1.5/byte) beats "yes" -4 (−1.33/byte) on acc only.
func TestAccNorm(t *testing.T) {
	q := Question{Options: []Option{{"A", "yes"}, {"B", "no"}}, Answer: "A"}
	ll, err := ScoreOptions(context.Background(), fixedScorer{" yes": {-1, -3}, " no": {-2.5, -0.5}}, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ll.Choice != "B" || ll.ChoiceNorm != "A" || ll.Correct || !ll.CorrectNorm || ll.Sums[0] != -4 || ll.Sums[1] != -3 {
		t.Errorf("%+v", ll)
	}
}
