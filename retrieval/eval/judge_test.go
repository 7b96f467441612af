package eval

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
)

func TestJudge(t *testing.T) {
	docs := []data.Document{{ID: "d1", Text: "the aspirin dose is 81 mg daily. nothing else here."}}
	chunks := []data.Chunk{
		{ID: "d1#0", DocID: "d1", Text: "the aspirin dose is 81 mg daily.", Start: 0, End: 32},
		{ID: "d1#1", DocID: "d1", Index: 1, Text: "nothing else here.", Start: 33, End: 51},
	}
	queries := []data.Query{{ID: "q1", Text: "aspirin dose?", Context: "the aspirin dose is 81 mg daily."}}
	all := []string{"q1", "q2"}
	built, err := BuildQrels(queries, chunks, Rule{})
	if err != nil {
		t.Fatal(err)
	}
	beir := data.Qrels{"q1": {"d1": 1}, "q9": {"d7": 1}}
	tests := []struct {
		name      string
		qrels     data.Qrels
		relevance string
		want      Judgments
		err       string
	}{
		{"QA set by containment", nil, RelevanceContains, Judgments{Qrels: built, Relevance: RelevanceContains, Check: CheckQrels(built, all, []string{"d1#0", "d1#1"})}, ""},
		{"BEIR qrels kept, checked against documents", beir, RelevanceSpan, Judgments{Qrels: beir, Relevance: RelevanceQrels,
			Check: QrelsCheck{UnknownQueries: []string{"q9"}, UnknownDocs: 1, UnknownDocIDs: []string{"d7"}}}, ""},
		{"unknown rule", nil, "fuzzy", Judgments{}, `relevance "fuzzy"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Judge(queries, all, tc.qrels, docs, chunks, tc.relevance)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Judge =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
	if len(built["q1"]) != 1 || built["q1"]["d1#0"] == 0 {
		t.Errorf("containment qrels %v, want only d1#0", built)
	}
}
