package addedtokens

import (
	"unicode"
	"unicode/utf8"
)

// Pattern is an added token to split out of text, with the flags of HF
// tokenizers' AddedToken that change where it matches. It marshals as an
// entry of tokenizer.json's added_tokens.
type Pattern struct {
	ID int `json:"id"`
	Entry
}

// Matcher splits text at added tokens as HF tokenizers'
// AddedVocabulary.find_matches does: leftmost-longest exact (case-sensitive)
// matches; a single_word token only where no word character (letter, digit,
// '_') touches it; lstrip/rstrip tokens also take the whitespace on their
// left/right.
type Matcher struct {
	root  *trieNode
	first [256]bool // bytes some pattern starts with
	pats  []Pattern
}

type trieNode struct {
	next map[byte]*trieNode
	pat  int // index into pats, -1 if no pattern ends here
}

// NewMatcher builds a matcher over pats (empty contents are ignored).
func NewMatcher(pats []Pattern) *Matcher {
	m := &Matcher{root: &trieNode{pat: -1}, pats: pats}
	for i, p := range pats {
		if p.Content == "" {
			continue
		}
		m.first[p.Content[0]] = true
		n := m.root
		for j := 0; j < len(p.Content); j++ {
			c := p.Content[j]
			if n.next == nil {
				n.next = map[byte]*trieNode{}
			}
			k, ok := n.next[c]
			if !ok {
				k = &trieNode{pat: -1}
				n.next[c] = k
			}
			n = k
		}
		n.pat = i
	}
	return m
}

// Segment is a span [Start, End) of the split text: an added token (ID >= 0)
// or plain text (ID -1).
type Segment struct {
	Start, End int
	ID         int
}

// Split returns the segments of text in order; plain text segments are never
// empty and together with the tokens cover text (minus nothing: stripped
// whitespace belongs to the token's span).
func (m *Matcher) Split(text string) []Segment {
	var out []Segment
	offset := 0 // end of the previous token
	for i := 0; i < len(text); i++ {
		if !m.first[text[i]] {
			continue
		}
		pi, end := m.longest(text, i)
		if pi < 0 {
			continue
		}
		p := m.pats[pi]
		start, stop := i, end
		if p.SingleWord && (endsWithWord(text[:start]) || startsWithWord(text[stop:])) {
			continue
		}
		if p.LStrip {
			for start > offset {
				r, n := utf8.DecodeLastRuneInString(text[offset:start])
				if !unicode.IsSpace(r) {
					break
				}
				start -= n
			}
		}
		if p.RStrip {
			for stop < len(text) {
				r, n := utf8.DecodeRuneInString(text[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += n
			}
		}
		if start > offset {
			out = append(out, Segment{offset, start, -1})
		}
		out = append(out, Segment{start, stop, p.ID})
		offset = stop
		i = stop - 1
	}
	if offset < len(text) {
		out = append(out, Segment{offset, len(text), -1})
	}
	return out
}

// longest returns the longest pattern starting at text[i:] and its end, or -1.
func (m *Matcher) longest(text string, i int) (int, int) {
	best, end := -1, 0
	n := m.root
	for j := i; j < len(text); j++ {
		n = n.next[text[j]]
		if n == nil {
			break
		}
		if n.pat >= 0 {
			best, end = n.pat, j+1
		}
	}
	return best, end
}

func isWordChar(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordChar(r)
}
