package sentencepiece

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/tokenizer/internal/addedtokens"
)

// DefaultExtraIDs is the number of T5 sentinel tokens (HF T5Tokenizer extra_ids).
const DefaultExtraIDs = 100

// AddedToken is a token appended after the sentinels by AddTokens (HF
// add_tokens) or AddSpecialTokens. It is matched in the raw text before
// SentencePiece runs.
type AddedToken struct {
	Content string
	Special bool
}

// T5 is a SentencePiece model with the HF T5Tokenizer conventions (slow
// tokenizer, legacy=True):
//   - Encode appends eos (</s>, id 1) when addSpecial; there is no bos.
//   - ExtraIDs sentinels follow the SentencePiece vocabulary in reverse:
//     id(<extra_id_k>) = Size + ExtraIDs - 1 - k.
//   - added tokens take the next ids (Len() at the time they are added);
//   - special tokens (</s>, <pad>, <unk>, sentinels) and added tokens are split
//     out of the text before segmentation; the text between them is encoded by
//     SentencePiece chunk by chunk.
//
// A T5 is not safe for concurrent use while AddTokens runs.
type T5 struct {
	sp             *Model
	extraIDs       int
	added          []AddedToken
	addedID        map[string]int
	specialPieces  []int // CONTROL and UNKNOWN piece ids, matched as literals
	ModelMaxLength int   // written to tokenizer_config.json; default 512
}

// NewT5 wraps m with extraIDs sentinels (DefaultExtraIDs for T5 / Flan-T5).
func NewT5(m *Model, extraIDs int) *T5 {
	t := &T5{sp: m, extraIDs: extraIDs, addedID: map[string]int{}, ModelMaxLength: 512}
	for id, p := range m.pieces {
		if p.Type == Control || p.Type == Unknown {
			t.specialPieces = append(t.specialPieces, id)
		}
	}
	return t
}

// SentencePiece returns the underlying model.
func (t *T5) SentencePiece() *Model { return t.sp }

// ExtraIDs returns the number of sentinels.
func (t *T5) ExtraIDs() int { return t.extraIDs }

// Added returns the added tokens in id order (first id Size()+ExtraIDs()).
func (t *T5) Added() []AddedToken { return slices.Clone(t.added) }

// sentinel parses "<extra_id_k>" and returns k when 0 <= k < extraIDs.
func (t *T5) sentinel(tok string) (int, bool) {
	if !strings.HasPrefix(tok, "<extra_id_") || !strings.HasSuffix(tok, ">") {
		return 0, false
	}
	k, err := strconv.Atoi(tok[len("<extra_id_") : len(tok)-1])
	if err != nil || k < 0 || k >= t.extraIDs || strconv.Itoa(k) != tok[len("<extra_id_"):len(tok)-1] {
		return 0, false
	}
	return k, true
}

// TokenToID returns the id of a SentencePiece piece, a sentinel or an added token.
func (t *T5) TokenToID(tok string) (int, bool) {
	if id, ok := t.addedID[tok]; ok {
		return id, true
	}
	if k, ok := t.sentinel(tok); ok {
		return t.sp.Size() + t.extraIDs - 1 - k, true
	}
	return t.sp.PieceToID(tok)
}

// IDToToken is the inverse of TokenToID; "" for an id out of range.
func (t *T5) IDToToken(id int) string {
	n := t.sp.Size()
	switch {
	case id < 0:
		return ""
	case id < n:
		return t.sp.IDToPiece(id)
	case id < n+t.extraIDs:
		return fmt.Sprintf("<extra_id_%d>", n+t.extraIDs-1-id)
	case id < t.Len():
		return t.added[id-n-t.extraIDs].Content
	}
	return ""
}

// Len is len(hf_tokenizer): pieces + sentinels + added tokens.
func (t *T5) Len() int { return t.sp.Size() + t.extraIDs + len(t.added) }

// PadID is <pad> (0 for T5); EOSID is </s> (1 for T5).
func (t *T5) PadID() int { return t.sp.PadID() }
func (t *T5) EOSID() int { return t.sp.EOSID() }

// AddTokens adds non-special tokens (HF add_tokens) and returns the id of
// each: a token already known keeps its id, a new one gets Len().
func (t *T5) AddTokens(toks []string) []int { return t.addTokens(toks, false) }

// AddSpecialTokens is AddTokens for special tokens: they are dropped by
// Decode(ids, true) and listed in additional_special_tokens on Save.
func (t *T5) AddSpecialTokens(toks []string) []int { return t.addTokens(toks, true) }

