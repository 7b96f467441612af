package bm25

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/registry"
	"golang.org/x/text/unicode/norm"

	// Register bleve's stock analyzers under their usual names.
	_ "github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	_ "github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/lang/pt"
)

// Names registered with bleve's registry by this package.
const (
	// BiomedAnalyzer is the analyzer name ("biomed") of the biomedical
	// analyzer: NFCFilter, BiomedTokenizer, FoldFilter, then BiomedStopFilter.
	BiomedAnalyzer = "biomed"
	// BiomedPTAnalyzer is the analyzer name ("biomed-pt") of the biomedical
	// analyzer with Portuguese light stemming, in the order of Lucene's
	// PortugueseAnalyzer (lower case, stop words, light stemmer) and
	// folded after stemming, since the stemmer reads accents ("-ões" →
	// "-ão"): NFCFilter, BiomedTokenizer, bleve's to_lower,
	// BiomedStopFilter, bleve's stemmer_pt_light, then FoldFilter.
	BiomedPTAnalyzer = "biomed-pt"
	// BiomedTokenizer is the bleve tokenizer name of the biomedical tokenizer.
	BiomedTokenizer = "ragforge_biomed"
	// FoldFilter is the bleve token filter name of the case/accent folder.
	FoldFilter = "ragforge_fold"
	// BiomedStopFilter is the bleve token filter name of the biomedical
	// analyzer's stop words: the Snowball Portuguese and English lists
	// (bleve's stop_pt and stop_en), folded as FoldFilter folds terms; a
	// term is dropped when it or its folded form is on them, so the filter
	// works before folding too (biomed-pt).
	BiomedStopFilter = "ragforge_stop_pt_en"
	// NFCFilter is the bleve char filter name of Unicode NFC normalization,
	// which every analyzer of this package applies first, so that composed
	// ("ç" U+00E7) and decomposed ("c" + U+0327) spellings give the same
	// terms.
	NFCFilter = "ragforge_nfc"
)

// analyzers lists the analyzer names Config.Analyzer accepts, with what each
// one does (bleve v2.6 definitions for the stock ones). Every one starts
// with NFC normalization.
var analyzers = map[string]string{
	BiomedAnalyzer:   "biomedical tokenizer, NFKD accent folding, lower case, Portuguese and English stop words; no stemming",
	BiomedPTAnalyzer: "biomed with the Portuguese light stemmer (Lucene's PortugueseLightStemFilter, as bleve pt), stemmed before accent folding",
	"pt":             "bleve pt: unicode (UAX#29) tokenizer, lower case, Portuguese stop words, Portuguese light stemmer",
	"en":             "bleve en: unicode tokenizer, possessive filter, lower case, English stop words, Porter stemmer",
	"cjk":            "bleve cjk: unicode tokenizer, width fold, lower case, CJK bigrams",
	"standard":       "bleve standard: unicode tokenizer, lower case, English stop words",
}

// bleveName is the bleve registry name of a Config.Analyzer name: the
// biomedical analyzer is registered under its own name, the stock ones under
// "ragforge_nfc_<name>" (bleve's own "pt", "en", ... lack NFC).
func bleveName(analyzer string) string {
	if analyzer == BiomedAnalyzer || analyzer == BiomedPTAnalyzer {
		return analyzer
	}
	return "ragforge_nfc_" + analyzer
}

