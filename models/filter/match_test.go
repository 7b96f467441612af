package filter

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	if m, err := MatchMarksOf(raw, true); err != nil || *m != DefaultMatchMarks() {
		t.Errorf("MatchMarksOf(%s) = %v, %v", raw, m, err)
	}
}