func (t *T5) addTokens(toks []string, special bool) []int {
	ids := make([]int, len(toks))
	for i, tok := range toks {
		if id, ok := t.TokenToID(tok); ok && tok != "" {
			ids[i] = id
			continue
		}
		if tok == "" {
			ids[i] = -1
			continue
		}
		id := t.Len()
		t.added = append(t.added, AddedToken{Content: tok, Special: special})
		t.addedID[tok] = id
		ids[i] = id
	}
	return ids
}

// isSpecialID reports the ids HF puts in all_special_ids: pad, eos, unk, the
// sentinels and added special tokens.
func (t *T5) isSpecialID(id int) bool {
	n := t.sp.Size()
	switch {
	case id < n:
		return t.sp.IsControl(id) || id == t.sp.UnkID()
	case id < n+t.extraIDs:
		return true
	case id < t.Len():
		return t.added[id-n-t.extraIDs].Special
	}
	return false
}

// matchSpecial returns the byte length and id of the longest literal token
// that prefixes s (control pieces, <unk>, sentinels, added tokens), or 0, -1.
func (t *T5) matchSpecial(s string) (int, int) {
	best, bestID := 0, -1
	if s[0] != '<' && len(t.added) == 0 {
		return 0, -1
	}
	try := func(tok string, id int) {
		if len(tok) > best && strings.HasPrefix(s, tok) {
			best, bestID = len(tok), id
		}
	}
	for _, tok := range t.added {
		try(tok.Content, t.addedID[tok.Content])
	}
	if s[0] == '<' {
		for _, id := range t.specialPieces {
			try(t.sp.pieces[id].Piece, id)
		}
		if strings.HasPrefix(s, "<extra_id_") {
			if end := strings.IndexByte(s, '>'); end > 0 {
				if k, ok := t.sentinel(s[:end+1]); ok {
					try(s[:end+1], t.sp.Size()+t.extraIDs-1-k)
				}
			}
		}
	}
	return best, bestID
}

// Encode returns the ids of text: special and added tokens are split out
// first, every other chunk goes through SentencePiece, and eos is appended
// when addSpecial (HF T5Tokenizer input_ids).
func (t *T5) Encode(text string, addSpecial bool) []int {
	var ids []int
	start := 0
	for i := 0; i < len(text); i++ {
		n, id := t.matchSpecial(text[i:])
		if n == 0 {
			continue
		}
		if i > start {
			ids = append(ids, t.sp.EncodeIDs(text[start:i])...)
		}
		ids = append(ids, id)
		i += n - 1
		start = i + 1
	}
	if start < len(text) {
		ids = append(ids, t.sp.EncodeIDs(text[start:])...)
	}
	if addSpecial {
		ids = t.WithSpecial(ids)
	}
	return ids
}

// WithSpecial returns ids followed by eos (HF build_inputs_with_special_tokens).
func (t *T5) WithSpecial(ids []int) []int {
	return append(slices.Clone(ids), t.EOSID())
}

// EncodePair returns a </s> b </s> (HF build_inputs_with_special_tokens for a
// pair) and all-zero type ids (T5 has no token types).
func (t *T5) EncodePair(a, b string) (ids, typeIDs []int) {
	ids = append(t.Encode(a, true), t.Encode(b, true)...)
	return ids, make([]int, len(ids))
}

// Decode follows HF T5Tokenizer.decode without clean_up_tokenization_spaces:
// runs of SentencePiece ids are decoded by Model.Decode (an unknown id gives
// " ⁇ "), sentinels, control pieces and added tokens are written literally,
// and the parts are joined by one space (spaces_between_special_tokens). With
// skipSpecial, pad, eos, unk, sentinels and added special tokens are dropped.
func (t *T5) Decode(ids []int, skipSpecial bool) string {
	var parts []string
	var run []int
	flush := func() {
		if len(run) > 0 {
			parts = append(parts, t.sp.Decode(run))
			run = run[:0]
		}
	}
	for _, id := range ids {
		if id < 0 || id >= t.Len() {
			continue
		}
		if skipSpecial && t.isSpecialID(id) {
			continue
		}
		if id < t.sp.Size() && !t.sp.IsControl(id) {
			run = append(run, id)
			continue
		}
		flush()
		parts = append(parts, t.IDToToken(id))
	}
	flush()
	return strings.Join(parts, " ")
}

