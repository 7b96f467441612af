package label

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
)

// fakeScorer answers from a prompt → log-probabilities table and records the
// calls that returned scores.
type fakeScorer struct {
	name      string
	lp        map[string][]float64
	failAfter int    // > 0: every call after the first failAfter successes fails
	onCall    func() // run before answering a successful call
	mu        sync.Mutex
	calls     []string
}

var errFake = errors.New("fake scorer: out of budget")

func (f *fakeScorer) Name() string { return f.name }

func (f *fakeScorer) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAfter > 0 && len(f.calls) >= f.failAfter {
		return nil, errFake
	}
	lp, ok := f.lp[prompt]
	if !ok {
		return nil, fmt.Errorf("fake scorer: unexpected prompt %q", prompt)
	}
	if f.onCall != nil {
		f.onCall()
	}
	f.calls = append(f.calls, prompt)
	return lp, nil
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// One question, four snippets. Hand-computed perplexities (exp(-mean lp)):
//
//	without  [-1, -1]     → e^1   = 2.718281828
//	A        [-0.2, -0.8] → e^0.5 = 1.648721271  abs 1.069560558  rel 0.393469340
//	B        [-0.9, -0.9] → e^0.9 = 2.459603111  abs 0.258678717  rel 0.095162582
//	C        [-1.2, -1.2] → e^1.2 = 3.320116923  (higher: never helpful)
//	D        [-2, 0]      → e^1   = 2.718281828  (equal: never helpful)
func fourSnippets() (*fakeScorer, []Task) {
	tmpl := DefaultPromptTemplate()
	q := "Q1?"
	snips := map[string][]float64{"A": {-0.2, -0.8}, "B": {-0.9, -0.9}, "C": {-1.2, -1.2}, "D": {-2, 0}}
	sc := &fakeScorer{name: "fake", lp: map[string][]float64{tmpl.fill(tmpl.Without, q, ""): {-1, -1}}}
	task := Task{QueryID: "q1", Question: q, Target: "the rationale"}
	for _, s := range []string{"A", "B", "C", "D"} {
		sc.lp[tmpl.fill(tmpl.With, q, s)] = snips[s]
		task.Candidates = append(task.Candidates, data.Chunk{ID: "doc#" + s, Text: s})
	}
	return sc, []Task{task}
}

func TestPerplexityLabelerMargins(t *testing.T) {
	H, N := filter.Helpful, filter.NotHelpful
	for _, tc := range []struct {
		name     string
		margin   float64
		relative bool
		want     []string // A, B, C, D
		score    []float64
	}{
		{"absolute margin 0", 0, false, []string{H, H, N, N}, []float64{1.069560558, 0.258678717, -0.601835095, 0}},
		{"absolute margin 0.5", 0.5, false, []string{H, N, N, N}, nil},
		{"absolute margin 1.07", 1.07, false, []string{N, N, N, N}, nil},
		{"negative margin still needs a reduction", -10, false, []string{H, H, N, N}, nil},
		{"relative margin 0.1", 0.1, true, []string{H, N, N, N}, []float64{0.393469340, 0.095162582, -0.221402758, 0}},
		{"relative margin 0.09", 0.09, true, []string{H, H, N, N}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, tasks := fourSnippets()
			l := &PerplexityLabeler{Scorer: sc, Margin: tc.margin, Relative: tc.relative, DatasetName: "toy"}
			got, err := l.Label(context.Background(), tasks)
			if err != nil {
				t.Fatal(err)
			}
			if len(sc.calls) != 5 {
				t.Errorf("%d scorer calls, want 5 (the no-snippet prompt once)", len(sc.calls))
			}
			wantWith := []float64{1.648721271, 2.459603111, 3.320116923, 2.718281828}
			for i, g := range got {
				if g.Label != tc.want[i] {
					t.Errorf("snippet %s: label %s, want %s (ppl %v → %v)", g.Snippet, g.Label, tc.want[i], g.PPLWithout, g.PPLWith)
				}
				if !near(g.PPLWithout, 2.718281828, 1e-8) || !near(g.PPLWith, wantWith[i], 1e-8) {
					t.Errorf("snippet %s: ppl %v → %v, want 2.718281828 → %v", g.Snippet, g.PPLWithout, g.PPLWith, wantWith[i])
				}
				if tc.score != nil && !near(g.Score, tc.score[i], 1e-8) {
					t.Errorf("snippet %s: score %v, want %v", g.Snippet, g.Score, tc.score[i])
				}
				if g.Method != labelstore.MethodPerplexity || g.Scorer != "fake" || g.ExampleID != "q1#doc#"+g.Snippet || g.DatasetName != "toy" {
					t.Errorf("provenance %+v", g)
				}
			}
		})
	}
}

