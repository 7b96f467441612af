// Package wordpiece implements the HF BertTokenizer (slow): BasicTokenizer
// (clean text, CJK spacing, NFC, whitespace split, lower case and accent
// stripping, punctuation split) followed by greedy longest-match-first
// WordPiece with "##" continuations, and the [CLS] a [SEP] b [SEP] framing.
package wordpiece

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/tokenizer/internal/addedtokens"
)

// Config holds the BertTokenizer options, with HF defaults (DefaultConfig).
type Config struct {
	DoLowerCase          bool
	StripAccents         *bool // nil: follow DoLowerCase (HF strip_accents=None)
	TokenizeChineseChars bool
	DoBasicTokenize      bool
	UnkToken             string
	SepToken             string
	PadToken             string
	ClsToken             string
	MaskToken            string
	ContinuingPrefix     string // "##"
	MaxInputCharsPerWord int    // 100
	ModelMaxLength       int    // written to tokenizer_config.json; 512 default
}

// DefaultConfig returns HF BertTokenizer defaults (do_lower_case true).
func DefaultConfig() Config {
	return Config{
		DoLowerCase: true, TokenizeChineseChars: true, DoBasicTokenize: true,
		UnkToken: "[UNK]", SepToken: "[SEP]", PadToken: "[PAD]", ClsToken: "[CLS]", MaskToken: "[MASK]",
		ContinuingPrefix: "##", MaxInputCharsPerWord: 100, ModelMaxLength: 512,
	}
}

// AddedToken is a token appended after the vocabulary (HF add_tokens).
type AddedToken struct {
	Content string
	Special bool
}

// Tokenizer is a BERT WordPiece tokenizer. Not safe for concurrent use while
// AddTokens runs.
type Tokenizer struct {
	cfg     Config
	vocab   []string
	ids     map[string]int
	added   []AddedToken
	addedID map[string]int
}

// New builds a tokenizer from a vocabulary (id = index). The special tokens
// of cfg must be in vocab.
func New(vocab []string, cfg Config) (*Tokenizer, error) {
	t := &Tokenizer{cfg: cfg, vocab: vocab, ids: make(map[string]int, len(vocab)), addedID: map[string]int{}}
	for i, v := range vocab {
		if _, dup := t.ids[v]; !dup {
			t.ids[v] = i
		}
	}
	for _, s := range []struct{ field, tok string }{{"unk_token", cfg.UnkToken}, {"sep_token", cfg.SepToken}, {"pad_token", cfg.PadToken}, {"cls_token", cfg.ClsToken}} {
		if _, ok := t.ids[s.tok]; !ok {
			return nil, fmt.Errorf("wordpiece: field %q: token %q not in vocabulary", s.field, s.tok)
		}
	}
	return t, nil
}

// ReadVocab reads vocab.txt: one token per line, line number = id. A token
// that is not valid UTF-8, or that repeats an earlier line, is an error
// naming the file and line (HF's load_vocab would silently give the
// earlier id to the later line, so two ids would decode alike).
func ReadVocab(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wordpiece: %w", err)
	}
	defer f.Close()
	var vocab []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	first := map[string]int{}
	for sc.Scan() {
		tok := strings.TrimRight(sc.Text(), "\r")
		line := len(vocab) + 1
		if !utf8.ValidString(tok) {
			return nil, fmt.Errorf("load %s: line %d: token %q is not valid UTF-8", path, line, tok)
		}
		if prev, dup := first[tok]; dup {
			return nil, fmt.Errorf("load %s: line %d: token %q duplicates line %d", path, line, tok, prev)
		}
		first[tok] = line
		vocab = append(vocab, tok)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("load %s: line %d: %w", path, len(vocab)+1, err)
	}
	return vocab, nil
}

