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

	"github.com/ragforge/ragforge/models/tokenizer/internal/addedtokens"
)

// XLMRFile is the SentencePiece model file of an HF XLM-RoBERTa directory.
const XLMRFile = "sentencepiece.bpe.model"

// XLM-R's fairseq ids (HF XLMRobertaTokenizer.fairseq_tokens_to_ids): they
// replace the first SentencePiece ids, and every piece id moves up by
// xlmrOffset.
const (
	xlmrBOS    = 0 // <s>, also cls_token
	xlmrPad    = 1 // <pad>
	xlmrEOS    = 2 // </s>, also sep_token
	xlmrUnk    = 3 // <unk>
	xlmrOffset = 1 // fairseq_offset
)

var xlmrSpecial = []string{"<s>", "<pad>", "</s>", "<unk>"}

// XLMR is a SentencePiece model with HF XLMRobertaTokenizer's (slow) ids and
// framing, as bge-m3 and multilingual-e5 use it:
//   - <s>=0, <pad>=1, </s>=2, <unk>=3; SentencePiece piece i has id i+1
//     (fairseq_offset), and the model's unknown piece maps to <unk>;
//   - <mask> = pieces + 1, so Len() = pieces + 2 (250002 for XLM-R) before
//     added tokens, which follow;
//   - Encode wraps <s> … </s> when addSpecial; a pair is
//     <s> a </s></s> b </s> with all-zero type ids;
//   - special and added tokens are split out of the text literally first.
//
// An XLMR is not safe for concurrent use while AddTokens runs.
type XLMR struct {
	sp             *Model
	added          []AddedToken
	addedID        map[string]int
	ModelMaxLength int // written to tokenizer_config.json; default 512
}

// NewXLMR wraps m with XLM-R's fairseq ids.
func NewXLMR(m *Model) *XLMR { return &XLMR{sp: m, addedID: map[string]int{}, ModelMaxLength: 512} }

// SentencePiece returns the underlying model.
func (t *XLMR) SentencePiece() *Model { return t.sp }

func (t *XLMR) maskID() int { return t.sp.Size() + xlmrOffset }

// Len is len(hf_tokenizer): pieces + fairseq offset + <mask> + added tokens.
func (t *XLMR) Len() int { return t.sp.Size() + xlmrOffset + 1 + len(t.added) }

// PadID is <pad> (1); EOSID is </s> (2).
func (t *XLMR) PadID() int { return xlmrPad }
func (t *XLMR) EOSID() int { return xlmrEOS }

// TokenToID returns the id of a fairseq special, <mask>, an added token or a piece.
func (t *XLMR) TokenToID(tok string) (int, bool) {
	if i := slices.Index(xlmrSpecial, tok); i >= 0 {
		return i, true
	}
	if tok == "<mask>" {
		return t.maskID(), true
	}
	if id, ok := t.addedID[tok]; ok {
		return id, true
	}
	id, ok := t.sp.PieceToID(tok)
	if !ok || id == t.sp.UnkID() {
		return xlmrUnk, false
	}
	return id + xlmrOffset, true
}

// IDToToken is the inverse of TokenToID; "" for an id out of range.
func (t *XLMR) IDToToken(id int) string {
	switch {
	case id < 0 || id >= t.Len():
		return ""
	case id < len(xlmrSpecial):
		return xlmrSpecial[id]
	case id == t.maskID():
		return "<mask>"
	case id > t.maskID():
		return t.added[id-t.maskID()-1].Content
	}
	return t.sp.IDToPiece(id - xlmrOffset)
}

// AddTokens adds non-special tokens (HF add_tokens) and returns their ids.
func (t *XLMR) AddTokens(toks []string) []int { return t.addTokens(toks, false) }

func (t *XLMR) addTokens(toks []string, special bool) []int {
	ids := make([]int, len(toks))
	for i, tok := range toks {
		if id, ok := t.TokenToID(tok); ok {
			ids[i] = id
			continue
		}
		ids[i] = t.Len()
		t.added = append(t.added, AddedToken{Content: tok, Special: special})
		t.addedID[tok] = ids[i]
	}
	return ids
}

// isSpecialID reports HF's all_special_ids: <s>, <pad>, </s>, <unk>, <mask>
// and added special tokens.
func (t *XLMR) isSpecialID(id int) bool {
	switch {
	case id < len(xlmrSpecial) || id == t.maskID():
		return true
	case id > t.maskID() && id < t.Len():
		return t.added[id-t.maskID()-1].Special
	}
	return false
}

// matchLiteral returns the byte length and id of the longest special or
// added token prefixing s, or 0, -1.
func (t *XLMR) matchLiteral(s string) (int, int) {
	best, bestID := 0, -1
	try := func(tok string, id int) {
		if len(tok) > best && strings.HasPrefix(s, tok) {
			best, bestID = len(tok), id
		}
	}
	for _, a := range t.added {
		try(a.Content, t.addedID[a.Content])
	}
	if s[0] == '<' {
		for id, tok := range xlmrSpecial {
			try(tok, id)
		}
		try("<mask>", t.maskID())
	}
	return best, bestID
}

// pieceIDs encodes a chunk with SentencePiece and shifts the ids (HF
// _convert_token_to_id: spm_id + offset, the unknown piece → <unk>).
func (t *XLMR) pieceIDs(text string) []int {
	ids := t.sp.EncodeIDs(text)
	for i, id := range ids {
		if id == t.sp.UnkID() || id == 0 {
			ids[i] = xlmrUnk
		} else {
			ids[i] = id + xlmrOffset
		}
	}
	return ids
}

