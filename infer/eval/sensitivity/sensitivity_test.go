package sensitivity

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/retrieval"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCorrelationsHand(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5}
	y := []float64{2, 4, 5, 4, 5}
	// dx = -2..2, dy = -2,0,1,0,1: Sxy 6, Sxx 10, Syy 6.
	if r, err := Pearson(x, y); err != nil || !near(r, 6/math.Sqrt(60)) {
		t.Errorf("Pearson = %v, %v", r, err)
	}
	// ranks(y) = 1, 2.5, 4.5, 2.5, 4.5: Sxy 7, Syy 9.
	if r, err := Spearman(x, y); err != nil || !near(r, 7/math.Sqrt(90)) {
		t.Errorf("Spearman = %v, %v", r, err)
	}
	if got := Ranks([]float64{10, 20, 20, 5}); !reflect.DeepEqual(got, []float64{2, 3.5, 3.5, 1}) {
		t.Errorf("Ranks = %v", got)
	}
	// Monotone but not linear: Spearman 1, Pearson < 1.
	if r, _ := Spearman([]float64{1, 2, 3}, []float64{1, 4, 9}); !near(r, 1) {
		t.Errorf("Spearman monotone = %v", r)
	}
	if r, _ := Pearson([]float64{1, 2, 3}, []float64{3, 2, 1}); !near(r, -1) {
		t.Errorf("Pearson reversed = %v", r)
	}
	for _, bad := range [][2][]float64{{{1, 1, 1}, {1, 2, 3}}, {{1}, {1}}, {{1, 2}, {1}}, {{1, math.NaN()}, {1, 2}}} {
		if _, err := Pearson(bad[0], bad[1]); err == nil {
			t.Errorf("Pearson(%v, %v) accepted", bad[0], bad[1])
		}
	}
}

func TestReadVariants(t *testing.T) {
	want := []Variant{
		{QueryID: "q1", Variant: "short", Text: "Fixador?", Context: "Usar formol tamponado a 10%."},
		{QueryID: "q1", Variant: "wh", Text: "Qual é o fixador, e por quanto tempo?"},
		{QueryID: "q2", Variant: "yes/no", Text: "A lâmina\né corada com H&E?", Context: "Corar com H&E."},
	}
	for _, name := range []string{"variants.csv", "variants.jsonl"} {
		got, err := ReadVariants(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", name, got, want)
		}
	}
	qs := Queries(want)
	if len(qs) != 2 || qs[0].Context != "Usar formol tamponado a 10%." || qs[1].ID != "q2" {
		t.Errorf("Queries = %+v", qs)
	}
	bad := []struct{ csv, want string }{
		{"question_id,text\nq1,x\n", `line 1: field "variant": missing column`},
		{"question_id,variant,text\nq1,short,x\nq1,short,y\n", `line 3: field "variant": duplicate`},
		{"question_id,variant,text\nq1,short,\n", `line 2: field "text": empty`},
	}
	for _, b := range bad {
		_, err := ParseCSV(strings.NewReader(b.csv), "v.csv")
		if err == nil || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), "v.csv") {
			t.Errorf("%q: err %v, want %q", b.csv, err, b.want)
		}
	}
	if _, err := ParseJSONL(strings.NewReader("{\"question_id\": \"q\", \"variant\": \"a\", \"text\": \"t\"}\n{bad\n"), "v.jsonl"); err == nil || !strings.Contains(err.Error(), "v.jsonl: line 2") {
		t.Errorf("bad JSONL: %v", err)
	}
}

type mapRetriever map[string][]string

func (m mapRetriever) Search(q string, k int) ([]retrieval.Hit, error) {
	ids, ok := m[q]
	if !ok {
		return nil, errors.New("no index for " + q)
	}
	var out []retrieval.Hit
	for i, id := range ids[:min(k, len(ids))] {
		out = append(out, retrieval.Hit{ID: id, Score: float64(10 - i)})
	}
	return out, nil
}

type mapScorer map[string][]float64

func (mapScorer) Name() string { return "map" }
func (m mapScorer) TargetLogProbs(_ context.Context, prompt, target string) ([]float64, error) {
	if prompt != "Q:" {
		return nil, errors.New("wrong prompt " + prompt)
	}
	lp, ok := m[target]
	if !ok {
		return nil, errors.New("cannot score " + target)
	}
	return lp, nil
}

