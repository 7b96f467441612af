// Package postprocess holds the parts of an HF tokenizers pipeline that act
// after the model: the post-processor that adds special tokens around one or
// two encoded sequences (TemplateProcessing, RobertaProcessing,
// BertProcessing, ByteLevel, Sequence, as tokenizer.json declares them), and
// transformers' clean_up_tokenization on decoded text.
package postprocess

import (
	"encoding/json"
	"fmt"
	"strings"
)

// item is one entry of a template: a special token's ids or a sequence slot.
type item struct {
	seq    byte // 'A' or 'B' for a sequence slot, 0 for special ids
	ids    []int
	typeID int
}

// Processor adds special tokens as a tokenizer.json post_processor does.
// The zero Processor (post_processor null, or ByteLevel alone) adds nothing.
type Processor struct {
	single, pair []item
	// TrimOffsets is ByteLevel's trim_offsets: token offsets exclude the
	// leading and trailing spaces a token's text holds.
	TrimOffsets bool
}

// Parse reads a post_processor node. tokenID resolves the special tokens
// RobertaProcessing and BertProcessing name. Unknown types are refused by
// name.
func Parse(raw json.RawMessage, tokenID func(string) (int, bool)) (*Processor, error) {
	p := &Processor{}
	if len(raw) == 0 || string(raw) == "null" {
		return p, nil
	}
	if err := p.parse(raw, tokenID); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	return p, nil
}

func (p *Processor) parse(raw json.RawMessage, tokenID func(string) (int, bool)) error {
	var n struct {
		Type        string            `json:"type"`
		Processors  []json.RawMessage `json:"processors"`
		TrimOffsets bool              `json:"trim_offsets"`
		Single      []json.RawMessage `json:"single"`
		Pair        []json.RawMessage `json:"pair"`
		Special     map[string]struct {
			ID  string `json:"id"`
			IDs []int  `json:"ids"`
		} `json:"special_tokens"`
		Sep [2]json.RawMessage `json:"sep"`
		Cls [2]json.RawMessage `json:"cls"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return err
	}
	switch n.Type {
	case "Sequence":
		for i, c := range n.Processors {
			if err := p.parse(c, tokenID); err != nil {
				return fmt.Errorf("processors[%d]: %w", i, err)
			}
		}
		return nil
	case "ByteLevel":
		p.TrimOffsets = n.TrimOffsets
		return nil
	case "TemplateProcessing":
		var err error
		if p.single, err = template(n.Single, n.Special); err != nil {
			return fmt.Errorf("TemplateProcessing single: %w", err)
		}
		if p.pair, err = template(n.Pair, n.Special); err != nil {
			return fmt.Errorf("TemplateProcessing pair: %w", err)
		}
		return nil
	case "RobertaProcessing", "BertProcessing":
		var cls, sep string
		if err := json.Unmarshal(n.Cls[0], &cls); err != nil {
			return fmt.Errorf("%s cls: %w", n.Type, err)
		}
		if err := json.Unmarshal(n.Sep[0], &sep); err != nil {
			return fmt.Errorf("%s sep: %w", n.Type, err)
		}
		c, ok := tokenID(cls)
		if !ok {
			return fmt.Errorf("%s: cls token %q not in the vocabulary", n.Type, cls)
		}
		s, ok := tokenID(sep)
		if !ok {
			return fmt.Errorf("%s: sep token %q not in the vocabulary", n.Type, sep)
		}
		p.single = []item{{ids: []int{c}}, {seq: 'A'}, {ids: []int{s}}}
		if n.Type == "RobertaProcessing" {
			// <s> A </s></s> B </s>, type ids all 0 (RoBERTa has one type).
			p.pair = []item{{ids: []int{c}}, {seq: 'A'}, {ids: []int{s}}, {ids: []int{s}}, {seq: 'B'}, {ids: []int{s}}}
		} else {
			p.pair = []item{{ids: []int{c}}, {seq: 'A'}, {ids: []int{s}}, {seq: 'B', typeID: 1}, {ids: []int{s}, typeID: 1}}
		}
		return nil
	}
	return fmt.Errorf("type %q not supported (TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence)", n.Type)
}

func template(raw []json.RawMessage, special map[string]struct {
	ID  string `json:"id"`
	IDs []int  `json:"ids"`
}) ([]item, error) {
	var out []item
	for i, r := range raw {
		var e struct {
			Sequence *struct {
				ID     string `json:"id"`
				TypeID int    `json:"type_id"`
			}
			SpecialToken *struct {
				ID     string `json:"id"`
				TypeID int    `json:"type_id"`
			}
		}
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		switch {
		case e.Sequence != nil && (e.Sequence.ID == "A" || e.Sequence.ID == "B"):
			out = append(out, item{seq: e.Sequence.ID[0], typeID: e.Sequence.TypeID})
		case e.SpecialToken != nil:
			s, ok := special[e.SpecialToken.ID]
			if !ok || len(s.IDs) == 0 {
				return nil, fmt.Errorf("entry %d: special token %q missing from special_tokens", i, e.SpecialToken.ID)
			}
			out = append(out, item{ids: s.IDs, typeID: e.SpecialToken.TypeID})
		default:
			return nil, fmt.Errorf("entry %d: %s is neither Sequence A/B nor SpecialToken", i, r)
		}
	}
	return out, nil
}

// Single returns ids with the single-sequence specials and, when offsets is
// not nil, the offsets with [0, 0) for each added special.
func (p *Processor) Single(ids []int, offsets [][2]int) ([]int, [][2]int) {
	if p.single == nil {
		return ids, offsets
	}
	outIDs, _, outOff := apply(p.single, ids, nil, offsets, nil)
	return outIDs, outOff
}

// Pair returns the pair encoding of a and b and its token type ids. Without
// a pair template (ByteLevel only) the sequences are concatenated, as HF
// does, with type ids 0 then 1.
func (p *Processor) Pair(a, b []int) (ids, typeIDs []int) {
	if p.pair == nil {
		ids = append(append([]int{}, a...), b...)
		typeIDs = make([]int, len(ids))
		for i := len(a); i < len(ids); i++ {
			typeIDs[i] = 1
		}
		return ids, typeIDs
	}
	ids, typeIDs, _ = apply(p.pair, a, b, nil, nil)
	return ids, typeIDs
}

// NumSpecial is the number of ids Single adds (HF num_special_tokens_to_add).
func (p *Processor) NumSpecial() int {
	n := 0
	for _, it := range p.single {
		n += len(it.ids)
	}
	return n
}

func apply(tmpl []item, a, b []int, offA, offB [][2]int) (ids, typeIDs []int, offs [][2]int) {
	for _, it := range tmpl {
		var seq []int
		var off [][2]int
		switch it.seq {
		case 'A':
			seq, off = a, offA
		case 'B':
			seq, off = b, offB
		default:
			seq = it.ids
			off = make([][2]int, len(it.ids))
		}
		ids = append(ids, seq...)
		for range seq {
			typeIDs = append(typeIDs, it.typeID)
		}
		if offA != nil {
			offs = append(offs, off...)
		}
	}
	return ids, typeIDs, offs
}

// CleanUp is transformers' clean_up_tokenization: the spaces a
// word-joining decode leaves before punctuation and English contractions are
// removed, one replacement after the other in transformers' order (a later
// one sees the earlier ones' output).
func CleanUp(s string) string {
	for _, r := range cleanUp {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

var cleanUp = [][2]string{
	{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
	{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
}
