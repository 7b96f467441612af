package bpe

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ragforge/ragforge/models/tokenizer/internal/postprocess"
)

// normalize applies the normalizers to s, whose first byte is at offset base
// of the original text; spans point into the original text.
func (t *Tokenizer) normalize(s string, base int) normalized {
	n := normalized{s: s, base: base}
	for _, f := range t.norms {
		n = f(n)
	}
	return n
}

// encoded is one token of an encoding: id and byte span in the original text.
type encoded struct {
	id         int
	start, end int
}

// encode runs the whole pipeline on text without the post-processor.
func (t *Tokenizer) encode(text string) []encoded {
	var out []encoded
	for _, seg := range t.rawMatch.Split(text) {
		if seg.ID >= 0 {
			out = append(out, encoded{seg.ID, seg.Start, seg.End})
			continue
		}
		n := t.normalize(text[seg.Start:seg.End], seg.Start)
		if t.normMatch == nil {
			out = t.encodeNormalized(&n, 0, len(n.s), out)
			continue
		}
		for _, sub := range t.normMatch.Split(n.s) {
			if sub.ID >= 0 {
				s, e := n.orig(sub.Start, sub.End)
				out = append(out, encoded{sub.ID, s, e})
				continue
			}
			out = t.encodeNormalized(&n, sub.Start, sub.End, out)
		}
	}
	return out
}

// encodeNormalized pre-tokenizes n.s[a:b] and appends its BPE tokens.
func (t *Tokenizer) encodeNormalized(n *normalized, a, b int, out []encoded) []encoded {
	spans := [][2]int{{a, b}}
	var next [][2]int
	for _, sp := range t.splits {
		next = next[:0]
		for _, s := range spans {
			for _, p := range sp.split(n.s[s[0]:s[1]], nil) {
				next = append(next, [2]int{s[0] + p[0], s[0] + p[1]})
			}
		}
		spans, next = next, spans
	}
	for _, s := range spans {
		word := n.s[s[0]:s[1]]
		shift := 0
		if t.prefixSpace && (len(word) == 0 || word[0] != ' ') {
			word, shift = " "+word, 1 // the added space covers no original text
		}
		for _, p := range t.m.encode(word) {
			ps, pe := s[0]+max(p.start-shift, 0), s[0]+max(p.end-shift, 0)
			// A token holding part of a character spans the whole character.
			for ps > 0 && !utf8.RuneStart(n.s[ps]) {
				ps--
			}
			for pe < len(n.s) && !utf8.RuneStart(n.s[pe]) {
				pe++
			}
			os, oe := n.orig(ps, pe)
			out = append(out, encoded{p.id, os, oe})
		}
	}
	return out
}

// Encode returns the ids of text; addSpecial runs the post-processor
// (nothing for a ByteLevel one, "<|begin_of_text|> $A" for a bos template).
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	ids, _ := t.EncodeOffsets(text, addSpecial)
	return ids
}

// EncodeOffsets returns the ids of text and, per id, its [start, end) byte
// span in text (HF return_offsets_mapping, in bytes). A token holding part
// of a multi-byte character spans that whole character; specials added by
// the post-processor span [0, 0); with ByteLevel trim_offsets, a token's
// leading and trailing spaces are left out of its span.
func (t *Tokenizer) EncodeOffsets(text string, addSpecial bool) ([]int, [][2]int) {
	enc := t.encode(text)
	ids := make([]int, len(enc))
	offs := make([][2]int, len(enc))
	for i, e := range enc {
		ids[i], offs[i] = e.id, [2]int{e.start, e.end}
		if t.post.TrimOffsets {
			offs[i] = trimSpaces(t.IDToToken(e.id), offs[i])
		}
	}
	if addSpecial {
		return t.post.Single(ids, offs)
	}
	return ids, offs
}

