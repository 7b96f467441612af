package sentencepiece

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// spaceSymbol is U+2581 LOWER ONE EIGHTH BLOCK, sentencepiece's escaped space.
const spaceSymbol = "\u2581"

// charsmap is a decoded precompiled charsmap: a Darts-clone double-array trie
// over UTF-8 byte sequences whose values are offsets into a pool of
// NUL-terminated replacement strings (sentencepiece normalizer.cc,
// HF tokenizers' Precompiled normalizer).
type charsmap struct {
	units []uint32
	pool  []byte
}

// parseCharsmap splits the blob: uint32 LE trie size in bytes, the trie units
// (uint32 LE each), then the normalized-string pool.
func parseCharsmap(blob []byte) (*charsmap, error) {
	if len(blob) == 0 {
		return nil, nil
	}
	if len(blob) < 4 {
		return nil, fmt.Errorf("precompiled charsmap: %d bytes, want at least 4", len(blob))
	}
	size := int(binary.LittleEndian.Uint32(blob))
	if size%4 != 0 || 4+size > len(blob) {
		return nil, fmt.Errorf("precompiled charsmap: trie size %d invalid for blob of %d bytes", size, len(blob))
	}
	units := make([]uint32, size/4)
	for i := range units {
		units[i] = binary.LittleEndian.Uint32(blob[4+4*i:])
	}
	return &charsmap{units: units, pool: blob[4+size:]}, nil
}

// Darts-clone unit accessors.
func unitHasLeaf(u uint32) bool  { return (u>>8)&1 == 1 }
func unitValue(u uint32) uint32  { return u & (1<<31 - 1) }
func unitLabel(u uint32) uint32  { return u & (1<<31 | 0xFF) }
func unitOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }

// longest returns the length in bytes of the longest key that is a prefix of s
// and its replacement, or 0 when no key matches.
func (c *charsmap) longest(s string) (int, string) {
	if c == nil || len(c.units) == 0 {
		return 0, ""
	}
	pos := uint32(0)
	u := c.units[0]
	pos ^= unitOffset(u)
	bestLen, bestVal := 0, uint32(0)
	for i := 0; i < len(s); i++ {
		b := uint32(s[i])
		pos ^= b
		if int(pos) >= len(c.units) {
			break
		}
		u = c.units[pos]
		if unitLabel(u) != b {
			break
		}
		pos ^= unitOffset(u)
		if int(pos) >= len(c.units) {
			break
		}
		if unitHasLeaf(u) {
			bestLen, bestVal = i+1, unitValue(c.units[pos])
		}
	}
	if bestLen == 0 || int(bestVal) >= len(c.pool) {
		return 0, ""
	}
	end := int(bestVal)
	for end < len(c.pool) && c.pool[end] != 0 {
		end++
	}
	return bestLen, string(c.pool[bestVal:end])
}

// normalizePrefix returns the normalized form of the first unit of s and the
// number of bytes of s it consumes: a user-defined piece is kept as is, else
// the longest charsmap rule applies, else one UTF-8 character is copied (an
// invalid byte becomes U+FFFD and consumes one byte).
func (m *Model) normalizePrefix(s string) (string, int) {
	if n := m.userDefinedPrefix(s); n > 0 {
		return s[:n], n
	}
	if n, rep := m.charsmap.longest(s); n > 0 {
		return rep, n
	}
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n <= 1 {
		return "\uFFFD", 1
	}
	return s[:n], n
}

// Normalize applies the precompiled charsmap and sentencepiece's whitespace
// rules (remove_extra_whitespaces, add_dummy_prefix, escape_whitespaces) to
// text, as sentencepiece Normalizer::Normalize. It returns the normalized
// string and normToOrig, of length len(normalized)+1, mapping each normalized
// byte to the byte offset in text it came from (the last entry is the end of
// the consumed input).
func (m *Model) Normalize(text string) (string, []int) {
	ns := m.normalizer
	var out strings.Builder
	normToOrig := make([]int, 0, len(text)+8)
	consumed := 0
	input := text
	if ns.RemoveExtraWhitespaces {
		for len(input) > 0 {
			s, n := m.normalizePrefix(input)
			if s != " " {
				break
			}
			input = input[n:]
			consumed += n
		}
	}
	if len(input) == 0 {
		return "", []int{consumed}
	}
	space := " "
	if ns.EscapeWhitespaces {
		space = spaceSymbol
	}
	addWS := func() {
		out.WriteString(space)
		for range len(space) {
			normToOrig = append(normToOrig, consumed)
		}
	}
	if ns.AddDummyPrefix {
		addWS()
	}
	isPrevSpace := ns.RemoveExtraWhitespaces
	for len(input) > 0 {
		sp, n := m.normalizePrefix(input)
		for isPrevSpace && strings.HasPrefix(sp, " ") {
			sp = sp[1:]
		}
		if sp != "" {
			for i := 0; i < len(sp); i++ {
				if sp[i] == ' ' {
					addWS()
				} else {
					out.WriteByte(sp[i])
					normToOrig = append(normToOrig, consumed)
				}
			}
			isPrevSpace = strings.HasSuffix(sp, " ")
		}
		consumed += n
		input = input[n:]
		if !ns.RemoveExtraWhitespaces {
			isPrevSpace = false
		}
	}
	norm := out.String()
	if ns.RemoveExtraWhitespaces {
		for strings.HasSuffix(norm, space) {
			l := len(norm) - len(space)
			consumed = normToOrig[l]
			norm = norm[:l]
			normToOrig = normToOrig[:l]
		}
	}
	normToOrig = append(normToOrig, consumed)
	return norm, normToOrig
}
