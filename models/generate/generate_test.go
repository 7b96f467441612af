package generate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

func TestICTQueries(t *testing.T) {
	doc := "Gout is caused by uric acid. Short one. Aspirin lowers fever in adults today."
	want := map[string]bool{"Gout is caused by uric acid.": true, "Aspirin lowers fever in adults today.": true}
	outs, errs := ICT{}.Queries(context.Background(), []string{doc, "", "  "}, lm.Options{Seed: 3, N: 2})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if len(outs[0]) != 2 || outs[0][0] == outs[0][1] || !want[outs[0][0]] || !want[outs[0][1]] {
		t.Fatalf("queries %q: want the two long sentences once each", outs[0])
	}
	for i := 1; i < 3; i++ {
		if !errors.Is(errs[i], lm.ErrEmpty) {
			t.Errorf("doc %d: err %v, want ErrEmpty", i, errs[i])
		}
	}
	// Same (seed, doc) → same query, alone or in a batch.
	a, _ := ICT{}.Queries(context.Background(), []string{doc}, lm.Options{Seed: 3, N: 2})
	if strings.Join(a[0], "|") != strings.Join(outs[0], "|") {
		t.Fatalf("batch-dependent: %q vs %q", a[0], outs[0])
	}
	// Over seeds, both long sentences are drawn and the short one never.
	seen := map[string]bool{}
	for s := range int64(40) {
		o, _ := ICT{}.Queries(context.Background(), []string{doc}, lm.Options{Seed: s})
		seen[o[0][0]] = true
	}
	if len(seen) != 2 || !seen["Gout is caused by uric acid."] || !seen["Aspirin lowers fever in adults today."] {
		t.Fatalf("drawn sentences %v", seen)
	}
}

func TestICTHypoDocs(t *testing.T) {
	doc := "A one. B two. C three. D four. E five."
	tests := []struct {
		name, query, doc string
		want             []string
	}{
		{"windows", "C three.", doc, []string{"B two. D four.", "A one. B two. D four. E five.", "A one. B two. D four. E five."}},
		{"first sentence", "A one.", doc, []string{"B two.", "B two. C three.", "B two. C three. D four."}},
		{"unknown doc", "what is gout?", "", []string{"what is gout?", "what is gout?", "what is gout?"}},
		{"not in doc", "what is gout?", doc, []string{"what is gout?", "what is gout?", "what is gout?"}},
		{"single sentence", "A one.", "A one.", []string{"A one.", "A one.", "A one."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outs, errs := HypoDocs(context.Background(), ICT{}, "{query}" /* ICT ignores the template */, []string{tc.query}, []string{tc.doc}, lm.Options{N: 3})
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			if strings.Join(outs[0], "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q, want %q", outs[0], tc.want)
			}
		})
	}
}

func TestParseGeneratorSpec(t *testing.T) {
	tests := []struct {
		in      string
		want    Spec
		wantErr bool
	}{
		{"ict", Spec{Kind: "ict"}, false},
		{"t5:/models/flan", Spec{Kind: "t5", Dir: "/models/flan"}, false},
		{"hf:/models/qwen2", Spec{Kind: "hf", Dir: "/models/qwen2"}, false},
		{"hf:", Spec{}, true},
		{"qwen2:/models/qwen2", Spec{Kind: "qwen2", Dir: "/models/qwen2"}, false},
		{"llama:/models/llama3", Spec{Kind: "llama", Dir: "/models/llama3"}, false},
		{"qwen3:/models/q3", Spec{Kind: "qwen3", Dir: "/models/q3"}, false},
		{"qwen2:", Spec{}, true},
		{"mistral:/models/m", Spec{}, true},
		{"openai:http://127.0.0.1:8000/v1", Spec{Kind: "openai", URL: "http://127.0.0.1:8000/v1"}, false},
		{"openai:http://localhost:11434#llama3", Spec{Kind: "openai", URL: "http://localhost:11434", Model: "llama3"}, false},
		{"ict:x", Spec{}, true},
		{"t5:", Spec{}, true},
		{"openai:localhost:8000", Spec{}, true},
		{"gpt", Spec{}, true},
		{"", Spec{}, true},
	}
	for _, tc := range tests {
		got, err := ParseGeneratorSpec(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseGeneratorSpec(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), tc.in)
		}
	}
}