// checkSpecials refuses a vocab.txt without the special tokens BERT frames
// every sequence with ([UNK], [SEP], [PAD], [CLS], or tokenizer_config.json's
// names for them): a file cut short (bert-base-uncased lists [PAD] at line
// 1 but [UNK], [CLS], [SEP] at lines 101-103) or another model's. HF's
// BertTokenizer loads it and then fails or encodes them as [UNK] mid-run.
// Fewer lines than config.json's vocab_size alone is fine, as in HF: the
// ids beyond the file are never produced.
func checkSpecials(path string, vocab []string, cfg Config) error {
	for _, s := range []struct{ field, tok string }{{"unk_token", cfg.UnkToken}, {"sep_token", cfg.SepToken}, {"pad_token", cfg.PadToken}, {"cls_token", cfg.ClsToken}} {
		if !slices.Contains(vocab, s.tok) {
			return fmt.Errorf("load %s: %d lines and no %s %q: the file is cut short or belongs to another tokenizer; copy the model's complete vocab.txt (or name its %s in %s)",
				path, len(vocab), s.field, s.tok, s.field, addedtokens.ConfigFile)
		}
	}
	return nil
}

// hfConfig is the subset of tokenizer_config.json read and written.
type hfConfig struct {
	TokenizerClass       string                       `json:"tokenizer_class,omitempty"`
	DoLowerCase          *bool                        `json:"do_lower_case,omitempty"`
	StripAccents         *bool                        `json:"strip_accents"`
	TokenizeChineseChars *bool                        `json:"tokenize_chinese_chars,omitempty"`
	DoBasicTokenize      *bool                        `json:"do_basic_tokenize,omitempty"`
	ModelMaxLength       *float64                     `json:"model_max_length,omitempty"`
	UnkToken             *string                      `json:"unk_token,omitempty"`
	SepToken             *string                      `json:"sep_token,omitempty"`
	PadToken             *string                      `json:"pad_token,omitempty"`
	ClsToken             *string                      `json:"cls_token,omitempty"`
	MaskToken            *string                      `json:"mask_token,omitempty"`
	AddedTokensDecoder   map[string]addedtokens.Entry `json:"added_tokens_decoder,omitempty"`
}

// Load reads an HF BertTokenizer directory: vocab.txt and, when present,
// tokenizer_config.json (options and added_tokens_decoder) or else
// added_tokens.json.
func Load(dir string) (*Tokenizer, error) {
	vocab, err := ReadVocab(filepath.Join(dir, "vocab.txt"))
	if err != nil {
		return nil, err
	}
	cfg := DefaultConfig()
	cfgPath := filepath.Join(dir, addedtokens.ConfigFile)
	buf, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		var hc hfConfig
		if err := json.Unmarshal(buf, &hc); err != nil {
			return nil, fmt.Errorf("load %s: %w", cfgPath, err)
		}
		setB := func(dst *bool, v *bool) {
			if v != nil {
				*dst = *v
			}
		}
		setS := func(dst *string, v *string) {
			if v != nil {
				*dst = *v
			}
		}
		setB(&cfg.DoLowerCase, hc.DoLowerCase)
		setB(&cfg.TokenizeChineseChars, hc.TokenizeChineseChars)
		setB(&cfg.DoBasicTokenize, hc.DoBasicTokenize)
		cfg.StripAccents = hc.StripAccents
		setS(&cfg.UnkToken, hc.UnkToken)
		setS(&cfg.SepToken, hc.SepToken)
		setS(&cfg.PadToken, hc.PadToken)
		setS(&cfg.ClsToken, hc.ClsToken)
		setS(&cfg.MaskToken, hc.MaskToken)
		if hc.ModelMaxLength != nil && *hc.ModelMaxLength < 1e9 {
			cfg.ModelMaxLength = int(*hc.ModelMaxLength)
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("wordpiece: %w", err)
	}
	if err := checkSpecials(filepath.Join(dir, "vocab.txt"), vocab, cfg); err != nil {
		return nil, err
	}
	t, err := New(vocab, cfg)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	added, err := addedtokens.Read(dir, len(vocab))
	if err != nil {
		return nil, err
	}
	for _, a := range added {
		if a.ID != t.Len() { // Read checked base+i; differs when an earlier content was already known (addTokens kept its id)
			return nil, fmt.Errorf("load %s: added token %q has id %d, want %d (ids must follow the vocabulary contiguously)", dir, a.Content, a.ID, t.Len())
		}
		t.addTokens([]string{a.Content}, a.Special)
	}
	return t, nil
}

// Config returns the options.
func (t *Tokenizer) Config() Config { return t.cfg }

