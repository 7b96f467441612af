package serve

import (
	"context"
	"math"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

// `label perplexity --scorer openai:<ragforge serve>` equals `--scorer
// t5:DIR` on the same model: the HTTP scorer detects the encoder_input
// extension and gets the same perplexities (1e-4 relative) and labels, on
// the first 20 AP questions with two candidates each (the question's own
// context and the next question's), scored by the fixture's tiny random
// T5 generator (what `models init --arch t5 --size tiny` writes).
func TestPerplexityOverHTTPEqualsLocal(t *testing.T) {
	qs, err := data.LoadAPQA(testutil.SharedPath(t, "data/ap_protocols_qa/dev.csv"))
	if err != nil {
		t.Fatal(err)
	}
	qs = qs[:21]
	var tasks []label.Task
	for i, q := range qs[:20] {
		tasks = append(tasks, label.Task{QueryID: q.ID, Question: q.Text, Target: q.Answer, Candidates: []data.Chunk{
			{ID: "own", Text: q.Context}, {ID: "next", Text: qs[i+1].Context},
		}})
	}
	f := newFixture(t, Options{})
	l := f.comps.Local.Local.(*lm.T5)
	local := lm.NewT5Scorer(f.genDir, l.Model, l.Tokenizer)
	remote := lm.NewHTTPScorer(openai.New(f.ts.URL, openai.Options{MaxRetries: -1}))
	if err := remote.Detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !remote.Seq2Seq {
		t.Fatal("ragforge serve's encoder_input extension was not detected")
	}
	want, err := (&label.PerplexityLabeler{Scorer: local}).Label(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&label.PerplexityLabeler{Scorer: remote}).Label(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 40 || len(want) != 40 {
		t.Fatalf("%d and %d labels, want 40", len(got), len(want))
	}
	rel := func(a, b float64) float64 { return math.Abs(a-b) / math.Abs(b) }
	helpful := 0
	for i := range want {
		g, w := got[i], want[i]
		if rel(g.PPLWithout, w.PPLWithout) > 1e-4 || rel(g.PPLWith, w.PPLWith) > 1e-4 {
			t.Errorf("%s: perplexities %v / %v over HTTP, %v / %v locally", w.ExampleID, g.PPLWithout, g.PPLWith, w.PPLWithout, w.PPLWith)
		}
		if g.Label != w.Label {
			t.Errorf("%s: label %s over HTTP, %s locally", w.ExampleID, g.Label, w.Label)
		}
		if w.Label == filter.Helpful {
			helpful++
		}
	}
	t.Logf("40 pairs equal; %d [HELPFUL] in both", helpful)
}

// A server that ignores encoder_input (vLLM) keeps the echo form.
func TestDetectKeepsEchoForOtherServers(t *testing.T) {
	f := newFixture(t, Options{})
	// The fixture answers encoder_input; a model that is not the generator
	// is refused with a 400, which Detect reads as "no extension".
	remote := lm.NewHTTPScorer(openai.New(f.ts.URL, openai.Options{MaxRetries: -1, Model: "filter"}))
	if err := remote.Detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if remote.Seq2Seq {
		t.Error("Seq2Seq set after a 400")
	}
}
