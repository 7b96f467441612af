package eval

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func hits(pairs ...any) []retrieval.Hit {
	var out []retrieval.Hit
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, retrieval.Hit{ID: pairs[i].(string), Score: pairs[i+1].(float64)})
	}
	return out
}

// fixture: q1 has graded judgments and a run with a duplicate and a score tie;
// q2 has only a non-relevant judgment (skipped although retrieved); q3 is
// judged but absent from the run (scores 0); q4 finds its only relevant
// document at rank 11; qX is retrieved but not judged (skipped).
func fixture() (Run, data.Qrels) {
	run := Run{
		// Given order d4 d1 d4(dup) d2 d5. The duplicate d4@0.7 is dropped;
		// trec_eval order sorts the 0.5 tie by id descending: d4 d1 d5 d2.
		"q1": hits("d4", 0.9, "d1", 0.8, "d4", 0.7, "d2", 0.5, "d5", 0.5),
		"q2": hits("d1", 1.0),
		"q4": hits("n01", 11.0, "n02", 10.0, "n03", 9.0, "n04", 8.0, "n05", 7.0,
			"n06", 6.0, "n07", 5.0, "n08", 4.0, "n09", 3.0, "n10", 2.0, "r", 1.0),
		"qX": hits("d1", 1.0),
	}
	qrels := data.Qrels{
		"q1": {"d1": 2, "d2": 1, "d3": 1, "d4": 0},
		"q2": {"d1": 0},
		"q3": {"d9": 1},
		"q4": {"r": 1},
	}
	return run, qrels
}

func TestEvaluatePerQuery(t *testing.T) {
	l2 := math.Log2
	// q1, trec_eval order d4 d1 d5 d2, gains 0 2 0 1, R = 3, ideal gains 2 1 1.
	idcg3 := 2 + 1/l2(3) + 1/l2(4) // 3.1309
	q1 := map[string]float64{
		"P@1": 0, "Recall@1": 0, "F1@1": 0, "nDCG@1": 0,
		// 1 relevant in top 2: P 1/2, R 1/3, F1 2(1/2)(1/3)/(5/6) = 0.4.
		"P@2": 0.5, "Recall@2": 1.0 / 3, "F1@2": 0.4,
		"nDCG@2": (2 / l2(3)) / (2 + 1/l2(3)), // 1.2619/2.6309 = 0.4796
		// 2 relevant in top 4: P 2/4, R 2/3, F1 (2/3)/(7/6) = 4/7.
		"P@4": 0.5, "Recall@4": 2.0 / 3, "F1@4": 4.0 / 7,
		"nDCG@4": (2/l2(3) + 1/l2(5)) / idcg3, // 1.6925/3.1309 = 0.5406
		// k beyond the 4 hits: P divides by k. P@8 = 2/8, F1 = (1/3)/(11/12) = 4/11.
		"P@8": 0.25, "Recall@8": 2.0 / 3, "F1@8": 4.0 / 11, "nDCG@8": (2/l2(3) + 1/l2(5)) / idcg3,
		// P@10 = 2/10, F1 = (4/15)/(13/15) = 4/13.
		"P@10": 0.2, "Recall@10": 2.0 / 3, "F1@10": 4.0 / 13, "nDCG@10": (2/l2(3) + 1/l2(5)) / idcg3,
		"MRR@10": 0.5, "R-Prec": 1.0 / 3, "Recall@100": 2.0 / 3, // top 3 = d4 d1 d5
	}
	// q3: judged, not retrieved: everything 0.
	q3 := map[string]float64{}
	// q4: only relevant doc at rank 11.
	q4 := map[string]float64{"Recall@100": 1} // MRR@10 0, R-Prec 0 (top 1 is n01)
	for _, k := range []int{1, 2, 4, 8, 10} {
		for _, m := range []map[string]float64{q3, q4} {
			for _, n := range []string{PName(k), RecallName(k), F1Name(k), NDCGName(k)} {
				m[n] = 0
			}
		}
	}
	q3["MRR@10"], q3["R-Prec"], q3["Recall@100"] = 0, 0, 0
	q4["MRR@10"], q4["R-Prec"] = 0, 0

	run, qrels := fixture()
	rep, err := Evaluate(run, qrels, []int{8, 4, 2, 1, 4})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 4, 8, 10}; !reflect.DeepEqual(rep.Ks, want) {
		t.Errorf("Ks = %v, want %v", rep.Ks, want)
	}
	if want := []string{"q1", "q3", "q4"}; !reflect.DeepEqual(rep.Queries, want) {
		t.Errorf("Queries = %v, want %v", rep.Queries, want)
	}
	if want := []string{"q2", "qX"}; !reflect.DeepEqual(rep.Skipped, want) {
		t.Errorf("Skipped = %v, want %v", rep.Skipped, want)
	}
	if len(rep.Metrics) != 4*5+3 {
		t.Errorf("Metrics has %d names: %v", len(rep.Metrics), rep.Metrics)
	}
	for qid, want := range map[string]map[string]float64{"q1": q1, "q3": q3, "q4": q4} {
		got := rep.PerQuery[qid]
		if len(got) != len(want) {
			t.Errorf("%s: %d metrics, want %d: %v", qid, len(got), len(want), got)
		}
		for name, w := range want {
			if g, ok := got[name]; !ok || math.Abs(g-w) > 1e-12 {
				t.Errorf("%s %s = %v (present %v), want %v", qid, name, g, ok, w)
			}
		}
	}
	// Means over q1, q3, q4 only (q2, qX skipped).
	for name, want := range map[string]float64{
		"P@2":        0.5 / 3,
		"Recall@100": (2.0/3 + 0 + 1) / 3,
		"MRR@10":     0.5 / 3,
		"nDCG@4":     q1["nDCG@4"] / 3,
	} {
		if got := rep.Mean[name]; math.Abs(got-want) > 1e-12 {
			t.Errorf("mean %s = %v, want %v", name, got, want)
		}
	}
}

