package filter

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// MatchMarksKey is the config.json key of a filter checkpoint trained on
// marked evidence (MatchMarks, as JSON). transformers keeps it as a config
// attribute; a checkpoint without it reads its instructions unmarked.
const MatchMarksKey = "ragforge_filter_match_marks"

// MatchMarks writes exact-match features into the evidence of a RAG²
// instruction: DrQA's "exact match" token feature (Chen et al., 2017,
// "Reading Wikipedia to Answer Open-Domain Questions", §3.1), carried as
// text so the checkpoint keeps Hugging Face's T5 layout and any tokenizer
// reads it. A randomly initialised T5 does not learn to find the
// question's words in the evidence from ICT examples; with the marks it
// need only learn which marks count (docs/recipes.md, "Filter: exact-match
// marks").
//
// Words are maximal runs of Unicode letters and digits, compared
// lowercased with diacritics removed. An evidence word's level is the
// length of the longest run of consecutive evidence words equal to
// consecutive question words that covers it, capped at MaxRun; a word in
// no such run of two or more has level 1 when the question contains it
// and it has at least MinChars letters or digits, else 0. A word of level
// L > 0 is preceded by L copies of Marker and a space. The question is
// left as it is.
type MatchMarks struct {
	Marker   string `json:"marker"`    // mark text, repeated per level ("@")
	MinChars int    `json:"min_chars"` // shortest single word marked (3: skips "de", "a", "o")
	MaxRun   int    `json:"max_run"`   // level cap (5: the AP labels' ≥5-token rule)
	// PrefixChars, when above 0, compares words by their first PrefixChars
	// folded letters or digits: a crude stemmer for inflected languages
	// ("tamponado" and "tamponada" match at 5; "fixação" and "fixado" only
	// at 4). 0 compares whole words.
	PrefixChars int `json:"prefix_chars,omitempty"`
}

// DefaultMatchMarks are the marks `train filter --match-marks` adds,
// chosen on the AP training questions (docs/recipes.md).
func DefaultMatchMarks() MatchMarks { return MatchMarks{Marker: "@", MinChars: 3, MaxRun: 5} }

// Check returns an error naming the first field that makes no sense.
func (m MatchMarks) Check() error {
	switch {
	case m.Marker == "" || strings.TrimSpace(m.Marker) != m.Marker:
		return fmt.Errorf("match marks: marker %q, want non-empty text without surrounding spaces", m.Marker)
	case strings.ContainsFunc(m.Marker, isWordRune):
		return fmt.Errorf("match marks: marker %q contains letters or digits, which would read as words", m.Marker)
	case m.MinChars < 1:
		return fmt.Errorf("match marks: min_chars %d, want ≥ 1", m.MinChars)
	case m.MaxRun < 1:
		return fmt.Errorf("match marks: max_run %d, want ≥ 1", m.MaxRun)
	case m.PrefixChars < 0:
		return fmt.Errorf("match marks: prefix_chars %d, want ≥ 0 (0 compares whole words)", m.PrefixChars)
	}
	return nil
}

// MatchMarksOf returns the marks recorded under MatchMarksKey in a
// checkpoint's config.json (raw is that key's JSON, ok whether it was
// there); nil when it was not. Errors: a value that does not decode or
// fails Check, naming the key.
func MatchMarksOf(raw json.RawMessage, ok bool) (*MatchMarks, error) {
	if !ok {
		return nil, nil
	}
	var m MatchMarks
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("config.json: field %q: %w", MatchMarksKey, err)
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("config.json: field %q: %w", MatchMarksKey, err)
	}
	return &m, nil
}

// Mark returns instruction with its evidence marked. Errors: an
// instruction that is not RAG²'s (ParseInstruction), since its evidence
// and question cannot be told apart.
func (m MatchMarks) Mark(instruction string) (string, error) {
	evidence, question, err := ParseInstruction(strings.TrimSpace(instruction))
	if err != nil {
		return "", fmt.Errorf("match marks: %w", err)
	}
	return Instruction(m.markEvidence(evidence, question), question), nil
}

type word struct {
	start int    // byte offset in the text, where a mark goes
	key   string // folded form compared (its prefix when PrefixChars > 0)
	runes int    // letters and digits in the whole folded word
}

func (m MatchMarks) markEvidence(evidence, question string) string {
	ev, q := words(evidence, m.PrefixChars), words(question, m.PrefixChars)
	level := make([]int, len(ev))
	for i := range ev {
		for j := range q {
			n := 0
			for i+n < len(ev) && j+n < len(q) && ev[i+n].key == q[j+n].key {
				n++
			}
			for k := i; k < i+n; k++ {
				level[k] = max(level[k], min(n, m.MaxRun))
			}
		}
	}
	var b strings.Builder
	last := 0
	for i, w := range ev {
		l := level[i]
		if l == 1 && w.runes < m.MinChars {
			l = 0
		}
		b.WriteString(evidence[last:w.start])
		if l > 0 {
			b.WriteString(strings.Repeat(m.Marker, l) + " ")
		}
		last = w.start
	}
	b.WriteString(evidence[last:])
	return b.String()
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// words splits s into maximal runs of letters and digits with their
// folded forms (lowercase, combining marks removed after NFD), cut to their
// first prefix runes when prefix > 0.
func words(s string, prefix int) []word {
	var out []word
	start := -1
	// A Chain keeps state between calls: one per call, not shared.
	t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	flush := func(end int) {
		if start >= 0 {
			k := []rune(fold(t, s[start:end]))
			w := word{start: start, key: string(k), runes: len(k)}
			if prefix > 0 && len(k) > prefix {
				w.key = string(k[:prefix])
			}
			out = append(out, w)
			start = -1
		}
	}
	for i, r := range s {
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		flush(i)
	}
	flush(len(s))
	return out
}

func fold(t transform.Transformer, w string) string {
	f, _, err := transform.String(t, strings.ToLower(w))
	if err != nil {
		return strings.ToLower(w)
	}
	return f
}
