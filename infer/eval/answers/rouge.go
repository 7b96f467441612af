package answers

import (
	"strings"
	"unicode"
)

// ROUGEScore holds ROUGE F1 values in [0, 1].
type ROUGEScore struct {
	R1 float64 `json:"rouge1"`
	R2 float64 `json:"rouge2"`
	RL float64 `json:"rougeL"`
}

// ROUGEOptions change the tokenization.
type ROUGEOptions struct {
	// Unicode keeps non-ASCII letters and digits (Portuguese "coloração"
	// stays one token). rouge-score's default tokenizer keeps only [a-z0-9],
	// so "coloração" becomes "colora", "o"; the default here is the
	// rouge-score behaviour, for comparability with published numbers.
	Unicode bool
}

// ROUGETokens is rouge-score's default tokenizer (rouge_score/tokenize.py,
// no stemmer): lower-case, replace every run of characters outside [a-z0-9]
// with a space, split on whitespace. With opt.Unicode, letters and digits of
// any script are kept.
func ROUGETokens(s string, opt ROUGEOptions) []string {
	s = strings.ToLower(s)
	keep := func(r rune) bool { return (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') }
	if opt.Unicode {
		keep = func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	}
	return strings.FieldsFunc(s, func(r rune) bool { return !keep(r) })
}

// ROUGE is ROUGEWith with default options.
func ROUGE(hyp, ref string) ROUGEScore { return ROUGEWith(hyp, ref, ROUGEOptions{}) }

// ROUGEWith scores hyp against ref as rouge-score's RougeScorer(["rouge1",
// "rouge2", "rougeL"], use_stemmer=False) and returns the F-measures
// (Lin 2004):
//
//	ROUGE-N: overlap = Σ_g min(count_hyp(g), count_ref(g)) over n-grams g,
//	         P = overlap / #hyp n-grams, R = overlap / #ref n-grams
//	ROUGE-L: overlap = |LCS(hyp tokens, ref tokens)|, P = LCS / |hyp|,
//	         R = LCS / |ref| (sentence-level, not summary-level rougeLsum)
//	F1     = 2PR / (P + R), 0 when P + R = 0 (so an empty side gives 0).
func ROUGEWith(hyp, ref string, opt ROUGEOptions) ROUGEScore {
	h, r := ROUGETokens(hyp, opt), ROUGETokens(ref, opt)
	return ROUGEScore{R1: rougeN(h, r, 1), R2: rougeN(h, r, 2), RL: f1(lcs(h, r), len(h), len(r))}
}

func rougeN(h, r []string, n int) float64 {
	hc, rc := ngrams(h, n), ngrams(r, n)
	overlap := 0
	for g, c := range hc {
		overlap += min(c, rc[g])
	}
	return f1(overlap, max(len(h)-n+1, 0), max(len(r)-n+1, 0))
}

// f1 follows rouge-score: precision = overlap / max(hypCount, 1), recall =
// overlap / max(refCount, 1), F = 2PR/(P+R) or 0.
func f1(overlap, hypCount, refCount int) float64 {
	p := float64(overlap) / float64(max(hypCount, 1))
	r := float64(overlap) / float64(max(refCount, 1))
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}

// lcs is the length of the longest common subsequence (dynamic programming,
// two rows).
func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(prev[j+1], cur[j])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
