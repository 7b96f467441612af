package bpe

import (
	"strings"
	"unicode/utf8"
)

// byteToRune is GPT-2's byte alphabet (HF tokenizers bytes_char, OpenAI
// bytes_to_unicode): the printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ' map to
// themselves, the other 68 bytes to U+0100, U+0101, … in byte order, so
// space is 'Ġ' (U+0120), '\n' is 'Ċ' (U+010A) and '\t' is 'ĉ' (U+0109).
var byteToRune [256]rune

// runeToByte inverts byteToRune.
var runeToByte = map[rune]byte{}

// byteString[b] is string(byteToRune[b]), precomputed for encoding.
var byteString [256]string

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
		byteString[b] = string(byteToRune[b])
	}
}

// byteLevel returns the byte-level alphabet string of s's UTF-8 bytes.
func byteLevel(s string) string {
	var sb strings.Builder
	sb.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		sb.WriteString(byteString[s[i]])
	}
	return sb.String()
}

// appendTokenBytes appends the bytes a vocabulary token stands for: the
// inverse byte alphabet, or the token's own UTF-8 when one of its runes is
// outside the alphabet (HF ByteLevel decoder).
func appendTokenBytes(dst []byte, tok string) []byte {
	start := len(dst)
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return append(dst[:start], tok...)
		}
		dst = append(dst, b)
	}
	return dst
}

// lossyUTF8 converts b to a string, replacing each maximal ill-formed
// subsequence by one U+FFFD as the WHATWG decoder does (Rust
// String::from_utf8_lossy, JS TextDecoder); Go's strings.ToValidUTF8 would
// merge adjacent bad sequences into one replacement instead.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			sb.WriteByte(b[i])
			i++
			continue
		}
		if r, n := utf8.DecodeRune(b[i:]); r != utf8.RuneError || n > 1 {
			sb.WriteString(string(b[i : i+n]))
			i += n
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += maximalSubpart(b[i:])
	}
	return sb.String()
}

// maximalSubpart is the length of the ill-formed prefix of b that one U+FFFD
// replaces: the lead byte and every continuation byte that could still have
// completed it (Unicode §3.9, "U+FFFD substitution of maximal subparts").
func maximalSubpart(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}