// Vocab returns the base vocabulary (not a copy; do not modify).
func (t *Tokenizer) Vocab() []string { return t.vocab }

// Added returns the added tokens in id order (first id len(Vocab())).
func (t *Tokenizer) Added() []AddedToken { return slices.Clone(t.added) }

// Len is base vocabulary + added tokens (len(hf_tokenizer)).
func (t *Tokenizer) Len() int { return len(t.vocab) + len(t.added) }

// TokenToID returns the id of a vocabulary or added token.
func (t *Tokenizer) TokenToID(tok string) (int, bool) {
	if id, ok := t.addedID[tok]; ok {
		return id, true
	}
	id, ok := t.ids[tok]
	return id, ok
}

// IDToToken returns the token of id, "" when out of range.
func (t *Tokenizer) IDToToken(id int) string {
	switch {
	case id < 0:
		return ""
	case id < len(t.vocab):
		return t.vocab[id]
	case id < t.Len():
		return t.added[id-len(t.vocab)].Content
	}
	return ""
}

func (t *Tokenizer) mustID(tok string) int { id, _ := t.TokenToID(tok); return id }

// PadID is [PAD]; EOSID is [SEP] (the end of a BERT sequence); ClsID is [CLS].
func (t *Tokenizer) PadID() int { return t.mustID(t.cfg.PadToken) }
func (t *Tokenizer) EOSID() int { return t.mustID(t.cfg.SepToken) }
func (t *Tokenizer) ClsID() int { return t.mustID(t.cfg.ClsToken) }

// AddTokens adds non-special tokens (HF add_tokens) and returns their ids; a
// token already known keeps its id.
func (t *Tokenizer) AddTokens(toks []string) []int { return t.addTokens(toks, false) }

// AddSpecialTokens adds special tokens: never split, dropped by Decode(ids, true).
func (t *Tokenizer) AddSpecialTokens(toks []string) []int { return t.addTokens(toks, true) }

func (t *Tokenizer) addTokens(toks []string, special bool) []int {
	ids := make([]int, len(toks))
	for i, tok := range toks {
		if tok == "" {
			ids[i] = -1
			continue
		}
		if id, ok := t.TokenToID(tok); ok {
			ids[i] = id
			continue
		}
		id := t.Len()
		t.added = append(t.added, AddedToken{Content: tok, Special: special})
		t.addedID[tok] = id
		ids[i] = id
	}
	return ids
}

// specialTokens are the tokens HF keeps whole (all_special_tokens) in order.
func (t *Tokenizer) specialTokens() []string {
	s := []string{t.cfg.UnkToken, t.cfg.SepToken, t.cfg.PadToken, t.cfg.ClsToken, t.cfg.MaskToken}
	for _, a := range t.added {
		if a.Special {
			s = append(s, a.Content)
		}
	}
	return s
}

func (t *Tokenizer) isSpecialID(id int) bool {
	tok := t.IDToToken(id)
	return tok != "" && slices.Contains(t.specialTokens(), tok)
}

// Tokenize returns the WordPiece tokens of text, without [CLS]/[SEP]: special
// and added tokens are split out first (HF's added-token trie, longest match),
// the rest goes through BasicTokenize and WordPiece.
func (t *Tokenizer) Tokenize(text string) []string {
	literals := append(t.specialTokens(), contents(t.added)...)
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		best := ""
		for _, l := range literals {
			if len(l) > len(best) && strings.HasPrefix(text[i:], l) {
				best = l
			}
		}
		if best == "" {
			continue
		}
		out = append(out, t.tokenizeChunk(text[start:i])...)
		out = append(out, best)
		i += len(best) - 1
		start = i + 1
	}
	return append(out, t.tokenizeChunk(text[start:])...)
}

func contents(a []AddedToken) []string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = x.Content
	}
	return s
}

func (t *Tokenizer) tokenizeChunk(text string) []string {
	if text == "" {
		return nil
	}
	var words []string
	if t.cfg.DoBasicTokenize {
		words = t.BasicTokenize(text)
	} else {
		words = strings.Fields(text)
	}
	var out []string
	for _, w := range words {
		out = append(out, t.WordPiece(w)...)
	}
	return out
}