// Encode returns the ids of text, <s> … </s> when addSpecial.
func (t *XLMR) Encode(text string, addSpecial bool) []int {
	var ids []int
	start := 0
	for i := 0; i < len(text); i++ {
		n, id := t.matchLiteral(text[i:])
		if n == 0 {
			continue
		}
		if i > start {
			ids = append(ids, t.pieceIDs(text[start:i])...)
		}
		ids = append(ids, id)
		i += n - 1
		start = i + 1
	}
	if start < len(text) {
		ids = append(ids, t.pieceIDs(text[start:])...)
	}
	if addSpecial {
		ids = t.WithSpecial(ids)
	}
	return ids
}

// WithSpecial returns <s> ids </s> (HF build_inputs_with_special_tokens).
func (t *XLMR) WithSpecial(ids []int) []int {
	return append(append([]int{xlmrBOS}, ids...), xlmrEOS)
}

// EncodePair returns <s> a </s></s> b </s> and all-zero type ids (XLM-R has
// one token type).
func (t *XLMR) EncodePair(a, b string) (ids, typeIDs []int) {
	ids = append(t.Encode(a, true), append([]int{xlmrEOS}, t.Encode(b, false)...)...)
	ids = append(ids, xlmrEOS)
	return ids, make([]int, len(ids))
}

// Decode joins runs of pieces (Model.Decode) and literal special/added
// tokens with one space; skipSpecial drops HF's all_special_ids.
func (t *XLMR) Decode(ids []int, skipSpecial bool) string {
	var parts []string
	var run []int
	flush := func() {
		if len(run) > 0 {
			parts = append(parts, t.sp.Decode(run))
			run = run[:0]
		}
	}
	for _, id := range ids {
		if id < 0 || id >= t.Len() || (skipSpecial && t.isSpecialID(id)) {
			continue
		}
		if id >= len(xlmrSpecial) && id < t.maskID() && !t.sp.IsControl(id-xlmrOffset) {
			run = append(run, id-xlmrOffset)
			continue
		}
		flush()
		parts = append(parts, t.IDToToken(id))
	}
	flush()
	return strings.Join(parts, " ")
}

// Save writes HF XLMRobertaTokenizer's files: sentencepiece.bpe.model,
// special_tokens_map.json, tokenizer_config.json (added_tokens_decoder with
// the fairseq specials, <mask> and added tokens) and added_tokens.json.
func (t *XLMR) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save xlm-roberta tokenizer: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, XLMRFile), t.sp.Bytes(), 0o644); err != nil {
		return fmt.Errorf("save xlm-roberta tokenizer: %w", err)
	}
	decoder := map[string]addedtokens.Entry{}
	for id, tok := range xlmrSpecial {
		decoder[strconv.Itoa(id)] = addedtokens.Entry{Content: tok, Special: true}
	}
	decoder[strconv.Itoa(t.maskID())] = addedtokens.Entry{Content: "<mask>", LStrip: true, Special: true}
	addedVocab := map[string]int{}
	var additional []string
	for i, a := range t.added {
		id := t.maskID() + 1 + i
		decoder[strconv.Itoa(id)] = addedtokens.Entry{Content: a.Content, Normalized: !a.Special, Special: a.Special}
		addedVocab[a.Content] = id
		if a.Special {
			additional = append(additional, a.Content)
		}
	}
	special := map[string]any{
		"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "sep_token": "</s>",
		"pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>",
	}
	if additional != nil {
		special["additional_special_tokens"] = additional
	}
	config := map[string]any{
		"tokenizer_class":              "XLMRobertaTokenizer",
		"model_max_length":             t.ModelMaxLength,
		"clean_up_tokenization_spaces": true,
		"sp_model_kwargs":              map[string]any{},
		"added_tokens_decoder":         decoder,
	}
	for k, v := range special {
		config[k] = v
	}
	for _, f := range []struct {
		name string
		v    any
	}{{"special_tokens_map.json", special}, {addedtokens.ConfigFile, config}, {addedtokens.VocabFile, addedVocab}} {
		buf, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return fmt.Errorf("save xlm-roberta tokenizer: %s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), append(buf, '\n'), 0o644); err != nil {
			return fmt.Errorf("save xlm-roberta tokenizer: %w", err)
		}
	}
	return nil
}

// LoadXLMR reads an HF XLMRobertaTokenizer directory: sentencepiece.bpe.model
// and, when present, tokenizer_config.json (model_max_length,
// added_tokens_decoder) or added_tokens.json; added tokens must have
// contiguous ids after <mask>.
func LoadXLMR(dir string) (*XLMR, error) {
	m, err := Load(filepath.Join(dir, XLMRFile))
	if err != nil {
		return nil, err
	}
	t := NewXLMR(m)
	cfgPath := filepath.Join(dir, addedtokens.ConfigFile)
	buf, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		var cfg struct {
			ModelMaxLength *float64 `json:"model_max_length"`
		}
		if err := json.Unmarshal(buf, &cfg); err != nil {
			return nil, fmt.Errorf("load %s: %w", cfgPath, err)
		}
		if cfg.ModelMaxLength != nil && *cfg.ModelMaxLength < 1e9 {
			t.ModelMaxLength = int(*cfg.ModelMaxLength)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("load xlm-roberta tokenizer: %w", err)
	}
	added, err := addedtokens.Read(dir, t.Len())
	if err != nil {
		return nil, err
	}
	for _, a := range added {
		if a.ID != t.Len() {
			return nil, fmt.Errorf("load xlm-roberta tokenizer %s: added token %q has id %d, want %d (ids must follow <mask> contiguously)", dir, a.Content, a.ID, t.Len())
		}
		t.addTokens([]string{a.Content}, a.Special)
	}
	return t, nil
}
