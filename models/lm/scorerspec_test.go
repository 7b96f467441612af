package lm

import (
	"context"
	"strings"
	"testing"
)

func TestSplitSpec(t *testing.T) {
	tests := []struct {
		spec, kind, target, model string
		ok                        bool
	}{
		{"t5:work/gen", "t5", "work/gen", "", true},
		{"openai:http://127.0.0.1:8000/v1#llama3", "openai", "http://127.0.0.1:8000/v1", "llama3", true},
		{"hf:dir#", "hf", "dir", "", true},
		{"t5:", "", "", "", false},
		{"work/gen", "", "", "", false},
	}
	for _, tc := range tests {
		kind, target, model, ok := SplitSpec(tc.spec)
		if kind != tc.kind || target != tc.target || model != tc.model || ok != tc.ok {
			t.Errorf("SplitSpec(%q) = %q %q %q %v, want %q %q %q %v", tc.spec, kind, target, model, ok, tc.kind, tc.target, tc.model, tc.ok)
		}
	}
}

// A spec OpenScorer cannot open is refused by name before any model loads.
func TestOpenScorerRefuses(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"work/gen", `--scorer "work/gen": want t5:DIR or openai:URL[#model]`},
		{"bert:dir", `--scorer "bert:dir": want t5:DIR, hf:DIR or openai:URL[#model]`},
		{"t5:" + t.TempDir() + "/absent", "absent"},
	} {
		_, err := OpenScorer(context.Background(), tc.spec, ScorerOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenScorer(%q) = %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
}
