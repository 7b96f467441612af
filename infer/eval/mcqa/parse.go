package mcqa

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Parse modes of --parse.
const (
	ParseStrict = "strict"
	ParseMIRAGE = "mirage"
)

// Parse failure causes (Parsed.Failure).
const (
	FailEmpty     = "empty"          // the output is blank
	FailNotOption = "not_an_option"  // answer_choice names no option (a letter outside them, other text)
	FailAmbiguous = "ambiguous"      // several different option letters are named
	FailMalformed = "malformed_json" // a JSON object was begun but does not parse, and nothing else names an option
	FailNoAnswer  = "no_answer"      // no answer_choice, option letter or option text
	// FailOverContext: the answerer refused the prompt as longer than its
	// context (HTTP 400, as vLLM does); the output is taken as empty.
	FailOverContext = "over_context"
)

// Parsed is the strict parser's reading of one output: Choice is an option
// letter, or "" with Failure naming why not; How says which rule read it
// ("json", "letter", "text").
type Parsed struct {
	Choice  string `json:"choice,omitempty"`
	How     string `json:"how,omitempty"`
	Failure string `json:"failure,omitempty"`
}

// ParseAnswer reads the chosen option from a model's output strictly, in
// this order:
//  1. the JSON object MedRAG's templates ask for (the text from the first
//     "{" to the last "}"): its "answer_choice" string, when it is an option
//     letter ("C", "C.", "(C)", "C) text", "C. text") or exactly an option's
//     text (case and surrounding space ignored); an answer_choice that is
//     neither is FailNotOption;
//  2. an unambiguous option letter: the whole output is a letter ("C",
//     "(C)", "C."), or every "answer is X", "answer: X", "option X" (and
//     `"answer_choice": "X"` in JSON cut short) names the same option letter
//     (different letters: FailAmbiguous);
//  3. the whole output is exactly an option's text.
//
// Anything else is a parse failure, never a guess.
func ParseAnswer(raw string, q Question) Parsed {
	s := strings.TrimSpace(raw)
	if s == "" {
		return Parsed{Failure: FailEmpty}
	}
	malformed := false
	if i, j := strings.Index(s, "{"), strings.LastIndex(s, "}"); i >= 0 {
		var obj map[string]any
		if j > i && json.Unmarshal([]byte(s[i:j+1]), &obj) == nil {
			if v, ok := obj["answer_choice"]; ok {
				str, _ := v.(string)
				if l := optionLetter(str, q); l != "" {
					return Parsed{Choice: l, How: "json"}
				}
				return Parsed{Failure: FailNotOption}
			}
		} else {
			malformed = true
		}
	}
	if l, ambiguous := statedLetter(s, q); ambiguous {
		return Parsed{Failure: FailAmbiguous}
	} else if l != "" {
		return Parsed{Choice: l, How: "letter"}
	}
	if l := optionByText(s, q); l != "" {
		return Parsed{Choice: l, How: "text"}
	}
	if malformed {
		return Parsed{Failure: FailMalformed}
	}
	return Parsed{Failure: FailNoAnswer}
}

var (
	// bareLetterRE is a whole answer that is one letter: "C", "(C)", "C.", "C)".
	bareLetterRE = regexp.MustCompile(`^\(?([A-Z])\)?[.:]?$`)
	// leadLetterRE is "C. text", "C) text", "C: text", "(C) text".
	leadLetterRE = regexp.MustCompile(`^\(?([A-Z])(?:[.):]|\))\s+(.+)$`)
	// statedRE finds "answer is C", "answer: (C)", "option C", and
	// `"answer_choice": "C"` in JSON that does not parse (cut short).
	statedRE = regexp.MustCompile(`(?i:\banswer(?:_choice)?"?(?:\s+is)?\s*[:=]?\s*"?|\boption\s+)\(?([A-Z])\b`)
)

