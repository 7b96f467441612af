package learn

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
)

// BERTSpecials are the first five lines of a trained vocab.txt, ids 0..4 as
// in google/bert_uncased_L-2_H-128_A-2 (bert-tiny).
var BERTSpecials = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}

// WordPieceOptions configures TrainWordPiece. The zero value of a field
// selects its default.
type WordPieceOptions struct {
	// VocabSize is the number of vocab.txt lines, specials included. Default
	// 1500.
	VocabSize int
	// Lowercase lower-cases and strips accents before training (BERT
	// do_lower_case). nil means true, the uncased BERT default.
	Lowercase *bool
	// MinFreq: merging stops when the most frequent pair occurs fewer times
	// (HF min_frequency). Default 2, as HF BertWordPieceTokenizer.train.
	MinFreq int
	// Log receives a summary line; nil discards it.
	Log io.Writer
}

func (o WordPieceOptions) withDefaults() WordPieceOptions {
	if o.VocabSize == 0 {
		o.VocabSize = 1500
	}
	if o.Lowercase == nil {
		t := true
		o.Lowercase = &t
	}
	if o.MinFreq == 0 {
		o.MinFreq = 2
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// BERTConfig returns the wordpiece.Config a vocabulary trained with
// lowercase (or not) must be used with: HF BertTokenizer defaults with
// do_lower_case = lowercase.
func BERTConfig(lowercase bool) wordpiece.Config {
	cfg := wordpiece.DefaultConfig()
	cfg.DoLowerCase = lowercase
	return cfg
}

// TrainWordPiece learns a BERT WordPiece vocabulary (the lines of vocab.txt,
// id = index) the way HF tokenizers' WordPieceTrainer does, by BPE merges:
//
//  1. Words are the pieces of wordpiece BasicTokenize with BERTConfig
//     (clean-up, CJK split, NFC, lower case + accent stripping, punctuation
//     split), so training sees what encoding will see; words longer than
//     100 runes are skipped (BERT maps them to [UNK]).
//  2. The vocabulary starts with BERTSpecials, then every character seen
//     (count descending, then code point), then the "##" form of each, in
//     the same order: every seen character can start or continue a word.
//  3. Each word is split into its first character and "##"-prefixed
//     continuation characters. The most frequent adjacent pair (counts
//     weighted by word frequency; ties by the left, then the right token)
//     is merged into a new token — the right token's "##" is dropped, the
//     left's kept — until VocabSize tokens exist or the best pair occurs
//     fewer than MinFreq times.
//
// The vocabulary is smaller than VocabSize when the corpus runs out of pairs
// occurring MinFreq times. Encoding then uses BERT's greedy longest match,
// not the BPE merges (as with an HF-trained WordPiece). Errors: no words, or
// a VocabSize below the specials plus the two alphabets.
func TrainWordPiece(texts []string, opt WordPieceOptions) ([]string, error) {
	opt = opt.withDefaults()
	if opt.VocabSize <= len(BERTSpecials) {
		return nil, fmt.Errorf("train wordpiece: field %q: %d, want > %d", "VocabSize", opt.VocabSize, len(BERTSpecials))
	}
	cfg := BERTConfig(*opt.Lowercase)
	basic, err := wordpiece.New(BERTSpecials, cfg)
	if err != nil {
		return nil, fmt.Errorf("train wordpiece: %w", err)
	}
	wordCounts, charCounts := countWords(basic, cfg, texts)
	if len(wordCounts) == 0 {
		return nil, errors.New("train wordpiece: no words to train on")
	}
	chars := charsByCount(charCounts)
	prefix := cfg.ContinuingPrefix
	v := newVocabBuilder()
	for _, c := range chars {
		v.add(c.s)
	}
	for _, c := range chars {
		v.add(prefix + c.s)
	}
	if len(v.vocab) > opt.VocabSize {
		return nil, fmt.Errorf("train wordpiece: field %q: %d is too small for %d specials + 2×%d characters", "VocabSize", opt.VocabSize, len(BERTSpecials), len(chars))
	}
	words := sortedCounts(wordCounts)
	m := newPairMerger(words, v, prefix)
	merges := m.run(opt.VocabSize, opt.MinFreq)
	fmt.Fprintf(opt.Log, "wordpiece: %d words, %d characters, %d merges, vocabulary %d\n", len(words), len(chars), merges, len(v.vocab))
	return v.vocab, nil
}

// countWords counts the BasicTokenize words of texts (words longer than
// cfg.MaxInputCharsPerWord runes skipped) and their characters.
func countWords(basic *wordpiece.Tokenizer, cfg wordpiece.Config, texts []string) (words, chars map[string]int64) {
	words = map[string]int64{}
	chars = map[string]int64{}
	for _, t := range texts {
		for _, w := range basic.BasicTokenize(t) {
			if utf8.RuneCountInString(w) > cfg.MaxInputCharsPerWord {
				continue
			}
			words[w]++
			for _, r := range w {
				chars[string(r)]++
			}
		}
	}
	return words, chars
}

// charsByCount orders character counts by count descending, then code point.
func charsByCount(charCounts map[string]int64) []count {
	chars := sortedCounts(charCounts)
	slices.SortStableFunc(chars, func(a, b count) int {
		if a.n != b.n {
			return cmp.Compare(b.n, a.n)
		}
		ra, _ := utf8.DecodeRuneInString(a.s)
		rb, _ := utf8.DecodeRuneInString(b.s)
		return cmp.Compare(ra, rb)
	})
	return chars
}

// vocabBuilder is the growing vocabulary, BERTSpecials first.
type vocabBuilder struct {
	vocab []string
	ids   map[string]int
}

func newVocabBuilder() *vocabBuilder {
	v := &vocabBuilder{vocab: slices.Clone(BERTSpecials), ids: map[string]int{}}
	for _, s := range BERTSpecials {
		v.ids[s] = slices.Index(BERTSpecials, s)
	}
	return v
}

// add returns the id of tok, appending it when new.
func (v *vocabBuilder) add(tok string) int {
	if id, ok := v.ids[tok]; ok {
		return id
	}
	v.ids[tok] = len(v.vocab)
	v.vocab = append(v.vocab, tok)
	return len(v.vocab) - 1
}

type tokenPair struct{ a, b int }

// pairMerger holds each word's current token ids and the weighted count of
// every adjacent pair, with the words each pair occurs in.
type pairMerger struct {
	v      *vocabBuilder
	prefix string
	words  []count
	syms   [][]int
	counts map[tokenPair]int64
	where  map[tokenPair]map[int]bool
}

// newPairMerger splits each word into its first character and prefixed
// continuation characters (all already in v) and counts their pairs.
func newPairMerger(words []count, v *vocabBuilder, prefix string) *pairMerger {
	m := &pairMerger{v: v, prefix: prefix, words: words, syms: make([][]int, len(words)),
		counts: map[tokenPair]int64{}, where: map[tokenPair]map[int]bool{}}
	for w, wc := range words {
		first := true
		for _, r := range wc.s {
			tok := string(r)
			if !first {
				tok = prefix + tok
			}
			first = false
			m.syms[w] = append(m.syms[w], v.ids[tok])
		}
		m.addPairs(w, 1)
	}
	return m
}

// addPairs adds (sign 1) or removes (sign -1) the pairs of word w.
func (m *pairMerger) addPairs(w int, sign int64) {
	s := m.syms[w]
	for i := 0; i+1 < len(s); i++ {
		p := tokenPair{s[i], s[i+1]}
		m.counts[p] += sign * m.words[w].n
		if sign > 0 {
			if m.where[p] == nil {
				m.where[p] = map[int]bool{}
			}
			m.where[p][w] = true
		}
		if m.counts[p] == 0 {
			delete(m.counts, p)
		}
	}
}

// run merges the most frequent pair until the vocabulary has vocabSize
// tokens or the best pair occurs fewer than minFreq times, and returns the
// number of merges.
func (m *pairMerger) run(vocabSize, minFreq int) int {
	merges := 0
	for len(m.v.vocab) < vocabSize && len(m.counts) > 0 {
		var best tokenPair
		var bestN int64 = -1
		for p, n := range m.counts {
			if n > bestN || (n == bestN && pairLess(m.v.vocab, p.a, p.b, best.a, best.b)) {
				best, bestN = p, n
			}
		}
		if bestN < int64(minFreq) {
			break
		}
		merged := m.v.add(m.v.vocab[best.a] + strings.TrimPrefix(m.v.vocab[best.b], m.prefix))
		merges++
		m.merge(best, merged)
	}
	return merges
}

// merge replaces pair best by token merged in every word that has it.
func (m *pairMerger) merge(best tokenPair, merged int) {
	ws := make([]int, 0, len(m.where[best]))
	for w := range m.where[best] {
		ws = append(ws, w)
	}
	slices.Sort(ws)
	delete(m.where, best)
	for _, w := range ws {
		m.addPairs(w, -1)
		s := m.syms[w]
		out := s[:0:0]
		for i := 0; i < len(s); i++ {
			if i+1 < len(s) && s[i] == best.a && s[i+1] == best.b {
				out = append(out, merged)
				i++
				continue
			}
			out = append(out, s[i])
		}
		m.syms[w] = out
		m.addPairs(w, 1)
	}
}

// pairLess orders pairs by their left token text, then their right token text.
func pairLess(vocab []string, a1, b1, a2, b2 int) bool {
	if c := strings.Compare(vocab[a1], vocab[a2]); c != 0 {
		return c < 0
	}
	return vocab[b1] < vocab[b2]
}
