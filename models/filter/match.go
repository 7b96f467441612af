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
// L > 0 is preceded by L copies of Marker and a space, plus one more per
// RareDocFractions the word is rare enough for. The question is left as it
// is.
type MatchMarks struct {
	Marker   string `json:"marker"`    // mark text, repeated per level ("@")
	MinChars int    `json:"min_chars"` // shortest single word marked (3: skips "de", "a", "o")
	MaxRun   int    `json:"max_run"`   // level cap (5: the AP labels' ≥5-token rule)
	// PrefixChars, when above 0, compares words by their first PrefixChars
	// folded letters or digits: a crude stemmer for inflected languages
	// ("tamponado" and "tamponada" match at 5; "fixação" and "fixado" only
	// at 4). 0 compares whole words.
	PrefixChars int `json:"prefix_chars,omitempty"`
	// RareDocFractions, when set, gives a marked word one more mark for
	// each fraction its document frequency, as a share of DocFreq.Docs, is
	// at or below: rarity (IDF) said with the same marks, so a reader that
	// learned to count marks weighs rare shared words more. demo-ap uses
	// [0.05, 0.005] (docs/recipes.md). Needs DocFreq.
	RareDocFractions []float64 `json:"rare_doc_fractions,omitempty"`
	// DocFreq holds the document frequencies RareDocFractions read, made
	// by WithDocFreq from the evidence a filter trained on.
	DocFreq *DocFreq `json:"doc_freq,omitempty"`
}

// DocFreq counts the documents (distinct evidence texts) holding each
// word, keyed as MatchMarks compares words. Only words more common than the
// smallest of RareDocFractions are kept: a word missing from Counts is at or
// below every fraction, as a word never seen is.
type DocFreq struct {
	Docs   int            `json:"docs"`
	Counts map[string]int `json:"counts"`
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
	if err := CheckRareDocFractions(m.RareDocFractions); err != nil {
		return fmt.Errorf("match marks: rare_doc_fractions: %w", err)
	}
	switch d := m.DocFreq; {
	case len(m.RareDocFractions) > 0 && d == nil:
		return fmt.Errorf("match marks: rare_doc_fractions without doc_freq (train filter counts it)")
	case d == nil:
		return nil
	case len(m.RareDocFractions) == 0:
		return fmt.Errorf("match marks: doc_freq without rare_doc_fractions, which nothing would read")
	case d.Docs < 1:
		return fmt.Errorf("match marks: doc_freq.docs %d, want ≥ 1", d.Docs)
	}
	for w, c := range m.DocFreq.Counts {
		if c < 1 || c > m.DocFreq.Docs {
			return fmt.Errorf("match marks: doc_freq.counts[%q] = %d, want in [1, docs %d]", w, c, m.DocFreq.Docs)
		}
	}
	return nil
}

// CheckRareDocFractions returns an error unless every fraction is in (0, 1)
// (MatchMarks.RareDocFractions; empty is fine).
func CheckRareDocFractions(fractions []float64) error {
	for _, f := range fractions {
		if !(f > 0 && f < 1) {
			return fmt.Errorf("%v holds %v, want each fraction in (0, 1)", fractions, f)
		}
	}
	return nil
}

// WithDocFreq returns m with DocFreq counted over the distinct texts of
// evidences (the evidence parts of a filter's training instructions),
// keeping the counts RareDocFractions need. Without RareDocFractions it
// returns m unchanged.
func (m MatchMarks) WithDocFreq(evidences []string) MatchMarks {
	if len(m.RareDocFractions) == 0 {
		return m
	}
	all, seen := map[string]int{}, map[string]bool{}
	for _, e := range evidences {
		if seen[e] {
			continue
		}
		seen[e] = true
		in := map[string]bool{}
		for _, w := range words(e, m.PrefixChars) {
			if !in[w.key] {
				in[w.key] = true
				all[w.key]++
			}
		}
	}
	d := &DocFreq{Docs: len(seen), Counts: map[string]int{}}
	for w, c := range all {
		if m.extraMarks(d, c) < len(m.RareDocFractions) {
			d.Counts[w] = c
		}
	}
	m.DocFreq = d
	return m
}

// extraMarks is the number of RareDocFractions that a word in count of
// d.Docs documents is at or below.
func (m MatchMarks) extraMarks(d *DocFreq, count int) int {
	n := 0
	for _, f := range m.RareDocFractions {
		if float64(count) <= f*float64(d.Docs) {
			n++
		}
	}
	return n
}

// MatchMarksOf returns the marks recorded under MatchMarksKey in a
// checkpoint's config.json (raw is that key's JSON, ok whether it was
// there); nil when it was not. Errors: a value that does not decode or
// fails Check, naming the key.
func MatchMarksOf(raw json.RawMessage, ok bool) (*MatchMarks, error) {
	return configValue[MatchMarks](raw, ok, MatchMarksKey)
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
	ev := words(evidence, m.PrefixChars)
	level := matchLevels(ev, words(question, m.PrefixChars), m.MinChars, m.MaxRun)
	var b strings.Builder
	last := 0
	for i, w := range ev {
		l := level[i]
		if l > 0 && m.DocFreq != nil {
			l += m.extraMarks(m.DocFreq, m.DocFreq.Counts[w.key])
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

// matchLevels is the MatchMarks level of each evidence word of ev against
// the question words q: the longest run of consecutive equal keys covering
// it, capped at maxRun; a word in no run of two or more counts only with
// at least minChars letters or digits.
func matchLevels(ev, q []word, minChars, maxRun int) []int {
	level := make([]int, len(ev))
	for i := range ev {
		for j := range q {
			n := 0
			for i+n < len(ev) && j+n < len(q) && ev[i+n].key == q[j+n].key {
				n++
			}
			for k := i; k < i+n; k++ {
				level[k] = max(level[k], min(n, maxRun))
			}
		}
	}
	for i, w := range ev {
		if level[i] == 1 && w.runes < minChars {
			level[i] = 0
		}
	}
	return level
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