// BasicTokenize is HF BasicTokenizer.tokenize: drop NUL, U+FFFD and control
// characters and map whitespace to spaces; surround CJK ideographs with
// spaces; NFC; split on whitespace; lower case and strip accents (NFD, drop
// Mn) when configured; split every punctuation character off.
func (t *Tokenizer) BasicTokenize(text string) []string {
	var sb strings.Builder
	for _, r := range text {
		switch {
		case r == 0 || r == 0xFFFD || isControl(r):
		case isWhitespace(r):
			sb.WriteByte(' ')
		case t.cfg.TokenizeChineseChars && isCJK(r):
			sb.WriteByte(' ')
			sb.WriteRune(r)
			sb.WriteByte(' ')
		default:
			sb.WriteRune(r)
		}
	}
	strip := t.cfg.DoLowerCase
	if t.cfg.StripAccents != nil {
		strip = *t.cfg.StripAccents
	}
	var out []string
	for _, tok := range strings.FieldsFunc(norm.NFC.String(sb.String()), isWhitespace) {
		if t.cfg.DoLowerCase {
			tok = strings.ToLower(tok)
		}
		if strip {
			tok = stripAccents(tok)
		}
		out = append(out, splitPunct(tok)...)
	}
	return out
}

// WordPiece is greedy longest-match-first over one basic token: continuations
// carry ContinuingPrefix; a word longer than MaxInputCharsPerWord runes or one
// that cannot be covered becomes the single unk token.
func (t *Tokenizer) WordPiece(word string) []string {
	runes := []rune(word)
	if len(runes) > t.cfg.MaxInputCharsPerWord {
		return []string{t.cfg.UnkToken}
	}
	var out []string
	for start := 0; start < len(runes); {
		end := len(runes)
		cur := ""
		for ; start < end; end-- {
			sub := string(runes[start:end])
			if start > 0 {
				sub = t.cfg.ContinuingPrefix + sub
			}
			if _, ok := t.ids[sub]; ok {
				cur = sub
				break
			}
		}
		if cur == "" {
			return []string{t.cfg.UnkToken}
		}
		out = append(out, cur)
		start = end
	}
	return out
}

// Encode returns the ids of Tokenize(text), wrapped as [CLS] … [SEP] when
// addSpecial.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	toks := t.Tokenize(text)
	ids := make([]int, len(toks))
	for i, tok := range toks {
		id, ok := t.TokenToID(tok)
		if !ok {
			id = t.mustID(t.cfg.UnkToken)
		}
		ids[i] = id
	}
	if addSpecial {
		return t.WithSpecial(ids)
	}
	return ids
}

// WithSpecial returns [CLS] ids [SEP].
func (t *Tokenizer) WithSpecial(ids []int) []int {
	out := make([]int, 0, len(ids)+2)
	out = append(out, t.ClsID())
	out = append(out, ids...)
	return append(out, t.EOSID())
}

// EncodePair returns [CLS] a [SEP] b [SEP] with token_type_ids 0 for
// [CLS] a [SEP] and 1 for b [SEP] (cross-encoder input).
func (t *Tokenizer) EncodePair(a, b string) (ids, typeIDs []int) {
	ia := t.Encode(a, true)
	ib := append(t.Encode(b, false), t.EOSID())
	ids = append(ia, ib...)
	typeIDs = make([]int, len(ids))
	for i := len(ia); i < len(ids); i++ {
		typeIDs[i] = 1
	}
	return ids, typeIDs
}

// Decode follows HF BertTokenizer.decode without clean_up_tokenization_spaces:
// tokens are joined by spaces and " ##" is removed; added tokens stand alone.
// With skipSpecial, [CLS], [SEP], [PAD], [UNK], [MASK] and added special
// tokens are dropped.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	var parts, run []string
	flush := func() {
		if len(run) > 0 {
			parts = append(parts, strings.ReplaceAll(strings.Join(run, " "), " "+t.cfg.ContinuingPrefix, ""))
			run = run[:0]
		}
	}
	for _, id := range ids {
		tok := t.IDToToken(id)
		if tok == "" || (skipSpecial && t.isSpecialID(id)) {
			continue
		}
		if id >= len(t.vocab) {
			flush()
			parts = append(parts, tok)
			continue
		}
		run = append(run, tok)
	}
	flush()
	return strings.Join(parts, " ")
}

