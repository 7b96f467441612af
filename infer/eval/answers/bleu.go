// Package answers evaluates generated answers: lexical metrics against a
// reference answer (sacreBLEU-compatible BLEU-4, rouge-score-compatible
// ROUGE-1/2/L F1), LLM-judged metrics through an OpenAI-compatible chat
// server (faithfulness, answer relevance, context recall, following RAGAS:
// Es et al. 2024, "RAGAS: Automated Evaluation of Retrieval Augmented
// Generation"), and a runner that answers each question with the first K
// retrieved contexts, K = 1..5, and stores per-item rows in a run.
package answers

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode"
)

// Tokenizer13a is sacreBLEU's default "13a" tokenizer (mteval-v13a.pl as
// ported in sacrebleu/tokenizers/tokenizer_13a.py): drop "<skipped>", join
// "-\n", newlines to spaces, unescape &quot; &amp; &lt; &gt;, then the
// TokenizerRegexp rules on " line ":
//
//	([\{-\~\[-\` -\&\(-\+\:-\@\/])  → " \1 "   (punctuation and symbols)
//	([^0-9])([\.,])                 → "\1 \2 " (period/comma unless after a digit)
//	([\.,])([^0-9])                 → " \1 \2" (period/comma unless before a digit)
//	([0-9])(-)                      → "\1 \2 " (dash after a digit)
//
// and finally split on whitespace. Case is kept (sacreBLEU lowercase=False).
func Tokenizer13a(line string) []string {
	line = strings.ReplaceAll(line, "<skipped>", "")
	line = strings.ReplaceAll(line, "-\n", "")
	line = strings.ReplaceAll(line, "\n", " ")
	if strings.Contains(line, "&") {
		line = strings.ReplaceAll(line, "&quot;", `"`)
		line = strings.ReplaceAll(line, "&amp;", "&")
		line = strings.ReplaceAll(line, "&lt;", "<")
		line = strings.ReplaceAll(line, "&gt;", ">")
	}
	line = " " + line + " "
	for _, r := range rules13a {
		line = r.re.ReplaceAllString(line, r.repl)
	}
	return strings.FieldsFunc(line, pyspace)
}

var rules13a = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`([\{-\~\[-\x60 -\&\(-\+\:-\@\/])`), " ${1} "},
	{regexp.MustCompile(`([^0-9])([\.,])`), "${1} ${2} "},
	{regexp.MustCompile(`([\.,])([^0-9])`), " ${1} ${2}"},
	{regexp.MustCompile(`([0-9])(-)`), "${1} ${2} "},
}

// pyspace is Python's str.isspace (str.split() with no argument).
func pyspace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// BLEUOptions follow sacreBLEU's BLEU(...) arguments.
type BLEUOptions struct {
	// Smooth is "none" (the default here; sacreBLEU's corpus default is
	// "exp"), "exp" (NIST geometric: the n-th zero-match order gets
	// precision 100 / (2^n · total_n)), "floor" (zero matches get
	// 100·SmoothValue/total_n, default 0.1) or "add-k" (add SmoothValue,
	// default 1, to matches and totals of orders n >= 2).
	Smooth string
	// SmoothValue is the floor / add-k value; 0 means the sacreBLEU default.
	SmoothValue float64
	// EffectiveOrder averages only over the orders with a non-zero total
	// (sacreBLEU effective_order; SentenceBLEU sets it).
	EffectiveOrder bool
	// Lowercase lower-cases hypotheses and references before tokenizing.
	Lowercase bool
}

// BLEUScore is a sacreBLEU BLEUScore: Score and Precisions in [0, 100].
type BLEUScore struct {
	Score      float64    `json:"score"`
	Precisions [4]float64 `json:"precisions"` // modified n-gram precisions p_1..p_4 (×100)
	BP         float64    `json:"bp"`         // brevity penalty
	SysLen     int        `json:"sys_len"`    // hypothesis tokens
	RefLen     int        `json:"ref_len"`    // reference tokens
	Correct    [4]int     `json:"correct"`    // clipped n-gram matches per order
	Total      [4]int     `json:"total"`      // hypothesis n-grams per order
}

