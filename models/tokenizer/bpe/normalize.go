package bpe

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalized is a normalized text with, for each of its bytes, the byte span
// of the original text it came from (HF NormalizedString alignments). Nil
// span slices mean the text is unchanged and starts at byte base of the
// original.
type normalized struct {
	s          string
	base       int
	start, end []int
}

// orig returns the original byte span of the normalized bytes [a, b).
func (n *normalized) orig(a, b int) (int, int) {
	if n.start == nil {
		return n.base + a, n.base + b
	}
	if a >= b {
		if a < len(n.start) {
			return n.start[a], n.start[a]
		}
		if len(n.end) > 0 {
			return n.end[len(n.end)-1], n.end[len(n.end)-1]
		}
		return 0, 0
	}
	return n.start[a], n.end[b-1]
}

// normalizer is one step of the declared normalizer.
type normalizer func(n normalized) normalized

// parseNormalizer reads tokenizer.json's "normalizer": null, NFC, NFD, NFKC,
// NFKD, Lowercase or a Sequence of them; any other type is refused by name.
func parseNormalizer(raw json.RawMessage) ([]normalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, err
	}
	switch n.Type {
	case "Sequence":
		var out []normalizer
		for _, c := range n.Normalizers {
			sub, err := parseNormalizer(c)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		}
		return out, nil
	case "NFC":
		return []normalizer{unicodeForm(norm.NFC)}, nil
	case "NFD":
		return []normalizer{unicodeForm(norm.NFD)}, nil
	case "NFKC":
		return []normalizer{unicodeForm(norm.NFKC)}, nil
	case "NFKD":
		return []normalizer{unicodeForm(norm.NFKD)}, nil
	case "Lowercase":
		return []normalizer{lowercase}, nil
	}
	return nil, fmt.Errorf("normalizer type %q not supported (NFC, NFD, NFKC, NFKD, Lowercase, Sequence)", n.Type)
}

// unicodeForm applies a Unicode normalization form segment by segment; the
// bytes of a changed segment all map to the whole original segment.
func unicodeForm(f norm.Form) normalizer {
	return func(n normalized) normalized {
		if f.IsNormalString(n.s) {
			return n
		}
		var it norm.Iter
		it.InitString(f, n.s)
		var sb strings.Builder
		start := make([]int, 0, len(n.s))
		end := make([]int, 0, len(n.s))
		for !it.Done() {
			a := it.Pos()
			seg := it.Next()
			b := it.Pos()
			sb.Write(seg)
			if string(seg) == n.s[a:b] {
				for i := a; i < b; i++ {
					s, e := n.orig(i, i+1)
					start, end = append(start, s), append(end, e)
				}
				continue
			}
			s, e := n.orig(a, b)
			for range seg {
				start, end = append(start, s), append(end, e)
			}
		}
		return normalized{s: sb.String(), start: start, end: end}
	}
}

// lowercase maps each rune to its lower case (HF Lowercase, Rust
// str::to_lowercase per character).
func lowercase(n normalized) normalized {
	low := strings.ToLower(n.s)
	if low == n.s {
		return n
	}
	var sb strings.Builder
	start := make([]int, 0, len(n.s))
	end := make([]int, 0, len(n.s))
	for i, r := range n.s {
		_, size := utf8.DecodeRuneInString(n.s[i:])
		l := strings.ToLower(string(r))
		sb.WriteString(l)
		s, e := n.orig(i, i+size)
		for range len(l) {
			start, end = append(start, s), append(end, e)
		}
	}
	return normalized{s: sb.String(), start: start, end: end}
}
