package web

import (
	"strings"
	"unicode"

	"github.com/ragforge/ragforge/retrieval/eval"
)

// Segment is one piece of a snippet as the label page shows it: Mark is true
// for text that matches the reference evidence (rendered inside <mark>). The
// concatenation of all segments' Text is the snippet, byte for byte.
type Segment struct {
	Text string `json:"text"`
	Mark bool   `json:"mark,omitempty"`
}

// Highlight splits snippet into segments with the reference evidence marked.
//
// The rule follows the evidence labeler's relevance test (retrieval/eval,
// AP paper normalization: lower-case, diacritics stripped, white space
// collapsed):
//
//  1. every non-overlapping occurrence of the normalized evidence inside the
//     normalized snippet is marked (eval.EvidenceSpans);
//  2. otherwise the longest run of consecutive whitespace-separated tokens
//     shared by both texts (compared after Normalize) is marked, from the first
//     byte of its first token to the last byte of its last token, provided it
//     is at least minRun tokens long (minRun <= 0 means eval.MinSharedRun, 5);
//     of several longest runs the first in the snippet wins;
//  3. otherwise the whole snippet is one unmarked segment.
//
// An empty snippet gives no segments; an empty evidence marks nothing. The
// cost of step 2 is O(len(snippet tokens) × len(evidence tokens)) time and
// O(len(evidence tokens)) memory.
func Highlight(snippet, evidence string, minRun int) []Segment {
	if snippet == "" {
		return nil
	}
	if minRun <= 0 {
		minRun = eval.MinSharedRun
	}
	var spans [][2]int
	if strings.TrimSpace(evidence) != "" {
		spans = eval.EvidenceSpans(snippet, evidence)
		if len(spans) == 0 {
			if s, e, ok := longestSharedRun(snippet, evidence, minRun); ok {
				spans = [][2]int{{s, e}}
			}
		}
	}
	var out []Segment
	pos := 0
	for _, sp := range spans {
		if sp[0] > pos {
			out = append(out, Segment{Text: snippet[pos:sp[0]]})
		}
		out = append(out, Segment{Text: snippet[sp[0]:sp[1]], Mark: true})
		pos = sp[1]
	}
	if pos < len(snippet) {
		out = append(out, Segment{Text: snippet[pos:]})
	}
	return out
}

// token is a whitespace-separated token: its normalized form and its byte
// range [start, end) in the source text.
type token struct {
	norm       string
	start, end int
}

// tokens splits s at Unicode white space and normalizes each token with
// eval.Normalize; tokens that normalize to nothing (only combining marks) are
// dropped, as Normalize drops them from the whole text.
func tokens(s string) []token {
	var out []token
	start := -1
	flush := func(end int) {
		if start >= 0 {
			if n := eval.Normalize(s[start:end]); n != "" {
				out = append(out, token{norm: n, start: start, end: end})
			}
			start = -1
		}
	}
	for i, r := range s {
		if unicode.IsSpace(r) {
			flush(i)
		} else if start < 0 {
			start = i
		}
	}
	flush(len(s))
	return out
}

// longestSharedRun returns the byte range in snippet of the longest run of
// consecutive tokens shared with evidence, when it has at least minRun tokens.
func longestSharedRun(snippet, evidence string, minRun int) (start, end int, ok bool) {
	st, et := tokens(snippet), tokens(evidence)
	if len(st) == 0 || len(et) == 0 {
		return 0, 0, false
	}
	// prev[j+1] = length of the common run ending at st[i-1] and et[j].
	prev := make([]int, len(et)+1)
	cur := make([]int, len(et)+1)
	best, bestEnd := 0, -1 // bestEnd: index in st of the run's last token
	for i := range st {
		for j := range et {
			if st[i].norm == et[j].norm {
				cur[j+1] = prev[j] + 1
				if cur[j+1] > best {
					best, bestEnd = cur[j+1], i
				}
			} else {
				cur[j+1] = 0
			}
		}
		prev, cur = cur, prev
	}
	if best < minRun {
		return 0, 0, false
	}
	return st[bestEnd-best+1].start, st[bestEnd].end, true
}
