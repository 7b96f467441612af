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
// q2 has only a non-relevant judgment (scored 0 and counted); q3 is
// judged but absent from the run (scores 0); q4 finds its only relevant
// document at rank 11; qX is retrieved but not judged (a question without
// relevant chunks: scored 0, counted in Mean, not in MeanJudged).
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
		"P@1": 0, "Recall@1": 0, "Success@1": 0, "F1@1": 0, "nDCG@1": 0, "MRR@1": 0,
		// 1 relevant in top 2 (rank 2): P 1/2, R 1/3, F1 2(1/2)(1/3)/(5/6) = 0.4.
		"P@2": 0.5, "Recall@2": 1.0 / 3, "Success@2": 1, "F1@2": 0.4, "MRR@2": 0.5,
		"nDCG@2": (2 / l2(3)) / (2 + 1/l2(3)), // 1.2619/2.6309 = 0.4796
		// 2 relevant in top 4: P 2/4, R 2/3, F1 (2/3)/(7/6) = 4/7.
		"P@4": 0.5, "Recall@4": 2.0 / 3, "Success@4": 1, "F1@4": 4.0 / 7, "MRR@4": 0.5,
		"nDCG@4": (2/l2(3) + 1/l2(5)) / idcg3, // 1.6925/3.1309 = 0.5406
		// k beyond the 4 hits: P divides by k. P@8 = 2/8, F1 = (1/3)/(11/12) = 4/11.
		"P@8": 0.25, "Recall@8": 2.0 / 3, "Success@8": 1, "F1@8": 4.0 / 11, "MRR@8": 0.5, "nDCG@8": (2/l2(3) + 1/l2(5)) / idcg3,
		// P@10 = 2/10, F1 = (4/15)/(13/15) = 4/13.
		"P@10": 0.2, "Recall@10": 2.0 / 3, "Success@10": 1, "F1@10": 4.0 / 13, "MRR@10": 0.5, "nDCG@10": (2/l2(3) + 1/l2(5)) / idcg3,
		// AP: relevant at ranks 2 and 4 (precisions 1/2, 2/4), R = 3 (d3 never retrieved).
		"MAP": (0.5 + 0.5) / 3, "R-Prec": 1.0 / 3, "Recall@100": 2.0 / 3, "Recall@1000": 2.0 / 3, // top 3 = d4 d1 d5
	}
	// q2: judged, no relevant document: every metric 0. q3: judged, not
	// retrieved: every metric 0.
	q2, q3 := map[string]float64{}, map[string]float64{}
	// q4: only relevant doc at rank 11.
	q4 := map[string]float64{"Recall@100": 1, "Recall@1000": 1, "MAP": 1.0 / 11} // MRR@10 0, R-Prec 0 (top 1 is n01)
	for _, k := range []int{1, 2, 4, 8, 10} {
		for _, m := range []map[string]float64{q2, q3, q4} {
			for _, n := range []string{PName(k), RecallName(k), SuccessName(k), F1Name(k), NDCGName(k), MRRName(k)} {
				m[n] = 0
			}
		}
	}
	for _, m := range []map[string]float64{q2, q3} {
		m["MAP"], m["R-Prec"], m["Recall@100"], m["Recall@1000"] = 0, 0, 0, 0
	}
	q4["R-Prec"] = 0

	run, qrels := fixture()
	rep, err := Evaluate(run, qrels, []int{8, 4, 2, 1, 4})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 4, 8, 10}; !reflect.DeepEqual(rep.Ks, want) {
		t.Errorf("Ks = %v, want %v", rep.Ks, want)
	}
	if want := []string{"q1", "q2", "q3", "q4", "qX"}; !reflect.DeepEqual(rep.Queries, want) {
		t.Errorf("Queries = %v, want %v", rep.Queries, want)
	}
	if want := []string{"q1", "q2", "q3", "q4"}; !reflect.DeepEqual(rep.Judged, want) {
		t.Errorf("Judged = %v, want %v", rep.Judged, want)
	}
	if want := []string{"qX"}; !reflect.DeepEqual(rep.Unjudged, want) {
		t.Errorf("Unjudged = %v, want %v", rep.Unjudged, want)
	}
	if len(rep.Metrics) != 6*5+4 {
		t.Errorf("Metrics has %d names: %v", len(rep.Metrics), rep.Metrics)
	}
	qX := map[string]float64{}
	for _, n := range rep.Metrics {
		qX[n] = 0
	}
	for qid, want := range map[string]map[string]float64{"q1": q1, "q2": q2, "q3": q3, "q4": q4, "qX": qX} {
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
	// MeanJudged: over q1..q4, trec_eval -c's figure (q2 counts with 0);
	// Mean: over all five questions, qX a miss.
	for name, sum := range map[string]float64{
		"P@2":        0.5,
		"Recall@100": 2.0/3 + 0 + 0 + 1,
		"MRR@10":     0.5,
		"MRR@1":      0,
		"Success@2":  1.0,
		"MAP":        1.0/3 + 1.0/11,
		"nDCG@4":     q1["nDCG@4"],
	} {
		if got := rep.MeanJudged[name]; math.Abs(got-sum/4) > 1e-12 {
			t.Errorf("mean over the judged %s = %v, want %v", name, got, sum/4)
		}
		if got := rep.Mean[name]; math.Abs(got-sum/5) > 1e-12 {
			t.Errorf("mean over all %s = %v, want %v", name, got, sum/5)
		}
	}
}

