package tokenizer

import (
	"fmt"
	"slices"
)

// Padding strategies of EncodeOptions.Padding (HF padding=...).
const (
	PadNone      = ""
	PadLongest   = "longest"
	PadMaxLength = "max_length"
)

// EncodeOptions mirrors the HF fast-tokenizer call options.
type EncodeOptions struct {
	MaxLength int // tokens, specials included; 0 = no limit
	// Stride is the number of content tokens shared by consecutive overflow
	// windows (HF stride); it must be < MaxLength - number of specials.
	Stride            int
	Truncation        bool // cut to MaxLength (HF truncation=True, longest_first for one text)
	ReturnOverflowing bool // keep the cut-off tokens as extra windows (HF return_overflowing_tokens)
	PadToMultiple     int  // round the padded length up to a multiple (HF pad_to_multiple_of); 0 = off
	Padding           string
}

// Encoding is one row of a batch: ids, attention mask (1 = token, 0 = pad) and
// token type ids, all of the same length; OverflowOf is the index of the
// source text (HF overflow_to_sample_mapping).
type Encoding struct {
	IDs, AttentionMask, TypeIDs []int
	OverflowOf                  int
}

// Validate checks the options for a tokenizer adding numSpecial special tokens
// to each sequence (1 for T5, 2 for BERT).
func (o EncodeOptions) Validate(numSpecial int) error {
	switch {
	case o.MaxLength < 0:
		return fmt.Errorf("encode options: field %q: %d < 0", "MaxLength", o.MaxLength)
	case o.Stride < 0:
		return fmt.Errorf("encode options: field %q: %d < 0", "Stride", o.Stride)
	case o.PadToMultiple < 0:
		return fmt.Errorf("encode options: field %q: %d < 0", "PadToMultiple", o.PadToMultiple)
	case o.Padding != PadNone && o.Padding != PadLongest && o.Padding != PadMaxLength:
		return fmt.Errorf("encode options: field %q: %q, want \"\", %q or %q", "Padding", o.Padding, PadLongest, PadMaxLength)
	case o.Padding == PadMaxLength && o.MaxLength == 0:
		return fmt.Errorf("encode options: field %q: %q needs MaxLength > 0", "Padding", o.Padding)
	}
	if o.Truncation && o.MaxLength > 0 {
		content := o.MaxLength - numSpecial
		if content <= 0 {
			return fmt.Errorf("encode options: field %q: %d leaves no room after %d special tokens", "MaxLength", o.MaxLength, numSpecial)
		}
		if o.ReturnOverflowing && o.Stride >= content {
			return fmt.Errorf("encode options: field %q: %d must be < %d (MaxLength %d - %d special tokens)", "Stride", o.Stride, content, o.MaxLength, numSpecial)
		}
	}
	return nil
}

// EncodeBatch is EncodeBatchErr that returns nil when the options are invalid
// (see EncodeOptions.Validate, or call EncodeBatchErr for the reason).
func EncodeBatch(t Tokenizer, texts []string, opt EncodeOptions) []Encoding {
	enc, err := EncodeBatchErr(t, texts, opt)
	if err != nil {
		return nil
	}
	return enc
}

// EncodeBatchErr encodes texts with specials, HF fast-tokenizer semantics:
//   - with Truncation and MaxLength > 0, a text longer than MaxLength is cut
//     to MaxLength - numSpecial content tokens before the specials are added;
//   - with ReturnOverflowing too, the rest becomes further windows: window j
//     covers content[j*(L-Stride) : j*(L-Stride)+L], L = MaxLength - numSpecial,
//     until a window reaches the end; consecutive windows share Stride tokens;
//   - Padding "longest" pads every row to the longest row, "max_length" to
//     MaxLength, both rounded up to PadToMultiple; pads are PadID with mask 0
//     and type id 0 on the right.
//
// Rows are in text order, windows of one text consecutive. Truncation needs a
// tokenizer implementing SpecialWrapper.
func EncodeBatchErr(t Tokenizer, texts []string, opt EncodeOptions) ([]Encoding, error) {
	wrap, _ := t.(SpecialWrapper)
	numSpecial := len(t.Encode("", true))
	if wrap != nil {
		numSpecial = len(wrap.WithSpecial(nil))
	}
	if err := opt.Validate(numSpecial); err != nil {
		return nil, err
	}
	if opt.Padding != PadNone && t.PadID() < 0 {
		// As HF: Llama 3 names no pad_token; the caller must choose one.
		return nil, fmt.Errorf("encode options: field %q: %q asked, but the tokenizer has no pad token (pad_token in tokenizer_config.json)", "Padding", opt.Padding)
	}
	truncate := opt.Truncation && opt.MaxLength > 0
	if truncate && wrap == nil {
		return nil, fmt.Errorf("encode batch: truncation: %w", errNotWrapper)
	}
	var out []Encoding
	for i, text := range texts {
		if !truncate {
			out = append(out, newEncoding(t.Encode(text, true), i))
			continue
		}
		content := t.Encode(text, false)
		l := opt.MaxLength - numSpecial
		if len(content) <= l {
			out = append(out, newEncoding(wrap.WithSpecial(content), i))
			continue
		}
		if !opt.ReturnOverflowing {
			out = append(out, newEncoding(wrap.WithSpecial(content[:l]), i))
			continue
		}
		for start := 0; ; start += l - opt.Stride {
			stop := min(start+l, len(content))
			out = append(out, newEncoding(wrap.WithSpecial(content[start:stop]), i))
			if stop == len(content) {
				break
			}
		}
	}
	target := 0
	switch opt.Padding {
	case PadLongest:
		for _, e := range out {
			target = max(target, len(e.IDs))
		}
	case PadMaxLength:
		target = opt.MaxLength
	}
	if opt.Padding != PadNone && opt.PadToMultiple > 0 && target%opt.PadToMultiple != 0 {
		target += opt.PadToMultiple - target%opt.PadToMultiple
	}
	for k := range out {
		for len(out[k].IDs) < target {
			out[k].IDs = append(out[k].IDs, t.PadID())
			out[k].AttentionMask = append(out[k].AttentionMask, 0)
			out[k].TypeIDs = append(out[k].TypeIDs, 0)
		}
	}
	return out, nil
}

func newEncoding(ids []int, src int) Encoding {
	mask := make([]int, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	return Encoding{IDs: slices.Clone(ids), AttentionMask: mask, TypeIDs: make([]int, len(ids)), OverflowOf: src}
}