// trimSpaces is ByteLevel's process_offsets: a token whose text starts (ends)
// with 'Ġ' spaces has that many bytes cut from the start (end) of its span.
func trimSpaces(tok string, off [2]int) [2]int {
	lead := len(tok) - len(strings.TrimLeft(tok, "Ġ"))
	trail := len(tok) - len(strings.TrimRight(tok, "Ġ"))
	if lead == len(tok) {
		trail = 0
	}
	n := len("Ġ")
	s := min(off[0]+lead/n, off[1])
	e := max(off[1]-trail/n, s)
	return [2]int{s, e}
}

// Tokenize returns the vocabulary strings of Encode(text, false) (byte-level
// alphabet: 'Ġ' for a space).
func (t *Tokenizer) Tokenize(text string) []string {
	ids := t.Encode(text, false)
	toks := make([]string, len(ids))
	for i, id := range ids {
		toks[i] = t.IDToToken(id)
	}
	return toks
}

// WithSpecial adds the post-processor's single-sequence specials to ids.
func (t *Tokenizer) WithSpecial(ids []int) []int {
	out, _ := t.post.Single(slices.Clone(ids), nil)
	return out
}

// NumSpecial is the number of ids WithSpecial adds.
func (t *Tokenizer) NumSpecial() int { return t.post.NumSpecial() }

// EncodePair encodes a and b as the post-processor's pair template says
// (without one, a then b with type ids 0 and 1).
func (t *Tokenizer) EncodePair(a, b string) (ids, typeIDs []int) {
	return t.post.Pair(t.Encode(a, false), t.Encode(b, false))
}

// Decode is DecodeCleanUp with tokenizer_config.json's
// clean_up_tokenization_spaces.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	return t.DecodeCleanUp(ids, skipSpecial, t.cfg.CleanUp)
}

// DecodeCleanUp turns ids back into text as HF decode does: each token's
// bytes (byte-level inverse; an added token's own text), with ids of special
// added tokens dropped when skipSpecial, as one UTF-8 string in which each
// ill-formed sequence becomes U+FFFD; then transformers'
// clean_up_tokenization when cleanUp. Unknown ids are skipped.
func (t *Tokenizer) DecodeCleanUp(ids []int, skipSpecial, cleanUp bool) string {
	var b []byte
	for _, id := range ids {
		if i, ok := t.addedByID[id]; ok {
			if skipSpecial && t.added[i].Special {
				continue
			}
			b = appendTokenBytes(b, t.added[i].Content)
			continue
		}
		if id >= 0 && id < len(t.m.tokens) {
			b = appendTokenBytes(b, t.m.tokens[id])
		}
	}
	s := lossyUTF8(b)
	if cleanUp {
		s = postprocess.CleanUp(s)
	}
	return s
}

// TokenToID returns the id of an added token or vocabulary entry.
func (t *Tokenizer) TokenToID(tok string) (int, bool) {
	if id, ok := t.addedIDs[tok]; ok {
		return id, true
	}
	id, ok := t.m.vocab[tok]
	return id, ok
}

// IDToToken returns the added token or vocabulary entry of id, "" if none.
func (t *Tokenizer) IDToToken(id int) string {
	if i, ok := t.addedByID[id]; ok {
		return t.added[i].Content
	}
	if id >= 0 && id < len(t.m.tokens) {
		return t.m.tokens[id]
	}
	return ""
}

// Len is len(hf_tokenizer): the vocabulary plus added tokens outside it.
func (t *Tokenizer) Len() int {
	n := len(t.m.vocab)
	for _, a := range t.added {
		if _, in := t.m.vocab[a.Content]; !in || t.m.vocab[a.Content] != a.ID {
			n++
		}
	}
	return n
}

func (t *Tokenizer) specialID(tok string) int {
	if tok == "" {
		return -1
	}
	id, _ := t.TokenToID(tok)
	return id
}

// PadID is pad_token's id, -1 when tokenizer_config.json names none (Llama 3).
func (t *Tokenizer) PadID() int { return t.specialID(t.cfg.PadToken) }

// EOSID is eos_token's id, -1 when none.
func (t *Tokenizer) EOSID() int { return t.specialID(t.cfg.EOSToken) }

// BOSID is bos_token's id, -1 when none (Qwen).
func (t *Tokenizer) BOSID() int { return t.specialID(t.cfg.BOSToken) }