// Three questions, two formulations. P@1: short 1,0,0 (mean 1/3), long
// 1,1,1. Lengths: short 1,1,1, long 3,4,5. Perplexities: short e^1, e^2,
// e^3; long e^0.5, e^0.5, and l3 cannot be scored (a counted error).
func TestEvaluateHand(t *testing.T) {
	vs := []Variant{
		{QueryID: "q1", Variant: "short", Text: "s1"}, {QueryID: "q2", Variant: "short", Text: "s2"}, {QueryID: "q3", Variant: "short", Text: "s3"},
		{QueryID: "q1", Variant: "long", Text: "l1 a b"}, {QueryID: "q2", Variant: "long", Text: "l2 a b c"}, {QueryID: "q3", Variant: "long", Text: "l3 a b c d"},
	}
	r := mapRetriever{"s1": {"d1", "dx"}, "s2": {"dx", "d2"}, "s3": {"dx", "dy"}, "l1 a b": {"d1"}, "l2 a b c": {"d2", "d1"}, "l3 a b c d": {"d3"}}
	qrels := data.Qrels{"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
	sc := mapScorer{"s1": {-1}, "s2": {-2, -2}, "s3": {-3}, "l1 a b": {-0.5}, "l2 a b c": {-0.25, -0.75}}
	store, err := tracker.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	run, err := store.Start("eval-sensitivity", nil, "test", "go")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Evaluate(context.Background(), Config{Ks: []int{1, 2}, Prompt: "Q:"}, vs, r, qrels, sc, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Variants) != 2 || rep.Variants[0].Variant != "long" || rep.Variants[1].Variant != "short" {
		t.Fatalf("variants %+v", rep.Variants)
	}
	long, short := rep.Variants[0], rep.Variants[1]
	if !near(short.Means["P@1"], 1.0/3) || !near(long.Means["P@1"], 1) || !near(short.Means["Recall@2"], 2.0/3) {
		t.Errorf("means short %v long %v", short.Means, long.Means)
	}
	if !near(short.MeanPerplexity, (math.E+math.Exp(2)+math.Exp(3))/3) || short.PerplexityN != 3 {
		t.Errorf("short perplexity %v (n %d)", short.MeanPerplexity, short.PerplexityN)
	}
	if !near(long.MeanPerplexity, math.Exp(0.5)) || long.PerplexityN != 2 || long.Errors != 1 || rep.Errors != 1 {
		t.Errorf("long perplexity %v (n %d), errors %d/%d", long.MeanPerplexity, long.PerplexityN, long.Errors, rep.Errors)
	}
	if !near(long.MeanLength, 4) || !near(short.MeanLength, 1) {
		t.Errorf("lengths %v %v", long.MeanLength, short.MeanLength)
	}
	var lenP1, pplP1 *Correlation
	for i, c := range rep.Correlations {
		if c.Metric == "P@1" && c.X == "length" {
			lenP1 = &rep.Correlations[i]
		}
		if c.Metric == "P@1" && c.X == "perplexity" {
			pplP1 = &rep.Correlations[i]
		}
	}
	// length x = 1,1,1,3,4,5, P@1 y = 1,0,0,1,1,1: Sxy 3, Sxx 15.5, Syy 4/3.
	if lenP1 == nil || !lenP1.Defined || lenP1.N != 6 || !near(lenP1.Pearson, 3/math.Sqrt(15.5*4/3)) {
		t.Errorf("length vs P@1: %+v", lenP1)
	}
	// perplexity x = e, e², e³, e^.5, e^.5 with y = 1,0,0,1,1: ranks x 3,4,5,1.5,1.5,
	// ranks y 4,1.5,1.5,4,4 (both means 3); Sxy -7.5, Sxx 9.5, Syy 7.5.
	if pplP1 == nil || !pplP1.Defined || pplP1.N != 5 || !near(pplP1.Spearman, -7.5/math.Sqrt(9.5*7.5)) {
		t.Errorf("perplexity vs P@1: %+v", pplP1)
	}
	var p Point
	if ok, err := run.GetItem(ItemKind, "q3/long", &p); !ok || err != nil || p.Perplexity != nil || !strings.Contains(p.Errors["perplexity"], "cannot score") || p.Metrics["P@1"] != 1 {
		t.Errorf("item q3/long: %+v (%v %v)", p, ok, err)
	}
	d, err := store.Get(run.ID)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range d.Metrics {
		names[m.Name] = true
	}
	for _, n := range []string{"P@1/short", "perplexity/long", "length/short", "pearson(length,P@1)", "spearman(perplexity,P@1)"} {
		if !names[n] {
			t.Errorf("metric %q not logged", n)
		}
	}
}