// Save writes vocab.txt, tokenizer_config.json, special_tokens_map.json and
// added_tokens.json (HF BertTokenizer.save_pretrained layout) and the fast
// tokenizer's tokenizer.json (TokenizerJSON) to dir.
func (t *Tokenizer) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save wordpiece tokenizer: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, "vocab.txt"), []byte(strings.Join(t.vocab, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("save wordpiece tokenizer: %w", err)
	}
	c := t.cfg
	decoder := map[string]addedtokens.Entry{}
	for _, s := range []string{c.PadToken, c.UnkToken, c.ClsToken, c.SepToken, c.MaskToken} {
		if id, ok := t.ids[s]; ok {
			decoder[fmt.Sprint(id)] = addedtokens.Entry{Content: s, Special: true}
		}
	}
	added := map[string]int{}
	var additional []string
	for i, a := range t.added {
		id := len(t.vocab) + i
		decoder[fmt.Sprint(id)] = addedtokens.Entry{Content: a.Content, Normalized: !a.Special, Special: a.Special}
		added[a.Content] = id
		if a.Special {
			additional = append(additional, a.Content)
		}
	}
	mml := float64(c.ModelMaxLength)
	hc := hfConfig{
		TokenizerClass: "BertTokenizer", DoLowerCase: &c.DoLowerCase, StripAccents: c.StripAccents,
		TokenizeChineseChars: &c.TokenizeChineseChars, DoBasicTokenize: &c.DoBasicTokenize, ModelMaxLength: &mml,
		UnkToken: &c.UnkToken, SepToken: &c.SepToken, PadToken: &c.PadToken, ClsToken: &c.ClsToken, MaskToken: &c.MaskToken,
		AddedTokensDecoder: decoder,
	}
	special := map[string]any{"unk_token": c.UnkToken, "sep_token": c.SepToken, "pad_token": c.PadToken, "cls_token": c.ClsToken, "mask_token": c.MaskToken}
	if additional != nil {
		special["additional_special_tokens"] = additional
	}
	files := []struct {
		name string
		v    any
	}{{"tokenizer_config.json", hc}, {"special_tokens_map.json", special}, {"added_tokens.json", added}}
	tj, err := t.TokenizerJSON()
	if err != nil {
		return fmt.Errorf("save wordpiece tokenizer: %w", err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, TokenizerJSONFile), tj, 0o644); err != nil {
		return fmt.Errorf("save wordpiece tokenizer: %w", err)
	}
	for _, f := range files {
		buf, err := json.MarshalIndent(f.v, "", "  ")
		if err != nil {
			return fmt.Errorf("save wordpiece tokenizer: %s: %w", f.name, err)
		}
		if err := atomicfile.WriteBytes(filepath.Join(dir, f.name), append(buf, '\n'), 0o644); err != nil {
			return fmt.Errorf("save wordpiece tokenizer: %w", err)
		}
	}
	return nil
}

// isWhitespace is BERT's _is_whitespace: space, \t, \n, \r or category Zs.
func isWhitespace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || unicode.Is(unicode.Zs, r)
}

// isControl is BERT's _is_control: category C* (including unassigned Cn),
// except \t, \n, \r.
func isControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	if unicode.Is(unicode.C, r) {
		return true
	}
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z)
}

// isPunct is BERT's _is_punctuation: ASCII 33–47, 58–64, 91–96, 123–126, or category P*.
func isPunct(r rune) bool {
	if (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126) {
		return true
	}
	return unicode.Is(unicode.P, r)
}

// isCJK is BERT's _is_chinese_char (CJK Unified Ideographs blocks).
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) || (r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B820 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}

func stripAccents(s string) string {
	var sb strings.Builder
	for _, r := range norm.NFD.String(s) {
		if !unicode.Is(unicode.Mn, r) {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func splitPunct(s string) []string {
	var out []string
	var cur []rune
	for _, r := range s {
		if isPunct(r) {
			if len(cur) > 0 {
				out = append(out, string(cur))
				cur = cur[:0]
			}
			out = append(out, string(r))
			continue
		}
		cur = append(cur, r)
	}
	if len(cur) > 0 {
		out = append(out, string(cur))
	}
	return out
}
