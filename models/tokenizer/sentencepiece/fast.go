package sentencepiece

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/ragforge/ragforge/models/tokenizer/internal/addedtokens"
	"github.com/ragforge/ragforge/models/tokenizer/internal/postprocess"
)

// Fast is a SentencePiece Unigram model inside the pipeline of an HF
// tokenizer.json other than T5's, such as XLM-R's (bge-m3, multilingual-e5):
// the added tokens (<s>, <pad>, </s>, <unk>, <mask>, …) are split out of the
// text first, each piece between them is normalized and segmented by the
// Model (its precompiled charsmap, Metaspace prefix, Viterbi), optionally
// after NFKC, and the file's post-processor (TemplateProcessing or
// RobertaProcessing: <s> $A </s>) frames the result. Not safe for use
// concurrent with AddTokens.
type Fast struct {
	sp    *Model
	nfkc  bool
	post  *postprocess.Processor
	added []addedtokens.Pattern
	byID  map[int]int
	ids   map[string]int
	match *addedtokens.Matcher
	size  int // vocabulary entries of the model node (ids below it are pieces)

	doc, cfg map[string]json.RawMessage // written back by Save
	eos, pad string
}

// NewFast wraps m, built from the Unigram model node of the tokenizer.json
// doc, with the file's added tokens and post_processor. nfkc applies NFKC
// (a normalizer node of that type) before the model's own normalization.
// cfg is tokenizer_config.json (nil when absent), read for eos_token and
// pad_token and kept for Save.
func NewFast(m *Model, nfkc bool, doc, cfg map[string]json.RawMessage) (*Fast, error) {
	f := &Fast{sp: m, nfkc: nfkc, doc: doc, cfg: cfg, size: m.Size(), eos: "</s>", pad: "<pad>"}
	var added []addedtokens.Pattern
	if raw := doc["added_tokens"]; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &added); err != nil {
			return nil, fmt.Errorf("field %q: %w", "added_tokens", err)
		}
	}
	f.setAdded(added)
	var err error
	if f.post, err = postprocess.Parse(doc["post_processor"], f.TokenToID); err != nil {
		return nil, err
	}
	for key, dst := range map[string]*string{"eos_token": &f.eos, "pad_token": &f.pad} {
		var s string
		if raw, ok := cfg[key]; ok && json.Unmarshal(raw, &s) == nil {
			*dst = s
		}
	}
	return f, nil
}

func (f *Fast) setAdded(added []addedtokens.Pattern) {
	slices.SortFunc(added, func(a, b addedtokens.Pattern) int { return a.ID - b.ID })
	f.added = added
	f.byID = make(map[int]int, len(added))
	f.ids = make(map[string]int, len(added))
	for i, a := range added {
		f.byID[a.ID], f.ids[a.Content] = i, a.ID
	}
	f.match = addedtokens.NewMatcher(added)
}

// SentencePiece returns the underlying model.
func (f *Fast) SentencePiece() *Model { return f.sp }

// Encode splits out added tokens, segments the text between them and, with
// addSpecial, applies the post-processor.
func (f *Fast) Encode(text string, addSpecial bool) []int {
	var ids []int
	for _, seg := range f.match.Split(text) {
		if seg.ID >= 0 {
			ids = append(ids, seg.ID)
			continue
		}
		s := text[seg.Start:seg.End]
		if f.nfkc {
			s = norm.NFKC.String(s)
		}
		ids = append(ids, f.sp.EncodeIDs(s)...)
	}
	if addSpecial {
		return f.WithSpecial(ids)
	}
	return ids
}

// WithSpecial frames ids as the post-processor's single template says.
func (f *Fast) WithSpecial(ids []int) []int {
	out, _ := f.post.Single(slices.Clone(ids), nil)
	return out
}

// EncodePair frames a and b as the post-processor's pair template says.
func (f *Fast) EncodePair(a, b string) (ids, typeIDs []int) {
	return f.post.Pair(f.Encode(a, false), f.Encode(b, false))
}

// Decode joins the pieces (▁ → space, the first piece's prefix dropped, as
// the Metaspace decoder does) and the added tokens' text; skipSpecial drops
// special added tokens.
func (f *Fast) Decode(ids []int, skipSpecial bool) string {
	var sb strings.Builder
	var run []int
	first := true
	flush := func() {
		if len(run) == 0 {
			return
		}
		s := f.sp.Decode(run)
		if !first && strings.HasPrefix(f.sp.IDToPiece(run[0]), spaceSymbol) && f.sp.normalizer.AddDummyPrefix {
			s = " " + s // only the first token's prefix space is dropped
		}
		sb.WriteString(s)
		first, run = false, run[:0]
	}
	for _, id := range ids {
		if i, ok := f.byID[id]; ok {
			flush()
			if skipSpecial && f.added[i].Special {
				continue
			}
			sb.WriteString(f.added[i].Content)
			first = false
			continue
		}
		if id >= 0 && id < f.size {
			run = append(run, id)
		}
	}
	flush()
	return sb.String()
}

// TokenToID returns the id of an added token or a piece.
func (f *Fast) TokenToID(tok string) (int, bool) {
	if id, ok := f.ids[tok]; ok {
		return id, true
	}
	return f.sp.PieceToID(tok)
}

// IDToToken returns the added token or piece of id, "" if none.
func (f *Fast) IDToToken(id int) string {
	if i, ok := f.byID[id]; ok {
		return f.added[i].Content
	}
	return f.sp.IDToPiece(id)
}

// Len is the model's vocabulary plus the added tokens past it.
func (f *Fast) Len() int {
	n := f.size
	for _, a := range f.added {
		if a.ID >= f.size {
			n++
		}
	}
	return n
}

// PadID and EOSID are tokenizer_config.json's pad_token and eos_token
// (<pad> and </s> without one), -1 when not in the vocabulary.
func (f *Fast) PadID() int { return f.idOr(f.pad) }
func (f *Fast) EOSID() int { return f.idOr(f.eos) }

func (f *Fast) idOr(tok string) int {
	if id, ok := f.TokenToID(tok); ok {
		return id
	}
	return -1
}

// AddTokens adds tokens (HF add_tokens: not special, normalized) at ids
// Len(), Len()+1, …; a known token keeps its id.
func (f *Fast) AddTokens(toks []string) []int {
	ids := make([]int, len(toks))
	added := slices.Clone(f.added)
	next := f.Len()
	seen := map[string]int{}
	for i, s := range toks {
		if id, ok := f.TokenToID(s); ok {
			ids[i] = id
			continue
		}
		if id, ok := seen[s]; ok {
			ids[i] = id
			continue
		}
		added = append(added, addedtokens.Pattern{ID: next, Entry: addedtokens.Entry{Content: s, Normalized: true}})
		ids[i], seen[s] = next, next
		next++
	}
	f.setAdded(added)
	return ids
}

// Save writes tokenizer.json (the file read, with the added tokens) and
// tokenizer_config.json.
func (f *Fast) Save(dir string) error {
	if err := addedtokens.SaveTokenizerJSON(dir, f.doc, f.cfg, f.added, "PreTrainedTokenizerFast"); err != nil {
		return fmt.Errorf("save unigram tokenizer %s: %w", dir, err)
	}
	return nil
}

// TokenizerJSON returns the tokenizer.json read, with the added tokens now present.
func (f *Fast) TokenizerJSON() ([]byte, error) {
	return addedtokens.TokenizerJSON(f.doc, f.added)
}