// BLEU is sacreBLEU corpus_bleu(hyps, [refs]) with one reference per
// hypothesis and the 13a tokenizer (Papineni et al. 2002, eq. 1-2):
//
//	p_n  = Σ_s Σ_g min(count_hyp(g), count_ref(g)) / Σ_s #n-grams(hyp_s)
//	BP   = 1 if c >= r, else exp(1 - r/c) (0 when c = 0); c, r: total lengths
//	BLEU = 100 · BP · exp(Σ_{n=1..4} log p_n / 4)
//
// A zero p_n makes BLEU 0 (sacreBLEU's log(0) = -9999999999) unless a
// smoothing method fills it. An empty corpus or empty hypotheses give 0.
// Errors: len(hyps) != len(refs), an unknown smoothing method.
func BLEU(hyps, refs []string, opt BLEUOptions) (BLEUScore, error) {
	var s BLEUScore
	if len(hyps) != len(refs) {
		return s, fmt.Errorf("bleu: %d hypotheses but %d references", len(hyps), len(refs))
	}
	smooth := opt.Smooth
	if smooth == "" {
		smooth = "none"
	}
	sv := opt.SmoothValue
	switch smooth {
	case "none", "exp":
	case "floor":
		if sv == 0 {
			sv = 0.1
		}
	case "add-k":
		if sv == 0 {
			sv = 1
		}
	default:
		return s, fmt.Errorf("bleu: field %q: unknown method %q (none, exp, floor, add-k)", "Smooth", opt.Smooth)
	}
	for i := range hyps {
		h, r := hyps[i], refs[i]
		if opt.Lowercase {
			h, r = strings.ToLower(h), strings.ToLower(r)
		}
		ht, rt := Tokenizer13a(h), Tokenizer13a(r)
		s.SysLen += len(ht)
		s.RefLen += len(rt)
		for n := 1; n <= 4; n++ {
			hc, rc := ngrams(ht, n), ngrams(rt, n)
			for g, c := range hc {
				s.Correct[n-1] += min(c, rc[g])
			}
			s.Total[n-1] += max(len(ht)-n+1, 0)
		}
	}
	correct := [4]float64{}
	total := [4]float64{}
	for n := range 4 {
		correct[n], total[n] = float64(s.Correct[n]), float64(s.Total[n])
	}
	smoothMteval := 1.0
	effOrder := 4
	for n := 1; n <= 4; n++ {
		if smooth == "add-k" && n > 1 {
			correct[n-1] += sv
			total[n-1] += sv
		}
		if total[n-1] == 0 {
			break
		}
		if opt.EffectiveOrder {
			effOrder = n
		}
		if correct[n-1] == 0 {
			switch smooth {
			case "exp":
				smoothMteval *= 2
				s.Precisions[n-1] = 100 / (smoothMteval * total[n-1])
			case "floor":
				s.Precisions[n-1] = 100 * sv / total[n-1]
			}
		} else {
			s.Precisions[n-1] = 100 * correct[n-1] / total[n-1]
		}
	}
	switch {
	case s.SysLen == 0:
		s.BP = 0
	case s.SysLen < s.RefLen:
		s.BP = math.Exp(1 - float64(s.RefLen)/float64(s.SysLen))
	default:
		s.BP = 1
	}
	var logSum float64
	for _, p := range s.Precisions[:effOrder] {
		if p == 0 {
			logSum += -9999999999
		} else {
			logSum += math.Log(p)
		}
	}
	s.Score = s.BP * math.Exp(logSum/float64(effOrder))
	return s, nil
}

// SentenceBLEU is sacreBLEU sentence_bleu(hyp, [ref]): BLEU of one pair with
// EffectiveOrder set (so a short hypothesis is not zeroed by its missing
// 4-grams). The smoothing is opt.Smooth ("none" by default; sacreBLEU's
// sentence default is "exp").
func SentenceBLEU(hyp, ref string, opt BLEUOptions) (BLEUScore, error) {
	opt.EffectiveOrder = true
	return BLEU([]string{hyp}, []string{ref}, opt)
}

// ngrams counts the n-grams of toks, keyed by their tokens joined with \x00.
func ngrams(toks []string, n int) map[string]int {
	m := map[string]int{}
	for i := 0; i+n <= len(toks); i++ {
		m[strings.Join(toks[i:i+n], "\x00")]++
	}
	return m
}