// Analyzers returns the analyzer names Config.Analyzer accepts, sorted.
func Analyzers() []string {
	names := make([]string, 0, len(analyzers))
	for n := range analyzers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func init() {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(registry.RegisterCharFilter(NFCFilter,
		func(map[string]interface{}, *registry.Cache) (analysis.CharFilter, error) {
			return nfcFilter{}, nil
		}))
	must(registry.RegisterTokenizer(BiomedTokenizer,
		func(map[string]interface{}, *registry.Cache) (analysis.Tokenizer, error) {
			return biomedTokenizer{}, nil
		}))
	must(registry.RegisterTokenFilter(FoldFilter,
		func(map[string]interface{}, *registry.Cache) (analysis.TokenFilter, error) {
			return foldFilter{}, nil
		}))
	must(registry.RegisterTokenFilter(BiomedStopFilter,
		func(_ map[string]interface{}, cache *registry.Cache) (analysis.TokenFilter, error) {
			words := analysis.NewTokenMap()
			for _, name := range []string{pt.StopName, en.StopName} {
				m, err := cache.TokenMapNamed(name)
				if err != nil {
					return nil, err
				}
				for w := range m {
					words.AddToken(Fold(w))
				}
			}
			return foldedStopFilter{words}, nil
		}))
	// The biomedical analyzers: NFC, the biomedical tokenizer, then filters.
	for name, filters := range map[string][]string{
		BiomedAnalyzer:   {FoldFilter, BiomedStopFilter},
		BiomedPTAnalyzer: {lowercase.Name, BiomedStopFilter, pt.LightStemmerName, FoldFilter},
	} {
		must(registry.RegisterAnalyzer(name,
			func(_ map[string]interface{}, cache *registry.Cache) (analysis.Analyzer, error) {
				nfc, err := cache.CharFilterNamed(NFCFilter)
				if err != nil {
					return nil, err
				}
				tok, err := cache.TokenizerNamed(BiomedTokenizer)
				if err != nil {
					return nil, err
				}
				var fs []analysis.TokenFilter
				for _, fn := range filters {
					f, err := cache.TokenFilterNamed(fn)
					if err != nil {
						return nil, err
					}
					fs = append(fs, f)
				}
				return &analysis.DefaultAnalyzer{CharFilters: []analysis.CharFilter{nfc}, Tokenizer: tok, TokenFilters: fs}, nil
			}))
	}
	// The stock analyzers, with NFC in front.
	for name := range analyzers {
		if name == BiomedAnalyzer || name == BiomedPTAnalyzer {
			continue
		}
		must(registry.RegisterAnalyzer(bleveName(name),
			func(_ map[string]interface{}, cache *registry.Cache) (analysis.Analyzer, error) {
				nfc, err := cache.CharFilterNamed(NFCFilter)
				if err != nil {
					return nil, err
				}
				a, err := cache.AnalyzerNamed(name)
				if err != nil {
					return nil, err
				}
				d, ok := a.(*analysis.DefaultAnalyzer)
				if !ok {
					return nil, fmt.Errorf("bleve analyzer %q is a %T, want *analysis.DefaultAnalyzer", name, a)
				}
				w := *d
				w.CharFilters = append([]analysis.CharFilter{nfc}, d.CharFilters...)
				return &w, nil
			}))
	}
}

// foldedStopFilter drops the tokens whose term, or its Fold, is in words
// (folded stop words).
type foldedStopFilter struct{ words analysis.TokenMap }

func (f foldedStopFilter) Filter(input analysis.TokenStream) analysis.TokenStream {
	out := input[:0]
	for _, t := range input {
		if _, stop := f.words[string(t.Term)]; stop {
			continue
		}
		if _, stop := f.words[Fold(string(t.Term))]; stop {
			continue
		}
		out = append(out, t)
	}
	return out
}

// nfcFilter is the NFCFilter char filter.
type nfcFilter struct{}

func (nfcFilter) Filter(in []byte) []byte { return norm.NFC.Bytes(in) }

// Analyze runs the named analyzer (one of Analyzers()) over text and returns
// the terms in order, as they are indexed and queried.
func Analyze(analyzer, text string) ([]string, error) {
	if _, ok := analyzers[analyzer]; !ok {
		return nil, fmt.Errorf("bm25: analyzer %q: unknown (have %s)", analyzer, strings.Join(Analyzers(), ", "))
	}
	a, err := registry.NewCache().AnalyzerNamed(bleveName(analyzer))
	if err != nil {
		return nil, fmt.Errorf("bm25: analyzer %q: %w", analyzer, err)
	}
	return terms(a.Analyze([]byte(text))), nil
}

func terms(ts analysis.TokenStream) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t.Term)
	}
	return out
}

// biomedTokenizer splits text into terms that keep biomedical notation whole:
// "HER2+", "ER-", "BI-RADS", "70%", "5mL", "mg/dL", "≥10", "5,5", "37°C".
//
// Rules (a word rune is a Unicode letter, number or mark):
//   - Whitespace and every rune that is not a word rune and not listed below
//     ends a token: ( ) [ ] " ; ! ? * # = → ® and so on.
//   - hyphens (- ‐ ‑), '_', '&', apostrophes (' ’) and '°' are kept between two word runes
//     ("BI-RADS", "pós-operatório", "d'água").
//   - '.' ',' ':' '–' are kept only between two digits ("5,5", "1.000", "10:30",
//     "5–10"); elsewhere they split ("fim.Início" → "fim", "início").
//   - '/' is kept between two word runes when a digit touches it or the word
//     runs on both sides have at most 3 runes ("mg/dL", "HER2/neu", "1/2"),
//     and splits longer words ("dor/ardor").
//   - '≥' '≤' '<' '>' '±' '+' '-' '~' '≈' are kept as a prefix when a digit
//     follows and no word rune precedes ("≥10", "<5", "-20").
//   - Suffixes: '%' '‰' '°' after a digit ("70%", "37°"); '+' after a word
//     rune ("HER2+", "3+"); '-' after a word rune when the token so far has an
//     upper-case letter or a digit ("ER-", "HER2-", but "pré-" → "pré").
//
// Tokens carry byte offsets into the input and 1-based positions, as bleve's
// tokenizers do. Case and accents are left to FoldFilter.
type biomedTokenizer struct{}

