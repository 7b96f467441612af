// Package tokenizer defines the common Tokenizer interface of ragforge's
// models, loads a tokenizer directory (SentencePiece/T5 spiece.model, BERT
// vocab.txt, or an HF tokenizer.json with a Unigram, WordPiece or byte-level
// BPE model), and
// encodes batches with HF semantics (truncation, stride windows, padding).
//
// Implementations live in the subpackages sentencepiece (T5), wordpiece
// (BERT) and bpe (Llama 3, Qwen).
package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/ragforge/ragforge/models/tokenizer/bpe"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
)

// Tokenizer is the interface shared by the T5 (SentencePiece) and BERT
// (WordPiece) tokenizers. Ids are vocabulary indices, as in HF.
type Tokenizer interface {
	// Encode returns ids for one text; addSpecial appends eos (T5) or wraps [CLS]..[SEP] (BERT).
	Encode(text string, addSpecial bool) []int
	// EncodePair returns BERT [CLS] a [SEP] b [SEP] with type ids 0/1; T5 a </s> b </s> with zeros.
	EncodePair(a, b string) (ids, typeIDs []int)
	// Decode turns ids back into text; skipSpecial drops special tokens.
	Decode(ids []int, skipSpecial bool) string
	TokenToID(tok string) (int, bool)
	IDToToken(id int) string
	Len() int   // like len(hf_tokenizer): base vocab + sentinels + added tokens
	PadID() int // T5 <pad>; BERT [PAD]
	EOSID() int // T5 </s>; BERT [SEP]
	// AddTokens adds tokens (HF add_tokens) and returns their ids.
	AddTokens(toks []string) []int
	// Save writes the tokenizer files HF save_pretrained writes.
	Save(dir string) error
}

// SpecialWrapper is implemented by tokenizers that can add their special
// tokens around an already-encoded id sequence (HF
// build_inputs_with_special_tokens). EncodeBatch needs it to truncate and
// window.
type SpecialWrapper interface {
	WithSpecial(ids []int) []int
}

var (
	_ Tokenizer      = (*sentencepiece.T5)(nil)
	_ Tokenizer      = (*wordpiece.Tokenizer)(nil)
	_ SpecialWrapper = (*sentencepiece.T5)(nil)
	_ SpecialWrapper = (*wordpiece.Tokenizer)(nil)
	_ Tokenizer      = (*bpe.Tokenizer)(nil)
	_ Tokenizer      = (*sentencepiece.Fast)(nil)
	_ SpecialWrapper = (*sentencepiece.Fast)(nil)
	_ JSONWriter     = (*sentencepiece.T5)(nil)
	_ JSONWriter     = (*sentencepiece.Fast)(nil)
	_ JSONWriter     = (*wordpiece.Tokenizer)(nil)
	_ JSONWriter     = (*bpe.Tokenizer)(nil)
	_ SpecialWrapper = (*bpe.Tokenizer)(nil)
)

// Load opens a tokenizer directory. It looks, in order, for spiece.model
// (T5Tokenizer conventions, see sentencepiece.LoadT5), vocab.txt
// (BertTokenizer, see wordpiece.Load), tokenizer.json (see LoadJSON) and
// XLM-R's sentencepiece.bpe.model (read as the tokenizer.json
// XLMRobertaConverter makes of it). It returns an error naming dir when none
// is present.
func Load(dir string) (Tokenizer, error) {
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	switch {
	case exists("spiece.model"):
		return sentencepiece.LoadT5(dir)
	case exists("vocab.txt"):
		return wordpiece.Load(dir)
	case exists("tokenizer.json"):
		return LoadJSON(filepath.Join(dir, "tokenizer.json"))
	case exists(sentencepiece.XLMRFile):
		return loadXLMR(dir)
	}
	return nil, fmt.Errorf("load tokenizer %s: no spiece.model, vocab.txt, tokenizer.json or %s", dir, sentencepiece.XLMRFile)
}

// LoadFor is Load for a model whose embedding has vocabSize rows (its
// config.json vocab_size). A tokenizer with more tokens (vocabulary plus
// added tokens) would emit ids past the embedding, so it is an error naming
// the tokenizer file; fewer is fine (HF pads vocab_size to a multiple of 8 or 128).
func LoadFor(dir string, vocabSize int) (Tokenizer, error) {
	tok, err := Load(dir)
	if err != nil {
		return nil, err
	}
	if tok.Len() > vocabSize {
		return nil, fmt.Errorf("load tokenizer %s: %d tokens (with added tokens), more than the model's vocab_size %d in %s: ids from %d on have no embedding",
			filepath.Join(dir, FileOf(dir)), tok.Len(), vocabSize, filepath.Join(dir, "config.json"), vocabSize)
	}
	return tok, nil
}