// A decoder alias opens only a checkpoint of that model_type; a mismatch
// is refused naming both types, before any weight is read.
func TestOpenDecoderAliasMismatch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "llama"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, alias := range []string{"qwen2", "qwen3"} {
		_, err := Open(Spec{Kind: alias, Dir: dir}, "go", openai.Options{})
		if err == nil || !strings.Contains(err.Error(), `model_type "llama", not "`+alias+`"`) {
			t.Errorf("%s:%s: err %v, want a mismatch naming llama and %s", alias, dir, err, alias)
		}
	}
	// The matching alias gets past the check to the loader (no weights here).
	if _, err := Open(Spec{Kind: "llama", Dir: dir}, "go", openai.Options{}); err == nil || strings.Contains(err.Error(), "not \"llama\"") {
		t.Errorf("llama:%s: err %v, want the loader's error", dir, err)
	}
}

func TestRender(t *testing.T) {
	got := Render("Q: {query} D: {document} {query}", "q1", "d1")
	if got != "Q: q1 D: d1 q1" {
		t.Fatalf("Render = %q", got)
	}
}

// TestICTQueriesPerDocument: N queries per document are deterministic for a
// seed, distinct while the document allows, the same first j for every N
// (so query j of a chunk does not depend on how many are drawn), balanced
// (exactly N per document), sentences before spans.
func TestICTQueriesPerDocument(t *testing.T) {
	long := "Gout is caused by uric acid crystals. Aspirin lowers fever in adults today. " +
		"Formalin fixes tissue within a day. Sections are cut at four micrometres thick."
	short := "Fever."
	tests := []struct {
		name      string
		doc       string
		n         int
		distinct  int // distinct queries expected
		sentences int // queries that are whole sentences (drawn first)
	}{
		{"fewer than sentences", long, 2, 2, 2},
		{"all sentences", long, 4, 4, 4},
		{"sentences then spans", long, 12, 12, 4},
		{"short document repeats", short, 3, 1, 1},
	}
	sents := map[string]bool{}
	for _, s := range sentences(long) {
		sents[s] = true
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outs, errs := ICT{}.Queries(context.Background(), []string{tc.doc, tc.doc}, lm.Options{Seed: 7, N: tc.n})
			if errs[0] != nil {
				t.Fatal(errs[0])
			}
			q := outs[0]
			if len(q) != tc.n || strings.Join(outs[1], "|") != strings.Join(q, "|") {
				t.Fatalf("got %d queries %q (second copy %q), want %d, the same for the same document", len(q), q, outs[1], tc.n)
			}
			seen := map[string]bool{}
			for j, s := range q {
				if !seen[s] && len(seen) < tc.distinct && j != len(seen) {
					t.Errorf("query %d %q: a repeat came before all distinct ones", j, s)
				}
				seen[s] = true
				if tc.doc == long && j < tc.sentences && !sents[s] {
					t.Errorf("query %d %q: want a whole sentence before any span", j, s)
				}
				if tc.doc == long && j >= tc.sentences && (sents[s] || !strings.Contains(long, s)) {
					t.Errorf("query %d %q: want a span of the document that is not a sentence", j, s)
				}
			}
			if len(seen) != tc.distinct {
				t.Errorf("%d distinct of %q, want %d", len(seen), q, tc.distinct)
			}
			more, _ := ICT{}.Queries(context.Background(), []string{tc.doc}, lm.Options{Seed: 7, N: tc.n + 5})
			if strings.Join(more[0][:min(tc.n, tc.distinct)], "|") != strings.Join(q[:min(tc.n, tc.distinct)], "|") {
				t.Errorf("N=%d starts %q, N=%d %q: query j depends on N", tc.n, q, tc.n+5, more[0])
			}
			other, _ := ICT{}.Queries(context.Background(), []string{tc.doc}, lm.Options{Seed: 8, N: tc.n})
			if tc.n == 12 && strings.Join(other[0], "|") == strings.Join(q, "|") {
				t.Errorf("seeds 7 and 8 drew the same %d queries", tc.n)
			}
		})
	}
}
