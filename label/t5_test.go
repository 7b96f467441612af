package label

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// flanTiny returns the t5-flan-tiny fixture directory or skips.
func flanTiny(t *testing.T) string { return testutil.SharedPath(t, "fixtures/t5-flan-tiny") }

func loadFlanTiny(t *testing.T) (string, *lm.T5Scorer, *t5.Model) {
	dir := flanTiny(t)
	b, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	m, err := t5.Load(b, dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := sentencepiece.LoadT5(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, lm.NewT5Scorer(dir, m, tok), m
}

// The fixture's reference loss is the mean natural-log cross-entropy over the
// 20 label tokens of its two (encoder text, label text) pairs, so the mean of
// the scorer's 20 log-probabilities must be -loss.
func TestLocalT5ScorerMatchesFixtureLoss(t *testing.T) {
	dir, sc, _ := loadFlanTiny(t)
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Inputs struct {
			EncoderTexts []string `json:"encoder_texts"`
			LabelTexts   []string `json:"label_texts"`
			Labels       [][]int  `json:"labels"`
		} `json:"inputs"`
		Outputs struct {
			Loss float64 `json:"loss"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	var all []float64
	for i, enc := range exp.Inputs.EncoderTexts {
		lp, err := sc.TargetLogProbs(context.Background(), enc, exp.Inputs.LabelTexts[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(lp) != len(exp.Inputs.Labels[i]) {
			t.Fatalf("pair %d: %d log-probabilities, fixture has %d label tokens", i, len(lp), len(exp.Inputs.Labels[i]))
		}
		all = append(all, lp...)
	}
	ppl, err := lm.Perplexity(all)
	if err != nil {
		t.Fatal(err)
	}
	want := math.Exp(exp.Outputs.Loss) // loss 30.5966 (tolerance 1e-4 + 1e-5·|loss|)
	if got := math.Log(ppl); math.Abs(got-exp.Outputs.Loss) > 1e-4+1e-5*exp.Outputs.Loss {
		t.Fatalf("log perplexity %v, fixture loss %v (ppl %v)", got, exp.Outputs.Loss, want)
	}
}

type countingScorer struct {
	lm.Scorer
	n atomic.Int64
}

func (c *countingScorer) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
	c.n.Add(1)
	return c.Scorer.TargetLogProbs(ctx, prompt, target)
}

func TestPerplexityLabelerLocalT5(t *testing.T) {
	_, sc, m := loadFlanTiny(t)
	store, err := labelstore.OpenStore(filepath.Join(t.TempDir(), "labels.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tasks := []Task{{
		QueryID:  "q1",
		Question: "Qual é o tempo de coloração com Azul de Toluidina?",
		Target:   "Corar durante 1 min com Azul de Toluidina.",
		Candidates: []data.Chunk{
			{ID: "d1#0", Text: "Corar com Azul de Toluidina 1 min."},
			{ID: "d2#0", Text: "Desparafinar e hidratar os cortes."},
		},
	}}
	counting := &countingScorer{Scorer: sc}
	l := &PerplexityLabeler{Scorer: counting, Store: store, RunID: "t5", Concurrency: 2}
	got, err := l.Label(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	if counting.n.Load() != 3 {
		t.Errorf("%d scorer calls, want 3 (one without snippet, two with)", counting.n.Load())
	}
	// Cross-check every perplexity against the model's own loss: ppl = exp(Loss).
	tok, _ := sentencepiece.LoadT5(flanTiny(t))
	tmpl := DefaultPromptTemplate()
	for _, g := range got {
		for _, c := range []struct {
			prompt string
			ppl    float64
		}{{tmpl.fill(tmpl.Without, g.Question, ""), g.PPLWithout}, {tmpl.fill(tmpl.With, g.Question, g.Snippet), g.PPLWith}} {
			in := tok.Encode(c.prompt, true)
			mask := slices.Repeat([]int{1}, len(in))
			loss, err := m.Loss([][]int{in}, [][]int{mask}, [][]int{tok.Encode(g.Target, true)})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(math.Log(c.ppl)-float64(loss)) > 1e-4 {
				t.Errorf("%s: log ppl %v, model loss %v", g.ChunkID, math.Log(c.ppl), loss)
			}
		}
		wantLabel, _ := l.Decide(g.PPLWithout, g.PPLWith)
		if g.Label != wantLabel || g.Scorer != sc.Name() {
			t.Errorf("%s: label %s scorer %s; want %s %s", g.ChunkID, g.Label, g.Scorer, wantLabel, sc.Name())
		}
	}
	// A rerun finds every score in the cache.
	counting.n.Store(0)
	again, err := l.Label(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	if counting.n.Load() != 0 {
		t.Errorf("rerun called the model %d times, want 0", counting.n.Load())
	}
	for i := range again {
		if again[i].PPLWith != got[i].PPLWith || again[i].PPLWithout != got[i].PPLWithout {
			t.Errorf("pair %d: cached %v/%v, computed %v/%v", i, again[i].PPLWithout, again[i].PPLWith, got[i].PPLWithout, got[i].PPLWith)
		}
	}
}