// FileOf names the tokenizer file Load reads in dir, "" when there is none.
func FileOf(dir string) string {
	for _, name := range []string{"spiece.model", "vocab.txt", "tokenizer.json", sentencepiece.XLMRFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return name
		}
	}
	return ""
}

// hfTokenizerJSON is the subset of an HF tokenizers tokenizer.json used here.
type hfTokenizerJSON struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type                    string          `json:"type"`
		Vocab                   json.RawMessage `json:"vocab"`
		UnkID                   *int            `json:"unk_id"`
		ByteFallback            bool            `json:"byte_fallback"`
		UnkToken                string          `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		MaxInputCharsPerWord    *int            `json:"max_input_chars_per_word"`
	} `json:"model"`
}

// component is one normalizer / pre-tokenizer node; Sequence nodes nest.
type component struct {
	Type                string          `json:"type"`
	Normalizers         []component     `json:"normalizers"`
	Pretokenizers       []component     `json:"pretokenizers"`
	PrecompiledCharsmap string          `json:"precompiled_charsmap"`
	Pattern             json.RawMessage `json:"pattern"`
	AddPrefixSpace      *bool           `json:"add_prefix_space"`
	PrependScheme       string          `json:"prepend_scheme"`
	Replacement         string          `json:"replacement"`
	Lowercase           *bool           `json:"lowercase"`
	StripAccents        *bool           `json:"strip_accents"`
	CleanText           *bool           `json:"clean_text"`
	HandleChineseChars  *bool           `json:"handle_chinese_chars"`
}

func flatten(raw json.RawMessage) ([]component, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	var out []component
	var walk func(c component)
	walk = func(c component) {
		out = append(out, c)
		for _, k := range append(c.Normalizers, c.Pretokenizers...) {
			walk(k)
		}
	}
	walk(c)
	return out, nil
}

var sentinelRE = regexp.MustCompile(`^<extra_id_(\d+)>$`)

// LoadJSON reads an HF tokenizer.json. A BPE model is byte-level BPE (package
// bpe; tokenizer_config.json beside it is read too). A Unigram model with
// trailing <extra_id_k> sentinels, or without a post_processor, is built as a
// sentencepiece.T5 (the Precompiled normalizer's base64 charsmap, Metaspace
// prefix and whitespace collapsing become the SentencePiece normalizer spec);
// any other Unigram file (XLM-R) as a sentencepiece.Fast keeping its added
// tokens and post-processor. A WordPiece model is built as a
// wordpiece.Tokenizer from the vocab and the BertNormalizer options. Added
// tokens with ids past a T5 or WordPiece vocabulary are re-added in order.
func LoadJSON(path string) (Tokenizer, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	return fromJSON(path, buf)
}

// loadXLMR reads dir/sentencepiece.bpe.model as XLMRobertaTokenizerFast
// would after converting it (sentencepiece.XLMRTokenizerJSON), with
// dir/tokenizer_config.json.
func loadXLMR(dir string) (Tokenizer, error) {
	path := filepath.Join(dir, sentencepiece.XLMRFile)
	m, err := sentencepiece.Load(path)
	if err != nil {
		return nil, err
	}
	buf, err := sentencepiece.XLMRTokenizerJSON(m)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return fromJSON(filepath.Join(dir, "tokenizer.json"), buf)
}

// fromJSON reads tokenizer.json bytes; path (the file, real or as it would
// be) names errors and locates tokenizer_config.json.
func fromJSON(path string, buf []byte) (Tokenizer, error) {
	var tj hfTokenizerJSON
	if err := json.Unmarshal(buf, &tj); err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	if tj.Model.Type == "BPE" {
		// Byte-level BPE reads tokenizer_config.json beside it too.
		cfg, err := os.ReadFile(filepath.Join(filepath.Dir(path), bpe.ConfigFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("load tokenizer: %w", err)
		}
		tok, err := bpe.New(buf, cfg)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		return tok, nil
	}
	norms, err := flatten(tj.Normalizer)
	if err != nil {
		return nil, fmt.Errorf("load %s: field %q: %w", path, "normalizer", err)
	}
	pres, err := flatten(tj.PreTokenizer)
	if err != nil {
		return nil, fmt.Errorf("load %s: field %q: %w", path, "pre_tokenizer", err)
	}
	var tok Tokenizer
	var vocabLen int
	special := map[int]bool{}
	for _, a := range tj.AddedTokens {
		special[a.ID] = a.Special
	}
	switch tj.Model.Type {
	case "Unigram":
		m, extra, nfkc, err := unigramFromJSON(&tj, norms, pres, special)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		var post struct{ Type string }
		if len(tj.PostProcessor) > 0 && string(tj.PostProcessor) != "null" {
			if err := json.Unmarshal(tj.PostProcessor, &post); err != nil {
				return nil, fmt.Errorf("load %s: field %q: %w", path, "post_processor", err)
			}
		}
		if extra == 0 && post.Type != "" {
			// Not T5 (no sentinels): the file's own added tokens and
			// post-processor, e.g. XLM-R's <s> $A </s>.
			return fastFromJSON(path, buf, m, nfkc)
		}
		if nfkc {
			return nil, fmt.Errorf("load %s: field %q: NFKC without a precompiled charsmap is only read for non-T5 files", path, "normalizer")
		}
		tok, vocabLen = sentencepiece.NewT5(m, extra), m.Size()+extra
	case "WordPiece":
		wp, n, err := wordpieceFromJSON(&tj, norms)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		tok, vocabLen = wp, n
	default:
		return nil, fmt.Errorf("load %s: field %q: model type %q not supported (Unigram, WordPiece, BPE)", path, "model.type", tj.Model.Type)
	}
	added := slices.Clone(tj.AddedTokens)
	slices.SortFunc(added, func(a, b struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	}) int {
		return a.ID - b.ID
	})
	for _, a := range added {
		if a.ID < vocabLen {
			continue
		}
		var ids []int
		switch t := tok.(type) {
		case *sentencepiece.T5:
			if a.Special {
				ids = t.AddSpecialTokens([]string{a.Content})
			} else {
				ids = t.AddTokens([]string{a.Content})
			}
		case *wordpiece.Tokenizer:
			if a.Special {
				ids = t.AddSpecialTokens([]string{a.Content})
			} else {
				ids = t.AddTokens([]string{a.Content})
			}
		}
		if ids[0] != a.ID {
			return nil, fmt.Errorf("load %s: added token %q: id %d, want %d (ids must follow the vocabulary contiguously)", path, a.Content, a.ID, ids[0])
		}
	}
	return tok, nil
}

// unigramFromJSON builds the SentencePiece model of a Unigram
// tokenizer.json: pieces and scores, unk_id, control pieces from the
// special added tokens, the Precompiled charsmap, Replace " {2,}" and
// WhitespaceSplit as remove_extra_whitespaces, Metaspace's prefix as
// add_dummy_prefix. It returns the number of trailing T5 sentinels (cut
// from the pieces) and whether an NFKC normalizer node is present. Other
// normalizer or pre-tokenizer types are refused by name.
func unigramFromJSON(tj *hfTokenizerJSON, norms, pres []component, special map[int]bool) (*sentencepiece.Model, int, bool, error) {
	var vocab [][2]json.RawMessage
	if err := json.Unmarshal(tj.Model.Vocab, &vocab); err != nil {
		return nil, 0, false, fmt.Errorf("field %q: %w", "model.vocab", err)
	}
	pieces := make([]sentencepiece.Piece, len(vocab))
	for i, v := range vocab {
		if err := json.Unmarshal(v[0], &pieces[i].Piece); err != nil {
			return nil, 0, false, fmt.Errorf("field %q: entry %d: %w", "model.vocab", i, err)
		}
		var score float64
		if err := json.Unmarshal(v[1], &score); err != nil {
			return nil, 0, false, fmt.Errorf("field %q: entry %d: %w", "model.vocab", i, err)
		}
		pieces[i].Score = float32(score)
		pieces[i].Type = sentencepiece.Normal
	}
	// Trailing <extra_id_k> entries are the T5 sentinels, in reverse order.
	base := len(pieces)
	for base > 0 && sentinelRE.MatchString(pieces[base-1].Piece) {
		base--
	}
	extra := len(pieces) - base
	for k := 0; k < extra; k++ {
		if want := fmt.Sprintf("<extra_id_%d>", k); pieces[base+extra-1-k].Piece != want {
			return nil, 0, false, fmt.Errorf("field %q: entry %d is %q, want %q (T5 sentinel order)", "model.vocab", base+extra-1-k, pieces[base+extra-1-k].Piece, want)
		}
	}
	pieces = pieces[:base]
	ts := sentencepiece.DefaultTrainerSpec()
	ts.VocabSize = int32(base)
	ts.ByteFallback = tj.Model.ByteFallback
	ts.UnkID, ts.BOSID, ts.EOSID, ts.PadID = -1, -1, -1, -1
	if tj.Model.UnkID == nil || *tj.Model.UnkID < 0 || *tj.Model.UnkID >= base {
		return nil, 0, false, fmt.Errorf("field %q: missing or out of range", "model.unk_id")
	}
	ts.UnkID = int32(*tj.Model.UnkID)
	for id := range pieces {
		switch {
		case id == int(ts.UnkID):
			pieces[id].Type = sentencepiece.Unknown
		case special[id]:
			pieces[id].Type = sentencepiece.Control
		}
		switch pieces[id].Piece {
		case "</s>":
			ts.EOSID = int32(id)
		case "<pad>":
			ts.PadID = int32(id)
		case "<s>":
			ts.BOSID = int32(id)
		}
	}
	ns := sentencepiece.NormalizerSpec{EscapeWhitespaces: true}
	nfkc := false
	for _, c := range norms {
		switch c.Type {
		case "Sequence", "Strip":
		case "NFKC":
			nfkc = true
		case "Precompiled":
			cm, err := base64.StdEncoding.DecodeString(c.PrecompiledCharsmap)
			if err != nil {
				return nil, 0, false, fmt.Errorf("field %q: %w", "normalizer.precompiled_charsmap", err)
			}
			ns.PrecompiledCharsmap = cm
		case "Replace":
			if !regexp.MustCompile(`" \{2,\}"`).Match(c.Pattern) {
				return nil, 0, false, fmt.Errorf("field %q: Replace %s not supported (only runs of spaces, \" {2,}\")", "normalizer", c.Pattern)
			}
			ns.RemoveExtraWhitespaces = true
		default:
			return nil, 0, false, fmt.Errorf("field %q: type %q not supported with a Unigram model (Precompiled, Replace, Strip, NFKC, Sequence)", "normalizer", c.Type)
		}
	}
	for _, c := range pres {
		switch c.Type {
		case "Sequence":
		case "WhitespaceSplit":
			ns.RemoveExtraWhitespaces = true
		case "Metaspace":
			if c.Replacement != "" && c.Replacement != "▁" {
				return nil, 0, false, fmt.Errorf("field %q: Metaspace replacement %q not supported (SentencePiece's \"▁\")", "pre_tokenizer", c.Replacement)
			}
			ns.AddDummyPrefix = (c.AddPrefixSpace != nil && *c.AddPrefixSpace) || c.PrependScheme == "always" || c.PrependScheme == "first"
		default:
			return nil, 0, false, fmt.Errorf("field %q: type %q not supported with a Unigram model (Metaspace, WhitespaceSplit, Sequence)", "pre_tokenizer", c.Type)
		}
	}
	m, err := sentencepiece.New(pieces, ts, ns)
	if err != nil {
		return nil, 0, false, err
	}
	return m, extra, nfkc, nil
}

// fastFromJSON wraps m in the tokenizer.json pipeline of path (added tokens,
// post-processor) with tokenizer_config.json beside it when present.
func fastFromJSON(path string, buf []byte, m *sentencepiece.Model, nfkc bool) (Tokenizer, error) {
	var doc, cfg map[string]json.RawMessage
	if err := json.Unmarshal(buf, &doc); err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	cpath := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	if cbuf, err := os.ReadFile(cpath); err == nil {
		if err := json.Unmarshal(cbuf, &cfg); err != nil {
			return nil, fmt.Errorf("load %s: %w", cpath, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	f, err := sentencepiece.NewFast(m, nfkc, doc, cfg)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return f, nil
}

func wordpieceFromJSON(tj *hfTokenizerJSON, norms []component) (*wordpiece.Tokenizer, int, error) {
	var vmap map[string]int
	if err := json.Unmarshal(tj.Model.Vocab, &vmap); err != nil {
		return nil, 0, fmt.Errorf("field %q: %w", "model.vocab", err)
	}
	vocab := make([]string, len(vmap))
	seen := make([]bool, len(vmap))
	for tok, id := range vmap {
		if id < 0 || id >= len(vocab) || seen[id] {
			return nil, 0, fmt.Errorf("field %q: token %q: id %d not a permutation of 0..%d", "model.vocab", tok, id, len(vocab)-1)
		}
		vocab[id], seen[id] = tok, true
	}
	cfg := wordpiece.DefaultConfig()
	if tj.Model.UnkToken != "" {
		cfg.UnkToken = tj.Model.UnkToken
	}
	if p := tj.Model.ContinuingSubwordPrefix; p != nil {
		cfg.ContinuingPrefix = *p
	}
	if n := tj.Model.MaxInputCharsPerWord; n != nil {
		cfg.MaxInputCharsPerWord = *n
	}
	for _, c := range norms {
		if c.Type == "BertNormalizer" {
			if c.Lowercase != nil {
				cfg.DoLowerCase = *c.Lowercase
			}
			cfg.StripAccents = c.StripAccents
			if c.HandleChineseChars != nil {
				cfg.TokenizeChineseChars = *c.HandleChineseChars
			}
		}
	}
	t, err := wordpiece.New(vocab, cfg)
	return t, len(vocab), err
}

// errNotWrapper is returned when a tokenizer cannot add specials to windows.
var errNotWrapper = errors.New("tokenizer does not implement SpecialWrapper")
