package learn

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// count is a string and its number of occurrences.
type count struct {
	s string
	n int64
}

// sortedCounts orders a count map by count descending, then string.
func sortedCounts(m map[string]int64) []count {
	out := make([]count, 0, len(m))
	for s, n := range m {
		out = append(out, count{s, n})
	}
	slices.SortFunc(out, func(a, b count) int {
		if a.n != b.n {
			return cmp.Compare(b.n, a.n)
		}
		return strings.Compare(a.s, b.s)
	})
	return out
}

// wordKey is one ▁-prefixed word and whether it ended its sentence (then
// the character after it is the sentence boundary, not ▁).
type wordKey struct {
	w     string
	final bool
}

// corpus holds the character and word counts of the normalized texts.
type corpus struct {
	chars map[string]int64
	words map[wordKey]int64
}

func newCorpus() *corpus {
	return &corpus{chars: map[string]int64{}, words: map[wordKey]int64{}}
}

// add counts one normalized sentence: its characters, and its words split
// before every ▁ (sentencepiece SplitIntoWords).
func (c *corpus) add(norm string) {
	if norm == "" {
		return
	}
	for _, r := range norm {
		c.chars[string(r)]++
	}
	start := 0
	for i, r := range norm {
		if r == spaceSymbol && i > start {
			c.words[wordKey{norm[start:i], false}]++
			start = i
		}
	}
	c.words[wordKey{norm[start:], true}]++
}

// wordList merges the sentence-final flag away: EM sees each word once with
// its total count, ordered by count descending, then text.
func (c *corpus) wordList() []count {
	m := map[string]int64{}
	for k, n := range c.words {
		m[k.w] += n
	}
	return sortedCounts(m)
}

// scriptOf returns the Unicode script of r, Hiragana and Katakana folded into
// Han as sentencepiece does; "Common" when no script table has r.
func scriptOf(r rune, cache map[rune]string) string {
	if r < 0x80 {
		if unicode.IsLetter(r) {
			return "Latin"
		}
		return "Common"
	}
	if s, ok := cache[r]; ok {
		return s
	}
	s := "Common"
	for _, name := range scriptNames {
		if unicode.Is(unicode.Scripts[name], r) {
			s = name
			break
		}
	}
	if s == "Hiragana" || s == "Katakana" || r == 0x30FC {
		s = "Han"
	}
	cache[r] = s
	return s
}

var scriptNames = func() []string {
	names := make([]string, 0, len(unicode.Scripts))
	for n := range unicode.Scripts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}()

// seedPieces returns the seed vocabulary (step 1 of TrainUnigram) with log
// probability scores: characters first (count descending), then substrings
// (count×length descending, ties by text).
func seedPieces(chars []count, c *corpus, opt UnigramOptions) []scored {
	type stat struct {
		n         int64
		next      rune
		branching bool
	}
	const boundary = rune(-1)
	subs := map[string]*stat{}
	cache := map[rune]string{}
	for k, f := range c.words {
		r := []rune(k.w)
		for i := range r {
			prev := ""
			for l := 1; l <= opt.MaxPieceLen && i+l <= len(r); l++ {
				ch := r[i+l-1]
				if ch == spaceSymbol {
					if l > 1 {
						break // ▁ only as the first rune
					}
				} else {
					s := scriptOf(ch, cache)
					if prev != "" && s != prev {
						break // one Unicode script per piece
					}
					prev = s
				}
				if l < 2 {
					continue
				}
				next := spaceSymbol
				switch {
				case i+l < len(r):
					next = r[i+l]
				case k.final:
					next = boundary
				}
				sub := string(r[i : i+l])
				if st := subs[sub]; st == nil {
					subs[sub] = &stat{n: f, next: next}
				} else {
					st.n += f
					st.branching = st.branching || st.next != next
				}
			}
		}
	}
	var cands []count
	for s, st := range subs {
		if st.branching && st.n >= int64(opt.MinFreq) {
			cands = append(cands, count{s, st.n * int64(utf8.RuneCountInString(s))})
		}
	}
	cands = sortedCounts(toMap(cands))
	if len(cands) > opt.SeedSize {
		cands = cands[:opt.SeedSize]
	}
	all := append(slices.Clone(chars), cands...)
	var sum float64
	for _, x := range all {
		sum += float64(x.n)
	}
	logSum := math.Log(sum)
	out := make([]scored, len(all))
	for i, x := range all {
		out[i] = scored{x.s, math.Log(float64(x.n)) - logSum}
	}
	return out
}

func toMap(cs []count) map[string]int64 {
	m := make(map[string]int64, len(cs))
	for _, c := range cs {
		m[c.s] = c.n
	}
	return m
}