func TestEvaluateKeepOrder(t *testing.T) {
	run, qrels := fixture()
	rep, err := EvaluateOptions(run, qrels, []int{4}, Options{KeepOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	// Given order without the duplicate: d4 d1 d2 d5, gains 0 2 1 0.
	l2 := math.Log2
	want := map[string]float64{
		"P@4":    0.5,
		"nDCG@4": (2/l2(3) + 1/l2(4)) / (2 + 1/l2(3) + 1/l2(4)), // 1.7619/3.1309 = 0.5628
		"R-Prec": 2.0 / 3,                                       // top 3 = d4 d1 d2
	}
	for name, w := range want {
		if g := rep.PerQuery["q1"][name]; math.Abs(g-w) > 1e-12 {
			t.Errorf("q1 %s = %v, want %v", name, g, w)
		}
	}
}

func TestEvaluateEmpty(t *testing.T) {
	// No judged query at all: means are 0, every run query skipped.
	rep, err := Evaluate(Run{"a": hits("x", 1.0)}, data.Qrels{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Queries) != 0 || !reflect.DeepEqual(rep.Skipped, []string{"a"}) || rep.Mean["P@10"] != 0 {
		t.Errorf("got queries %v skipped %v mean %v", rep.Queries, rep.Skipped, rep.Mean)
	}
}

func TestEvaluateErrors(t *testing.T) {
	tests := []struct {
		name string
		run  Run
		ks   []int
		want string
	}{
		{"zero cutoff", Run{}, []int{0}, "cutoff 0"},
		{"empty id", Run{"q": hits("", 1.0)}, nil, `query "q": hit 0: field "ID"`},
		{"nan score", Run{"q": hits("a", 1.0, "b", math.NaN())}, nil, `hit 1 (b): field "Score": NaN`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Evaluate(tt.run, data.Qrels{"q": {"a": 1}}, tt.ks)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func TestRankDoesNotModifyInput(t *testing.T) {
	in := hits("a", 1.0, "b", 2.0, "a", 3.0)
	got := Rank(in, false)
	if want := hits("b", 2.0, "a", 1.0); !reflect.DeepEqual(got, want) {
		t.Errorf("Rank = %v, want %v", got, want)
	}
	if in[0].ID != "a" || len(in) != 3 {
		t.Errorf("input modified: %v", in)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

func TestOutputsGolden(t *testing.T) {
	run, qrels := fixture()
	rep, err := Evaluate(run, qrels, []int{1, 2, 4, 8})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.Table(&b, []int{1, 2, 4, 8}); err != nil {
		t.Fatal(err)
	}
	golden(t, "table.golden", b.Bytes())

	b.Reset()
	if err := rep.WritePerQueryJSONL(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "per_query.jsonl.golden", b.Bytes())

	b.Reset()
	if err := WriteTREC(&b, Run{"q1": run["q1"], "q0": hits("z", 0.25)}, "bm25"); err != nil {
		t.Fatal(err)
	}
	golden(t, "run.trec.golden", b.Bytes())

	if err := rep.Table(&b, []int{3}); err == nil || !strings.Contains(err.Error(), "cutoff 3") {
		t.Errorf("Table(k=3) err = %v", err)
	}
	for _, bad := range []struct {
		run Run
		tag string
	}{{Run{"q": hits("a", 1.0)}, "two words"}, {Run{"q": hits("a b", 1.0)}, "t"}, {Run{"q 1": hits("a", 1.0)}, "t"}, {Run{}, ""}} {
		if err := WriteTREC(&b, bad.run, bad.tag); err == nil {
			t.Errorf("WriteTREC(%v, %q) accepted", bad.run, bad.tag)
		}
	}
}
