package filter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testdata/match_marks.json: evidence, question and the marked evidence
// MatchMarks writes, one case per rule of its doc comment.
func TestMatchMarksGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "match_marks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name, Evidence, Question, Want string
		Marks                          *MatchMarks
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 6 {
		t.Fatalf("%d golden cases, want the 6+ of testdata/match_marks.json", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			m := DefaultMatchMarks()
			if tc.Marks != nil {
				m = *tc.Marks
			}
			got, err := m.Mark(Instruction(tc.Evidence, tc.Question))
			if err != nil {
				t.Fatal(err)
			}
			if want := Instruction(tc.Want, tc.Question); got != want {
				t.Fatalf("Mark:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestMatchMarksErrors(t *testing.T) {
	if _, err := DefaultMatchMarks().Mark("Evidence: x\n\nQuestion: y"); err == nil || !strings.Contains(err.Error(), "does not start with") {
		t.Errorf("Mark of a non-RAG² instruction: %v", err)
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"marker":"","min_chars":3,"max_run":5}`, "marker"},
		{`{"marker":"@x","min_chars":3,"max_run":5}`, "letters or digits"},
		{`{"marker":" @","min_chars":3,"max_run":5}`, "surrounding spaces"},
		{`{"marker":"@","min_chars":0,"max_run":5}`, "min_chars 0"},
		{`{"marker":"@","min_chars":3,"max_run":0}`, "max_run 0"},
		{`{"marker":"@","min_chars":3,"max_run":5,"extra":1}`, "unknown field"},
		{`{"marker":"@","min_chars":3,"max_run":5,"prefix_chars":-1}`, "prefix_chars -1"},
		{`{"marker":"@","min_chars":3,"max_run":5,"rare_doc_fractions":[0.05]}`, "without doc_freq"},
		{`{"marker":"@","min_chars":3,"max_run":5,"rare_doc_fractions":[1],"doc_freq":{"docs":3,"counts":{}}}`, "[1] holds 1"},
		{`{"marker":"@","min_chars":3,"max_run":5,"doc_freq":{"docs":3,"counts":{}}}`, "doc_freq without rare_doc_fractions"},
		{`{"marker":"@","min_chars":3,"max_run":5,"rare_doc_fractions":[0.5],"doc_freq":{"docs":0,"counts":{}}}`, "doc_freq.docs 0"},
		{`{"marker":"@","min_chars":3,"max_run":5,"rare_doc_fractions":[0.5],"doc_freq":{"docs":3,"counts":{"a":4}}}`, `counts["a"] = 4`},
		{`"@"`, "cannot unmarshal"},
	} {
		_, err := MatchMarksOf(json.RawMessage(tc.raw), true)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), MatchMarksKey) {
			t.Errorf("MatchMarksOf(%s): %v, want an error naming %s and %q", tc.raw, err, MatchMarksKey, tc.want)
		}
	}
	if m, err := MatchMarksOf(nil, false); m != nil || err != nil {
		t.Errorf("MatchMarksOf without the key = %v, %v; want nil, nil", m, err)
	}
	raw, _ := json.Marshal(DefaultMatchMarks())
	if m, err := MatchMarksOf(raw, true); err != nil || !reflect.DeepEqual(*m, DefaultMatchMarks()) {
		t.Errorf("MatchMarksOf(%s) = %v, %v", raw, m, err)
	}
}

// WithDocFreq counts each distinct evidence text once and each word once
// per text, and keeps only the words above the smallest fraction.
func TestMatchMarksWithDocFreq(t *testing.T) {
	m := DefaultMatchMarks()
	if got := m.WithDocFreq([]string{"a b"}); got.DocFreq != nil {
		t.Errorf("WithDocFreq without rare_doc_fractions set DocFreq %+v", got.DocFreq)
	}
	m.RareDocFractions = []float64{0.9, 0.5}
	got := m.WithDocFreq([]string{"Ácido b", "Ácido b", "acido acido c", "acido f", "ddd"})
	want := &DocFreq{Docs: 4, Counts: map[string]int{"acido": 3}} // 3 > 0.5 × 4 is kept; 1 ≤ 2 is not
	if !reflect.DeepEqual(got.DocFreq, want) {
		t.Fatalf("DocFreq = %+v, want %+v", got.DocFreq, want)
	}
	if err := got.Check(); err != nil {
		t.Fatal(err)
	}
	marked, err := got.Mark(Instruction("acido e ddd", "acido ddd"))
	if err != nil {
		t.Fatal(err)
	}
	if want := Instruction("@@ acido e @@@ ddd", "acido ddd"); marked != want { // acido ≤ 0.9 × 4 only; ddd at or below both
		t.Errorf("Mark = %q, want %q", marked, want)
	}
}
