package addedtokens

import (
	"reflect"
	"testing"
)

func TestMatcherSplit(t *testing.T) {
	pats := []Pattern{
		{ID: 10, Entry: Entry{Content: "<|im_start|>"}},
		{ID: 11, Entry: Entry{Content: "<|im"}},
		{ID: 12, Entry: Entry{Content: "<mask>", LStrip: true}},
		{ID: 13, Entry: Entry{Content: "[X]", RStrip: true}},
		{ID: 14, Entry: Entry{Content: "tok", SingleWord: true}},
	}
	m := NewMatcher(pats)
	tests := []struct {
		text string
		want []Segment
	}{
		// leftmost-longest: <|im_start|> wins over its prefix <|im.
		{"a<|im_start|>b", []Segment{{0, 1, -1}, {1, 13, 10}, {13, 14, -1}}},
		{"<|im_end|>", []Segment{{0, 4, 11}, {4, 10, -1}}},
		// case-sensitive
		{"<|IM_START|>", []Segment{{0, 12, -1}}},
		// lstrip takes the spaces on the left, rstrip those on the right.
		{"a  <mask> b", []Segment{{0, 1, -1}, {1, 9, 12}, {9, 11, -1}}},
		{"a [X]  b", []Segment{{0, 2, -1}, {2, 7, 13}, {7, 8, -1}}},
		// single_word: not inside a word.
		{"a tok b", []Segment{{0, 2, -1}, {2, 5, 14}, {5, 7, -1}}},
		{"atok b", []Segment{{0, 6, -1}}},
		{"", nil},
	}
	for _, tt := range tests {
		if got := m.Split(tt.text); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Split(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}