// Save writes the HF T5Tokenizer files to dir (created if needed):
// spiece.model, special_tokens_map.json, tokenizer_config.json
// (added_tokens_decoder, additional_special_tokens, extra_ids),
// added_tokens.json (every token with id >= the SentencePiece size) and the
// fast tokenizer's tokenizer.json (TokenizerJSON).
func (t *T5) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save t5 tokenizer: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, "spiece.model"), t.sp.Bytes(), 0o644); err != nil {
		return fmt.Errorf("save t5 tokenizer: %w", err)
	}
	n := t.sp.Size()
	decoder := map[string]addedtokens.Entry{}
	addedVocab := map[string]int{}
	var additional []string
	for id, p := range t.sp.pieces {
		if p.Type == Control || p.Type == Unknown {
			decoder[strconv.Itoa(id)] = addedtokens.Entry{Content: p.Piece, Special: true}
		}
	}
	for k := 0; k < t.extraIDs; k++ {
		tok := fmt.Sprintf("<extra_id_%d>", k)
		id := n + t.extraIDs - 1 - k
		decoder[strconv.Itoa(id)] = addedtokens.Entry{Content: tok, LStrip: true, RStrip: true, Special: true}
		addedVocab[tok] = id
		additional = append(additional, tok)
	}
	for i, a := range t.added {
		id := n + t.extraIDs + i
		decoder[strconv.Itoa(id)] = addedtokens.Entry{Content: a.Content, Normalized: !a.Special, Special: a.Special}
		addedVocab[a.Content] = id
		if a.Special {
			additional = append(additional, a.Content)
		}
	}
	special := map[string]any{"additional_special_tokens": additional}
	for _, s := range []struct {
		key string
		id  int
	}{{"eos_token", t.sp.EOSID()}, {"pad_token", t.sp.PadID()}, {"unk_token", t.sp.UnkID()}} {
		if s.id >= 0 && s.id < n {
			special[s.key] = t.sp.IDToPiece(s.id)
		}
	}
	config := map[string]any{
		"tokenizer_class":              "T5Tokenizer",
		"extra_ids":                    t.extraIDs,
		"legacy":                       true,
		"model_max_length":             t.ModelMaxLength,
		"clean_up_tokenization_spaces": false,
		"sp_model_kwargs":              map[string]any{},
		"added_tokens_decoder":         decoder,
	}
	for k, v := range special {
		config[k] = v
	}
	files := []struct {
		name string
		v    any
	}{{"special_tokens_map.json", special}, {"tokenizer_config.json", config}, {"added_tokens.json", addedVocab}}
	for _, f := range files {
		buf, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return fmt.Errorf("save t5 tokenizer: %s: %w", f.name, err)
		}
		if err := atomicfile.WriteBytes(filepath.Join(dir, f.name), append(buf, '\n'), 0o644); err != nil {
			return fmt.Errorf("save t5 tokenizer: %w", err)
		}
	}
	tj, err := t.TokenizerJSON()
	if err != nil {
		return fmt.Errorf("save t5 tokenizer: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, TokenizerJSONFile), tj, 0o644); err != nil {
		return fmt.Errorf("save t5 tokenizer: %w", err)
	}
	return nil
}

// LoadT5 reads an HF T5Tokenizer directory: spiece.model, and when present
// tokenizer_config.json (extra_ids, default 100; added_tokens_decoder;
// additional_special_tokens) or else added_tokens.json. Added tokens must
// have contiguous ids starting after the sentinels.
func LoadT5(dir string) (*T5, error) {
	m, err := Load(filepath.Join(dir, "spiece.model"))
	if err != nil {
		return nil, err
	}
	t := NewT5(m, DefaultExtraIDs)
	cfgPath := filepath.Join(dir, addedtokens.ConfigFile)
	buf, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		var cfg struct {
			ExtraIDs        *int              `json:"extra_ids"`
			ModelMaxLength  *float64          `json:"model_max_length"`
			AdditionalSpecs []json.RawMessage `json:"additional_special_tokens"`
		}
		if err := json.Unmarshal(buf, &cfg); err != nil {
			return nil, fmt.Errorf("load %s: %w", cfgPath, err)
		}
		if cfg.ExtraIDs != nil {
			t.extraIDs = *cfg.ExtraIDs
		}
		if cfg.ModelMaxLength != nil && *cfg.ModelMaxLength < 1e9 {
			t.ModelMaxLength = int(*cfg.ModelMaxLength)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("load t5 tokenizer: %w", err)
	}
	added, err := addedtokens.Read(dir, t.Len())
	if err != nil {
		return nil, err
	}
	for _, a := range added {
		if a.ID != t.Len() { // Read checked base+i; differs when an earlier content was already known (addTokens kept its id)
			return nil, fmt.Errorf("load t5 tokenizer %s: added token %q has id %d, want %d (ids must follow the sentinels contiguously)", dir, a.Content, a.ID, t.Len())
		}
		t.addTokens([]string{a.Content}, a.Special)
	}
	return t, nil
}
