package web

import (
	"reflect"
	"strings"
	"testing"
)

func TestHighlight(t *testing.T) {
	tests := []struct {
		name              string
		snippet, evidence string
		minRun            int
		want              []Segment
	}{
		{
			name:    "verbatim, case-insensitive",
			snippet: "The tumor shows NECROSIS and mitoses.", evidence: "necrosis and",
			want: []Segment{{Text: "The tumor shows "}, {Text: "NECROSIS and", Mark: true}, {Text: " mitoses."}},
		},
		{
			name:    "white space collapsed: the mark keeps the source newline",
			snippet: "a  b\nc d", evidence: "b c",
			want: []Segment{{Text: "a  "}, {Text: "b\nc", Mark: true}, {Text: " d"}},
		},
		{
			name:    "diacritics stripped, multi-byte runes kept whole",
			snippet: "Café crème brûlée.", evidence: "creme brulee",
			want: []Segment{{Text: "Café "}, {Text: "crème brûlée", Mark: true}, {Text: "."}},
		},
		{
			name:    "every occurrence",
			snippet: "pT2 then pT2", evidence: "PT2",
			want: []Segment{{Text: "pT2", Mark: true}, {Text: " then "}, {Text: "pT2", Mark: true}},
		},
		{
			name:    "no verbatim match: longest shared 5-token run",
			snippet: "one two three four five six seven", evidence: "zero two three four five six eight",
			want: []Segment{{Text: "one "}, {Text: "two three four five six", Mark: true}, {Text: " seven"}},
		},
		{
			name:    "shared run of 4 tokens is below the default 5",
			snippet: "one two three four five", evidence: "x two three four five y",
			want: []Segment{{Text: "one two three four five"}},
		},
		{
			name:    "shared run of 4 tokens with minRun 3",
			snippet: "one two three four five", evidence: "x two three four five y", minRun: 3,
			want: []Segment{{Text: "one "}, {Text: "two three four five", Mark: true}},
		},
		{
			name:    "tokens compare after normalization, punctuation is part of a token",
			snippet: "Grade: MODERATELY  differentiated Adenocarcinoma, invasive.", evidence: "grade: moderately differentiated adenocarcinoma, focally",
			minRun: 3,
			want:   []Segment{{Text: "Grade: MODERATELY  differentiated Adenocarcinoma,", Mark: true}, {Text: " invasive."}},
		},
		{
			name:    "first of two equally long runs",
			snippet: "a b c x d e f", evidence: "d e f q a b c", minRun: 3,
			want: []Segment{{Text: "a b c", Mark: true}, {Text: " x d e f"}},
		},
		{
			name:    "HTML is plain text here",
			snippet: `<img src=x onerror="alert(1)"> & tail`, evidence: "& TAIL",
			want: []Segment{{Text: `<img src=x onerror="alert(1)"> `}, {Text: "& tail", Mark: true}},
		},
		{
			name:    "empty evidence marks nothing",
			snippet: "abc", evidence: "  ",
			want: []Segment{{Text: "abc"}},
		},
		{
			name:    "empty snippet",
			snippet: "", evidence: "abc",
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Highlight(tc.snippet, tc.evidence, tc.minRun)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Highlight(%q, %q, %d)\n got %#v\nwant %#v", tc.snippet, tc.evidence, tc.minRun, got, tc.want)
			}
			var b strings.Builder
			for _, s := range got {
				b.WriteString(s.Text)
			}
			if b.String() != tc.snippet {
				t.Fatalf("segments join to %q, want the snippet %q", b.String(), tc.snippet)
			}
		})
	}
}

func BenchmarkHighlightFallback(b *testing.B) {
	snippet := strings.Repeat("alpha beta gamma delta epsilon ", 80)
	evidence := strings.Repeat("beta gamma zeta delta ", 60)
	b.ReportAllocs()
	for b.Loop() {
		Highlight(snippet, evidence, 0)
	}
}