// TestEvaluateGradeZero is the pytrec_eval example: query a judges x
// relevant, query b judges y non-relevant (grade 0); both retrieve their one
// document. pytrec_eval and trec_eval score b 0 and average over both.
func TestEvaluateGradeZero(t *testing.T) {
	run := Run{"a": hits("x", 1.0), "b": hits("y", 1.0)}
	qrels := data.Qrels{"a": {"x": 1}, "b": {"y": 0}}
	rep, err := Evaluate(run, qrels, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"Recall@1": 0.5, "P@1": 0.5, "Success@1": 0.5, "MRR@1": 0.5, "nDCG@1": 0.5, "MAP": 0.5, "R-Prec": 0.5,
	} {
		if got := rep.Mean[name]; math.Abs(got-want) > 1e-12 {
			t.Errorf("mean %s = %v, want %v", name, got, want)
		}
	}
	if !reflect.DeepEqual(rep.Queries, []string{"a", "b"}) || len(rep.Unjudged) != 0 {
		t.Errorf("queries %v unjudged %v, want [a b] []", rep.Queries, rep.Unjudged)
	}
}

// TestEvaluateMAPAndMRRCutoffs checks MAP, MRR@k and Success@k on a ranking
// with relevant documents at ranks 1, 3 and 6 of 6 and a fourth never
// retrieved: AP = (1/1 + 2/3 + 3/6) / 4 (trec_eval map).
func TestEvaluateMAPAndMRRCutoffs(t *testing.T) {
	run := Run{
		"q": hits("r1", 6.0, "n1", 5.0, "r2", 4.0, "n2", 3.0, "n3", 2.0, "r3", 1.0),
		// First relevant at rank 3: MRR@1 = MRR@2 = 0, MRR@4 = 1/3.
		"p": hits("n1", 3.0, "n2", 2.0, "s", 1.0),
	}
	qrels := data.Qrels{"q": {"r1": 1, "r2": 1, "r3": 1, "r4": 1}, "p": {"s": 1}}
	rep, err := Evaluate(run, qrels, []int{1, 2, 4})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]float64{
		"q": {"MAP": (1 + 2.0/3 + 3.0/6) / 4, "MRR@1": 1, "Success@1": 1, "Recall@4": 0.5, "R-Prec": 0.5},
		"p": {"MAP": 1.0 / 3, "MRR@1": 0, "MRR@2": 0, "MRR@4": 1.0 / 3, "MRR@10": 1.0 / 3,
			"Success@1": 0, "Success@2": 0, "Success@4": 1, "Recall@2": 0, "Recall@4": 1},
	}
	for q, m := range want {
		for name, w := range m {
			if g := rep.PerQuery[q][name]; math.Abs(g-w) > 1e-12 {
				t.Errorf("%s %s = %v, want %v", q, name, g, w)
			}
		}
	}
}