// optionLetter reads an answer_choice value: a letter among q's options, a
// letter with its text, or an option's exact text; "" otherwise.
func optionLetter(v string, q Question) string {
	v = strings.TrimSpace(v)
	if m := bareLetterRE.FindStringSubmatch(v); m != nil {
		if _, ok := q.Option(m[1]); ok {
			return m[1]
		}
		return ""
	}
	if m := leadLetterRE.FindStringSubmatch(v); m != nil {
		if _, ok := q.Option(m[1]); ok {
			return m[1]
		}
	}
	return optionByText(v, q)
}

// statedLetter returns the option letter the output names, "" when it names
// none, and ambiguous when it names several different ones.
func statedLetter(s string, q Question) (string, bool) {
	if m := bareLetterRE.FindStringSubmatch(s); m != nil {
		if _, ok := q.Option(m[1]); ok {
			return m[1], false
		}
	}
	found := ""
	for _, m := range statedRE.FindAllStringSubmatch(s, -1) {
		if _, ok := q.Option(m[1]); !ok {
			continue
		}
		if found != "" && found != m[1] {
			return "", true
		}
		found = m[1]
	}
	return found, false
}

// optionByText returns the letter of the option whose text is exactly s
// (case, surrounding space and one final period ignored), "" when none is.
func optionByText(s string, q Question) string {
	norm := func(t string) string { return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(t), ".")) }
	s = norm(s)
	for _, o := range q.Options {
		if norm(o.Text) == s {
			return o.Letter
		}
	}
	return ""
}

// pyWS is Python's str.isspace set (what str.strip and re's \s match on
// str patterns), so the MIRAGE parser strips and matches as Python does.
const pyWS = `\t\n\v\f\r\x1c-\x1f \x85\p{Z}`

// mirageRules are MIRAGE's locate_answer patterns in its order
// (Teddy-XiongGZ/MIRAGE src/utils.py); only A–D are ever found.
var mirageRules = func() []*regexp.Regexp {
	ws := "[" + pyWS + "]"
	pats := []string{
		`^` + ws + `*(A|B|C|D)$`,
		`^` + ws + `*(A|B|C|D) or`,
		`^` + ws + `*(A|B|C|D) and`,
		`^` + ws + `*(A|B|C|D)/`,
		`^` + ws + `*(A|B|C|D),`,
		`[Oo]ption (A|B|C|D)`,
		`:` + ws + `*(A|B|C|D)`,
		`^` + ws + `*(A|B|C|D)\.`,
		`^` + ws + `*(A|B|C|D)"`,
		`^` + ws + `*(A|B|C|D):`,
	}
	out := make([]*regexp.Regexp, len(pats))
	for i, p := range pats {
		out[i] = regexp.MustCompile(p)
	}
	return out
}()

// MIRAGEAnswer is MIRAGE's scorer on one output, reproduced exactly
// (src/evaluate.py on src/utils.py's locate_answer): the text after the
// last `"answer_choice": "` (the whole output when there is none), stripped
// of white space, is matched against locate_answer's patterns in order and
// the first match's letter is the answer; when none matches the answer is
// "A", silently. fellBack reports that fallback, which MIRAGE hides.
func MIRAGEAnswer(raw string) (choice string, fellBack bool) {
	parts := strings.Split(raw, `"answer_choice": "`)
	s := strings.TrimFunc(parts[len(parts)-1], isPySpace)
	for _, re := range mirageRules {
		if m := re.FindStringSubmatch(s); m != nil {
			return m[1], false
		}
	}
	return "A", true
}

var pySpaceRE = regexp.MustCompile(`^[` + pyWS + `]$`)

func isPySpace(r rune) bool { return pySpaceRE.MatchString(string(r)) }

// ValidParse checks a --parse value.
func ValidParse(mode string) error {
	if mode != ParseStrict && mode != ParseMIRAGE {
		return fmt.Errorf("parse mode %q: want %s or %s", mode, ParseStrict, ParseMIRAGE)
	}
	return nil
}
