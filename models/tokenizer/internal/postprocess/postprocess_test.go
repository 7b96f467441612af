package postprocess

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestCleanUp(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Hello , world !", "Hello, world!"},
		{"I do n't know .", "I don't know."},
		{"it ' s", "it's"},
		// chained as transformers does: " ' " first, then " 's" sees its output.
		{"x  ' s", "x's"},
		{"no change", "no change"},
	}
	for _, tt := range tests {
		if got := CleanUp(tt.in); got != tt.want {
			t.Errorf("CleanUp(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TemplateJSON's output parses back into the processor that frames alike.
func TestTemplateRoundTrip(t *testing.T) {
	ids := map[string]int{"[CLS]": 101, "[SEP]": 102, "<s>": 0, "</s>": 2}
	lookup := func(s string) (int, bool) { id, ok := ids[s]; return id, ok }
	tests := []struct {
		name         string
		node         any
		single, pair []int
		pairTypes    []int
		numSpecial   int
	}{
		{"bert", TemplateJSON([]Special{{"[CLS]", 101}}, []Special{{"[SEP]", 102}}, nil, 1),
			[]int{101, 7, 8, 102}, []int{101, 7, 8, 102, 9, 102}, []int{0, 0, 0, 0, 1, 1}, 2},
		{"t5", TemplateJSON(nil, []Special{{"</s>", 2}}, nil, 0),
			[]int{7, 8, 2}, []int{7, 8, 2, 9, 2}, []int{0, 0, 0, 0, 0}, 1},
		{"xlmr", TemplateJSON([]Special{{"<s>", 0}}, []Special{{"</s>", 2}}, []Special{{"</s>", 2}}, 0),
			[]int{0, 7, 8, 2}, []int{0, 7, 8, 2, 2, 9, 2}, []int{0, 0, 0, 0, 0, 0, 0}, 2},
		{"roberta", map[string]any{"type": "RobertaProcessing", "sep": []any{"</s>", 2}, "cls": []any{"<s>", 0}},
			[]int{0, 7, 8, 2}, []int{0, 7, 8, 2, 2, 9, 2}, []int{0, 0, 0, 0, 0, 0, 0}, 2},
		{"bytelevel", map[string]any{"type": "ByteLevel", "trim_offsets": false},
			[]int{7, 8}, []int{7, 8, 9}, []int{0, 0, 1}, 0},
	}
	for _, tt := range tests {
		raw, _ := json.Marshal(tt.node)
		p, err := Parse(raw, lookup)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got, _ := p.Single([]int{7, 8}, nil); !reflect.DeepEqual(got, tt.single) {
			t.Errorf("%s: single %v, want %v", tt.name, got, tt.single)
		}
		if got, types := p.Pair([]int{7, 8}, []int{9}); !reflect.DeepEqual(got, tt.pair) || !reflect.DeepEqual(types, tt.pairTypes) {
			t.Errorf("%s: pair %v types %v, want %v %v", tt.name, got, types, tt.pair, tt.pairTypes)
		}
		if p.NumSpecial() != tt.numSpecial {
			t.Errorf("%s: NumSpecial %d, want %d", tt.name, p.NumSpecial(), tt.numSpecial)
		}
	}
	if _, err := Parse(json.RawMessage(`{"type": "Bogus"}`), lookup); err == nil {
		t.Error("unknown type accepted")
	}
}