func TestEvaluateQuerySet(t *testing.T) {
	run, qrels := fixture()
	// q3 and q4 are judged but not in the query set, qX is run but not in
	// it: not evaluated. qY is in the set without judgments and qE with
	// judgments {}: each a miss scoring 0, counted in Mean.
	qrels["qE"] = map[string]int{}
	rep, err := EvaluateOptions(run, qrels, []int{1}, Options{Queries: []string{"q1", "q2", "qY", "qE"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"q1", "q2", "qE", "qY"}; !reflect.DeepEqual(rep.Queries, want) {
		t.Errorf("Queries = %v, want %v", rep.Queries, want)
	}
	if want := []string{"qE", "qY"}; !reflect.DeepEqual(rep.Unjudged, want) {
		t.Errorf("Unjudged = %v, want %v", rep.Unjudged, want)
	}
	// q1's top hit d4 is judged 0: Success@1 is 0 for every query here;
	// Success@10 is 1 for q1 only: 1/4 over all, 1/2 over the judged.
	if got, gotJ := rep.Mean["Success@10"], rep.MeanJudged["Success@10"]; got != 0.25 || gotJ != 0.5 {
		t.Errorf("Success@10 = %v over all, %v over the judged; want 0.25, 0.5", got, gotJ)
	}
}

func TestCheckQrels(t *testing.T) {
	_, qrels := fixture()
	qrels["q5"] = map[string]int{"d1": 1, "gone": 1}
	qrels["q6"] = map[string]int{} // no judgments: not a judged query
	c := CheckQrels(qrels, []string{"q1", "q2", "q3", "q4", "q6"}, []string{"d1", "d2", "d3", "d4", "r"})
	// q1 judges d1..d4 (all known); q3 judges d9; q5 is not a query and
	// judges the unknown "gone".
	if want := []string{"q5"}; !reflect.DeepEqual(c.UnknownQueries, want) {
		t.Errorf("UnknownQueries = %v, want %v", c.UnknownQueries, want)
	}
	if c.UnknownDocs != 2 || !reflect.DeepEqual(c.UnknownDocIDs, []string{"d9", "gone"}) {
		t.Errorf("UnknownDocs = %d %v, want 2 [d9 gone]", c.UnknownDocs, c.UnknownDocIDs)
	}
	if c.OK() {
		t.Error("OK() = true")
	}
	if c := CheckQrels(data.Qrels{"a": {"x": 0}}, []string{"a"}, []string{"x"}); !c.OK() {
		t.Errorf("clean qrels: %+v", c)
	}
}

func TestFill(t *testing.T) {
	run := Run{"a": hits("x", 3.0, "y", 2.0, "x", 1.0), "b": hits("x", 1.0, "y", 1.0, "z", 1.0), "c": nil}
	f := NewFill(run, 3, 0)
	if want := map[string]int{"a": 2, "b": 3, "c": 0}; !reflect.DeepEqual(f.Hits, want) {
		t.Errorf("Hits = %v, want %v (duplicates count once)", f.Hits, want)
	}
	if got := f.Short(); !reflect.DeepEqual(got, []string{"a", "c"}) {
		t.Errorf("Short = %v, want [a c]", got)
	}
	if lo, hi := f.Range(); lo != 0 || hi != 3 {
		t.Errorf("Range = %d..%d, want 0..3", lo, hi)
	}
	// An index of 2 vectors cannot give 3 hits: only c falls short.
	if got := NewFill(run, 3, 2).Short(); !reflect.DeepEqual(got, []string{"c"}) {
		t.Errorf("capped Short = %v, want [c]", got)
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
	// No judged query at all: means are 0, every run query unjudged.
	rep, err := Evaluate(Run{"a": hits("x", 1.0)}, data.Qrels{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Judged) != 0 || !reflect.DeepEqual(rep.Unjudged, []string{"a"}) || rep.Mean["P@10"] != 0 || rep.MeanJudged["P@10"] != 0 {
		t.Errorf("got judged %v unjudged %v mean %v", rep.Judged, rep.Unjudged, rep.Mean)
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
	rep.Fill = NewFill(run, 8, 0)
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

	b.Reset()
	if err := WriteQrels(&b, qrels); err != nil {
		t.Fatal(err)
	}
	golden(t, "qrels.tsv.golden", b.Bytes())
	for _, bad := range []data.Qrels{{"q 1": {"a": 1}}, {"q": {"a b": 1}}, {"": {"a": 1}}} {
		if err := WriteQrels(&b, bad); err == nil {
			t.Errorf("WriteQrels(%v) accepted", bad)
		}
	}

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
