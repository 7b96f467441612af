package chunk

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Abbreviations are the lower-cased words (without their final period)
// after which a period never ends a sentence: Portuguese and English
// abbreviations common in laboratory protocols and papers ("Fig. 2",
// "p. ex.", "Dr. Silva", "et al.", "e.g."). "etc." is absent on purpose: it
// usually ends the sentence. Single letters ("p.", initials "J.") are
// handled by a separate rule and need not be listed.
var Abbreviations = map[string]bool{
	"fig": true, "figs": true, "ex": true, "exs": true, "pp": true, "pág": true, "págs": true, "pag": true,
	"dr": true, "dra": true, "drs": true, "dras": true, "sr": true, "sra": true, "srs": true, "sras": true,
	"prof": true, "profa": true, "profs": true, "eng": true, "enf": true, "mr": true, "mrs": true, "ms": true,
	"st": true, "jr": true, "inc": true, "ltd": true, "co": true, "corp": true,
	"aprox": true, "approx": true, "ca": true, "cap": true, "caps": true, "vol": true, "vols": true,
	"nº": true, "n°": true, "núm": true, "num": true, "art": true, "arts": true, "obs": true,
	"tab": true, "ref": true, "refs": true, "sec": true, "secs": true, "eq": true, "eqs": true,
	"e.g": true, "i.e": true, "vs": true, "cf": true, "al": true, "ed": true, "eds": true,
	"op": true, "cit": true, "ibid": true, "resp": true, "máx": true, "mín": true, "max": true, "min": true,
}

// SplitSentences cuts text into sentences and returns them as Pieces whose
// Text is text[Start:End] (byte offsets), stripped of surrounding
// whitespace; blank sentences are dropped. It is a rule-based splitter for
// Portuguese and English clinical text (in the spirit of NLTK's Punkt
// without training):
//
//   - A blank line (a newline, optional whitespace, another newline) always
//     ends a sentence. A single newline does not (PDF text wraps lines).
//   - A run of terminal punctuation (".", "!", "?", "…"), optionally followed
//     by closing quotes or brackets, ends a sentence when whitespace follows
//     and the next non-space character is not a lower-case letter.
//   - A period that is not followed by whitespace never ends a sentence, so
//     decimals and numbers ("5,5 mL", "3.14", "1.000") and dotted
//     abbreviations ("e.g.") stay inside.
//   - A period right after a single letter ("p. ex.", initials "J. Silva") or
//     after a word in Abbreviations (compared lower-cased, leading
//     punctuation removed: "Fig. 2", "(cf. Tab. 3)", "Dr. Souza") does not
//     end a sentence; neither does the period of a list marker of up to
//     three digits opening a sentence ("1. Corar"). "!" and "?" are not
//     subject to these rules.
func SplitSentences(text string) []Piece {
	var out []Piece
	start := 0
	emit := func(end int) {
		s, e := trimSpan(text, start, end)
		if s < e {
			out = append(out, Piece{Text: text[s:e], Start: s, End: e})
		}
	}
	i := 0
	for i < len(text) {
		r, w := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\n':
			// Blank line: the whitespace run starting here holds another newline.
			j := i + w
			blank := false
			for j < len(text) {
				r2, w2 := utf8.DecodeRuneInString(text[j:])
				if !isSpace(r2) {
					break
				}
				if r2 == '\n' {
					blank = true
				}
				j += w2
			}
			if blank {
				emit(i)
				start = j
			}
			i = j
			continue
		case isTerminal(r):
			j := i + w
			for j < len(text) {
				r2, w2 := utf8.DecodeRuneInString(text[j:])
				if !isTerminal(r2) && !isCloser(r2) {
					break
				}
				j += w2
			}
			if ends(text, start, i, j) {
				emit(j)
				start = j
			}
			i = j
			continue
		}
		i += w
	}
	emit(len(text))
	return out
}

// ends reports whether the punctuation run text[i:j] (first rune at i) ends
// the sentence that began at start.
func ends(text string, start, i, j int) bool {
	if j < len(text) {
		r, _ := utf8.DecodeRuneInString(text[j:])
		if !isSpace(r) {
			return false
		}
	}
	k := j
	for k < len(text) {
		r, w := utf8.DecodeRuneInString(text[k:])
		if !isSpace(r) {
			if unicode.IsLower(r) {
				return false
			}
			break
		}
		k += w
	}
	if text[i] != '.' {
		return true
	}
	w := lastWord(text[:i])
	if abbreviation(w) {
		return false
	}
	// A list marker "1." / "12." opening the sentence.
	before := strings.TrimFunc(text[start:i-len(w)], isSpace)
	return !(before == "" && w != "" && len(w) <= 3 && strings.Trim(w, "0123456789") == "")
}

// lastWord is the run of non-space characters ending s, without leading
// opening punctuation.
func lastWord(s string) string {
	k := len(s)
	for k > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:k])
		if isSpace(r) {
			break
		}
		k -= w
	}
	return strings.TrimLeft(s[k:], "([{\"'“‘«")
}

func abbreviation(word string) bool {
	if word == "" {
		return false
	}
	if r, w := utf8.DecodeRuneInString(word); w == len(word) && unicode.IsLetter(r) {
		return true
	}
	return Abbreviations[strings.ToLower(word)]
}

func isTerminal(r rune) bool { return r == '.' || r == '!' || r == '?' || r == '…' }

func isCloser(r rune) bool {
	switch r {
	case '"', '\'', ')', ']', '}', '”', '’', '»':
		return true
	}
	return false
}

// trimSpan narrows [s, e) of text past leading and trailing whitespace.
func trimSpan(text string, s, e int) (int, int) {
	for s < e {
		r, w := utf8.DecodeRuneInString(text[s:e])
		if !isSpace(r) {
			break
		}
		s += w
	}
	for e > s {
		r, w := utf8.DecodeLastRuneInString(text[s:e])
		if !isSpace(r) {
			break
		}
		e -= w
	}
	return s, e
}
