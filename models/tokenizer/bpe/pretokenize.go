package bpe

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// whitespace is the White_Space property (HF tokenizers' `\s` through
// Oniguruma/Rust regex, Unicode-aware; Go's `\s` is ASCII only, which would
// treat NBSP as a symbol).
const whitespace = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

// gpt2Pattern is the pattern of the ByteLevel pre-tokenizer with use_regex
// true (HF tokenizers byte_level.rs, from OpenAI GPT-2's encoder.py).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// lookahead is the one look-around construct the byte-level patterns use.
// "\s+(?!\S)" is a whitespace run not followed by a non-space: when the run
// is followed by a non-space, backtracking gives back its last character
// (so " the" keeps its space); at the end of the text it takes the run.
const lookahead = `\s+(?!\S)`

// splitter is a Split pre-tokenizer with behaviour Isolated: the pattern's
// matches and the gaps between them become the pre-tokens.
type splitter struct {
	re *regexp.Regexp
	// ws is the submatch index of the emulated `\s+(?!\S)|\s+` alternative, -1 if absent.
	ws int
}

// compileSplit translates an HF (Oniguruma) pattern into Go RE2 syntax:
// `\s`/`\S` become explicit White_Space classes, and the alternative
// `\s+(?!\S)` (only allowed directly before an alternative `\s+`, as in every
// GPT-2/Llama-3/Qwen pattern) becomes a marked `\s+` group whose match
// gives back its last character when a non-space follows. Any other
// look-around is refused by name.
func compileSplit(pattern string) (*splitter, error) {
	const mark = "\x00WS\x00"
	p := pattern
	if strings.Contains(p, lookahead) {
		if !strings.Contains(p, lookahead+`|\s+`) {
			return nil, fmt.Errorf("pattern %q: %q is only supported as the alternative before `\\s+`", pattern, lookahead)
		}
		p = strings.Replace(p, lookahead+`|\s+`, mark, 1)
	}
	for _, la := range []string{"(?=", "(?!", "(?<=", "(?<!", "(?>"} {
		if strings.Contains(p, la) {
			return nil, fmt.Errorf("pattern %q: look-around %q is not supported (Go RE2 syntax; only %q is emulated)", pattern, la+"…)", lookahead)
		}
	}
	var sb strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			i++
			switch e := p[i]; {
			case e == 's' && inClass:
				sb.WriteString(whitespace)
			case e == 's':
				sb.WriteString("[" + whitespace + "]")
			case e == 'S' && !inClass:
				sb.WriteString("[^" + whitespace + "]")
			case e == 'S':
				return nil, fmt.Errorf("pattern %q: `\\S` inside a character class is not supported", pattern)
			default:
				sb.WriteByte('\\')
				sb.WriteByte(e)
			}
		case c == '[' && !inClass:
			inClass = true
			sb.WriteByte(c)
			if i+1 < len(p) && p[i+1] == '^' {
				sb.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' { // a literal ']' first in the class
				sb.WriteByte(']')
				i++
			}
		case c == ']' && inClass:
			inClass = false
			sb.WriteByte(c)
		default:
			sb.WriteByte(c)
		}
	}
	goPat := strings.Replace(sb.String(), mark, "(?P<ws_lookahead>["+whitespace+"]+)", 1)
	re, err := regexp.Compile(goPat)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	return &splitter{re: re, ws: re.SubexpIndex("ws_lookahead")}, nil
}

// split appends to dst the [start, end) byte spans of s's pre-tokens:
// matches and the gaps between them (empty matches are skipped, as HF does).
func (sp *splitter) split(s string, dst [][2]int) [][2]int {
	gap, pos := 0, 0
	for pos < len(s) {
		loc := sp.re.FindStringSubmatchIndex(s[pos:])
		if loc == nil {
			break
		}
		ms, me := pos+loc[0], pos+loc[1]
		if me == ms {
			_, n := utf8.DecodeRuneInString(s[ms:])
			pos = ms + n
			continue
		}
		if sp.ws >= 0 && loc[2*sp.ws] >= 0 && me < len(s) {
			// The run is followed by a non-space (\s+ is greedy): `\s+(?!\S)`
			// matches all but its last character, if it has two or more.
			if _, n := utf8.DecodeLastRuneInString(s[ms:me]); me-n > ms {
				me -= n
			}
		}
		if ms > gap {
			dst = append(dst, [2]int{gap, ms})
		}
		dst = append(dst, [2]int{ms, me})
		gap, pos = me, me
	}
	if gap < len(s) {
		dst = append(dst, [2]int{gap, len(s)})
	}
	return dst
}