func isWord(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) }

func isDigit(r rune) bool { return unicode.IsDigit(r) }

func isSpecial(r rune) bool {
	return strings.ContainsRune("-‐‑_&'’°.,:–/≥≤<>±+~≈%‰", r)
}

func (biomedTokenizer) Tokenize(input []byte) analysis.TokenStream {
	// Decode runes with their byte offsets; rs has a sentinel-free layout and
	// at(i) returns 0 outside [0, len).
	var rs []rune
	var offs []int
	for i := 0; i < len(input); {
		r, n := utf8.DecodeRune(input[i:])
		rs = append(rs, r)
		offs = append(offs, i)
		i += n
	}
	offs = append(offs, len(input))
	at := func(i int) rune {
		if i < 0 || i >= len(rs) {
			return 0
		}
		return rs[i]
	}
	// keep[i] says whether rune i belongs to a token.
	keep := make([]bool, len(rs))
	runLen := func(i, step int) int { // word runes from i going in direction step
		n := 0
		for ; i >= 0 && i < len(rs) && isWord(rs[i]); i += step {
			n++
		}
		return n
	}
	tokStart := 0 // start of the current run of kept runes, for the '-' suffix rule
	for i, r := range rs {
		if isWord(r) {
			keep[i] = true
		} else if isSpecial(r) {
			p, q := at(i-1), at(i+1)
			pw, qw := i > 0 && keep[i-1] && isWord(p), isWord(q)
			switch {
			case pw && qw && strings.ContainsRune("-‐‑_&'’°", r):
				keep[i] = true
			case pw && qw && strings.ContainsRune(".,:–", r):
				keep[i] = isDigit(p) && isDigit(q)
			case pw && qw && r == '/':
				keep[i] = isDigit(p) || isDigit(q) || (runLen(i-1, -1) <= 3 && runLen(i+1, 1) <= 3)
			case !pw && isDigit(q) && strings.ContainsRune("≥≤<>±+-~≈", r):
				keep[i] = i == 0 || !keep[i-1]
			case pw && isDigit(p) && strings.ContainsRune("%‰°", r):
				keep[i] = true
			case pw && !qw && r == '+':
				keep[i] = true
			case pw && !qw && r == '-':
				for _, c := range rs[tokStart:i] {
					if unicode.IsUpper(c) || isDigit(c) {
						keep[i] = true
						break
					}
				}
			}
		}
		if keep[i] && (i == 0 || !keep[i-1]) {
			tokStart = i
		}
	}
	var ts analysis.TokenStream
	for i := 0; i < len(rs); {
		if !keep[i] {
			i++
			continue
		}
		j, letters, words := i, false, false
		for ; j < len(rs) && keep[j]; j++ {
			letters = letters || unicode.IsLetter(rs[j])
			words = words || isWord(rs[j])
		}
		if words {
			typ := analysis.AlphaNumeric
			if !letters {
				typ = analysis.Numeric
			}
			ts = append(ts, &analysis.Token{
				Term:     input[offs[i]:offs[j]],
				Start:    offs[i],
				End:      offs[j],
				Position: len(ts) + 1,
				Type:     typ,
			})
		}
		i = j
	}
	return ts
}

// foldFilter folds case and accents: NFKD decomposition, combining marks
// (Unicode category Mn) dropped, then Unicode lower case. "Coloração" →
// "coloracao", "µL" (micro sign) → "μl", "ﬁ" → "fi"; symbols such as '≥'
// are kept.
type foldFilter struct{}

func (foldFilter) Filter(input analysis.TokenStream) analysis.TokenStream {
	for _, t := range input {
		t.Term = []byte(Fold(string(t.Term)))
	}
	return input
}

// Fold applies FoldFilter's normalization to s.
func Fold(s string) string {
	d := norm.NFKD.String(s)
	var b strings.Builder
	b.Grow(len(d))
	for _, r := range d {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
