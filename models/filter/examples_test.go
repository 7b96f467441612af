package filter

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// goldenExamples is what testdata/examples.{json,jsonl} hold, written out by hand.
var goldenExamples = []Example{
	{
		ID:          "q1#d1#0",
		Question:    "Given the following evidence, determine whether it helps answer the provided question.\n\nEvidence: Corar com Azul de Toluidina 1 min.\n\nQuestion: Qual é o tempo de coloração?",
		Answer:      Helpful,
		DatasetName: "ap_qa",
	},
	{
		ID:          "q1#d2#0",
		Question:    "Given the following evidence, determine whether it helps answer the provided question.\n\nEvidence: Desparafinar & hidratar <b>os</b> cortes.\n\nQuestion: Qual é o tempo de coloração?",
		Answer:      NotHelpful,
		DatasetName: "ap_qa",
	},
}

func TestReadExamplesGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []Example
	}{
		{"examples.json", goldenExamples},
		{"examples.jsonl", goldenExamples},
		{"release_style.jsonl", []Example{
			{ID: "medqa-7", Question: Instruction("Aspirin irreversibly inhibits COX-1.", "Which enzyme does aspirin inhibit?"), Answer: Helpful},
			{ID: "medqa-8", Question: Instruction("Question: is this a trap?", "Which enzyme does aspirin inhibit?"), Answer: NotHelpful, DatasetName: "medqa"},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ReadExamples(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestWriteExamplesGolden(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		golden string
		write  func(string, []Example) error
	}{
		{"examples.json", WriteJSON},
		{"examples.jsonl", WriteJSONL},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			path := filepath.Join(dir, tc.golden)
			if err := tc.write(path, goldenExamples); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			want, err := os.ReadFile(filepath.Join("testdata", tc.golden))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("written file differs from golden\n got: %s\nwant: %s", got, want)
			}
		})
	}
}

func TestReadExamplesErrors(t *testing.T) {
	good := `{"id":"a","question":` + quote(Instruction("ev", "q?")) + `,"answer":"[HELPFUL]","dataset_name":"x"}`
	for _, tc := range []struct {
		name    string
		content string
		want    []string // substrings of the error besides the file name
		is      error
	}{
		{"empty file", "", []string{"file holds no examples"}, ErrEmpty},
		{"blank file", " \n\n", []string{"file holds no examples"}, ErrEmpty},
		{"empty array", "[ ]", []string{"file holds no examples"}, ErrEmpty},
		{"bad label jsonl", good + "\n" + strings.Replace(strings.Replace(good, `"a"`, `"b"`, 1), "[HELPFUL]", "HELPFUL", 1),
			[]string{"record 2 (line 2)", `field "answer"`, `"HELPFUL"`}, nil},
		{"lowercase label json", "[\n" + good + ",\n" + strings.Replace(strings.Replace(good, `"a"`, `"b"`, 1), "[HELPFUL]", "[helpful]", 1) + "\n]",
			[]string{"record 2 (line 3)", `field "answer"`}, nil},
		{"json array: late record keeps its line", "[\n" + good + ",\n\n" + strings.Replace(good, `"a"`, `"b"`, 1) + ",\n" +
			strings.Replace(strings.Replace(good, `"a"`, `"c"`, 1), "[HELPFUL]", "yes", 1) + "\n]",
			[]string{"record 3 (line 5)", `field "answer"`}, nil},
		{"json array: broken record", "[\n" + good + ",\n{\"id\": \n]", []string{"record 2 (near line 2)", "invalid character"}, nil},
		{"missing question", `{"id":"a","answer":"[HELPFUL]"}`, []string{"record 1 (line 1)", `field "question": missing`}, nil},
		{"missing answer", "\n\n" + strings.Replace(good, `"answer":"[HELPFUL]",`, "", 1), []string{"record 1 (line 3)", `field "answer": missing`}, nil},
		{"question not instruction", `{"id":"a","question":"What is X?","answer":"[HELPFUL]"}`, []string{"record 1", `field "question"`, "does not start with"}, nil},
		{"id not string", strings.Replace(good, `"a"`, `7`, 1), []string{"record 1", `field "id": not a string`}, nil},
		{"empty id", strings.Replace(good, `"a"`, `""`, 1), []string{"record 1", `field "id": empty`}, nil},
		{"duplicate id", good + "\n" + good, []string{"record 2 (line 2)", `duplicate id "a" (first in record 1)`}, nil},
		{"broken json line", good + "\n{\"id\": ", []string{"record 2 (line 2)", "not a JSON object"}, nil},
		{"not json", "id,question\n", []string{"neither a JSON array nor JSONL"}, nil},
		{"trailing data", "[" + good + "] x", []string{"trailing data"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.jsonl")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadExamples(path)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append([]string{path}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

func TestWriteExamplesKeepsFileOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	if err := WriteJSON(path, goldenExamples); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	bad := append([]Example{}, goldenExamples...)
	bad = append(bad, Example{ID: "z", Question: Instruction("e", "q"), Answer: "yes"})
	err := WriteJSON(path, bad)
	if err == nil || !strings.Contains(err.Error(), `record 3: field "answer"`) {
		t.Fatalf("want record 3 answer error, got %v", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("a failed write changed the existing file")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestFormatOf(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		want       Format
		err        bool
	}{
		{"", "a.json", FormatJSON, false},
		{"", "a.JSONL", FormatJSONL, false},
		{"", "a.ndjson", FormatJSONL, false},
		{"", "a.txt", FormatJSON, false},
		{"jsonl", "a.json", FormatJSONL, false},
		{"csv", "a.json", "", true},
	} {
		got, err := FormatOf(tc.name, tc.path)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("FormatOf(%q, %q) = %q, %v; want %q, err %v", tc.name, tc.path, got, err, tc.want, tc.err)
		}
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\n':
			b.WriteString(`\n`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