func TestPerplexityLabelerTemplate(t *testing.T) {
	tmpl := PromptTemplate{Without: "Q: {question}", With: "{snippet} || Q: {question}"}
	sc := &fakeScorer{name: "fake", lp: map[string][]float64{
		"Q: why?":            {-2},
		"because || Q: why?": {-1},
	}}
	l := &PerplexityLabeler{Scorer: sc, Template: tmpl}
	got, err := l.Label(context.Background(), []Task{{Question: "why?", Target: "t", Candidates: []data.Chunk{{Text: "because"}}}})
	if err != nil {
		t.Fatal(err)
	}
	// e^2 → e^1: helpful; no ids → "q1#1".
	if got[0].Label != filter.Helpful || got[0].ExampleID != "q1#1" || !near(got[0].PPLWith, math.E, 1e-12) {
		t.Fatalf("got %+v", got[0])
	}
	if _, err := (&PerplexityLabeler{Scorer: sc, Template: PromptTemplate{Without: "x", With: "y"}}).Label(context.Background(), nil); err == nil {
		t.Fatal("template without {snippet} accepted")
	}
	_, err = l.Label(context.Background(), []Task{{QueryID: "q9", Question: "why?", Candidates: []data.Chunk{{Text: "because"}}}})
	if err == nil || !strings.Contains(err.Error(), `task 1 (query "q9"): field "target": empty`) {
		t.Fatalf("empty target: %v", err)
	}
}

// resumeTasks: two questions × three snippets = 6 pairs, 8 distinct prompts
// (2 without a snippet, 6 with one).
func resumeTasks() (map[string][]float64, []Task) {
	tmpl := DefaultPromptTemplate()
	lp := map[string][]float64{}
	var tasks []Task
	for qi, q := range []string{"Q1?", "Q2?"} {
		lp[tmpl.fill(tmpl.Without, q, "")] = []float64{-1}
		task := Task{QueryID: fmt.Sprintf("q%d", qi+1), Question: q, Target: "t"}
		for si := range 3 {
			s := fmt.Sprintf("snippet %d of %s", si, q)
			lp[tmpl.fill(tmpl.With, q, s)] = []float64{-0.5 * float64(si)}
			task.Candidates = append(task.Candidates, data.Chunk{ID: fmt.Sprintf("c%d", si), Text: s})
		}
		tasks = append(tasks, task)
	}
	return lp, tasks
}

func TestPerplexityLabelerResume(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failAfter  int // scorer errors after this many successful calls
		cancelAt   int // the context is cancelled during this successful call
		wantErr    error
		wantStored int
	}{
		// Concurrency 1: calls go W1, Q1/s0, Q1/s1, Q1/s2, W2, ... (W cached after its first call).
		{name: "scorer fails after 4 calls", failAfter: 4, wantErr: errFake, wantStored: 3},
		{name: "context cancelled at call 2", cancelAt: 2, wantErr: context.Canceled, wantStored: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := labelstore.OpenStore(filepath.Join(t.TempDir(), "labels.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			lp, tasks := resumeTasks()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first := &fakeScorer{name: "fake", lp: lp, failAfter: tc.failAfter}
			n := 0
			first.onCall = func() {
				if n++; n == tc.cancelAt {
					cancel()
				}
			}
			l := &PerplexityLabeler{Scorer: first, Store: store, RunID: "r1", Concurrency: 1}
			if _, err := l.Label(ctx, tasks); !errors.Is(err, tc.wantErr) {
				t.Fatalf("first run: error %v, want %v", err, tc.wantErr)
			}
			stored, err := store.List(labelstore.Filter{RunID: "r1"})
			if err != nil || len(stored) != tc.wantStored {
				t.Fatalf("first run stored %d labels (%v), want %d", len(stored), err, tc.wantStored)
			}

			second := &fakeScorer{name: "fake", lp: lp}
			l.Scorer = second
			l.Concurrency = 3
			got, err := l.Label(context.Background(), tasks)
			if err != nil {
				t.Fatal(err)
			}
			if len(first.calls)+len(second.calls) != len(lp) {
				t.Errorf("calls: %d + %d, want %d distinct prompts in all", len(first.calls), len(second.calls), len(lp))
			}
			for _, p := range second.calls {
				if slices.Contains(first.calls, p) {
					t.Errorf("prompt %q rescored after resume", p)
				}
			}
			stored, _ = store.List(labelstore.Filter{RunID: "r1"})
			if len(got) != 6 || len(stored) != 6 {
				t.Fatalf("resumed run: %d labels, %d stored; want 6", len(got), len(stored))
			}
			// Same labels as an uninterrupted run.
			fresh, err := (&PerplexityLabeler{Scorer: &fakeScorer{name: "fake", lp: lp}}).Label(context.Background(), tasks)
			if err != nil {
				t.Fatal(err)
			}
			for i := range fresh {
				if got[i].Label != fresh[i].Label || got[i].PPLWith != fresh[i].PPLWith || got[i].PPLWithout != fresh[i].PPLWithout {
					t.Errorf("pair %d: resumed %+v, fresh %+v", i, got[i], fresh[i])
				}
			}
		})
	}
}

func TestPerplexityLabelerProgress(t *testing.T) {
	lp, tasks := resumeTasks()
	var seen []int
	var mu sync.Mutex
	l := &PerplexityLabeler{Scorer: &fakeScorer{name: "fake", lp: lp}, Concurrency: 2, Progress: func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if total != 6 {
			t.Errorf("total %d", total)
		}
		seen = append(seen, done)
	}}
	if _, err := l.Label(context.Background(), tasks); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []int{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("progress %v", seen)
	}
}
