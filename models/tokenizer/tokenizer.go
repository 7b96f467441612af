// Package tokenizer defines the common Tokenizer interface of ragforge's
// models, loads a tokenizer directory (SentencePiece/T5 spiece.model, BERT
// vocab.txt, or an HF tokenizer.json with a Unigram or WordPiece model), and
// encodes batches with HF semantics (truncation, stride windows, padding).
//
// Implementations live in the subpackages sentencepiece (T5) and wordpiece
// (BERT).
package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"

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
	_ Tokenizer      = (*sentencepiece.XLMR)(nil)
	_ SpecialWrapper = (*sentencepiece.XLMR)(nil)
)

// Load opens a tokenizer directory. It looks, in order, for spiece.model
// (T5Tokenizer conventions, see sentencepiece.LoadT5), sentencepiece.bpe.model
// (XLMRobertaTokenizer's fairseq ids, see sentencepiece.LoadXLMR), vocab.txt
// (BertTokenizer, see wordpiece.Load) and tokenizer.json (see LoadJSON). It
// returns an error naming dir when none is present.
func Load(dir string) (Tokenizer, error) {
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	switch {
	case exists("spiece.model"):
		return sentencepiece.LoadT5(dir)
	case exists(sentencepiece.XLMRFile):
		return sentencepiece.LoadXLMR(dir)
	case exists("vocab.txt"):
		return wordpiece.Load(dir)
	case exists("tokenizer.json"):
		return LoadJSON(filepath.Join(dir, "tokenizer.json"))
	}
	return nil, fmt.Errorf("load tokenizer %s: no spiece.model, %s, vocab.txt or tokenizer.json", dir, sentencepiece.XLMRFile)
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
			filepath.Join(dir, File(dir)), tok.Len(), vocabSize, filepath.Join(dir, "config.json"), vocabSize)
	}
	return tok, nil
}

// File names the tokenizer file Load reads in dir, or "" when there is none.
func File(dir string) string {
	for _, name := range []string{"spiece.model", sentencepiece.XLMRFile, "vocab.txt", "tokenizer.json"} {
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
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        struct {
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

// LoadJSON reads an HF tokenizer.json whose model is Unigram (built as a
// sentencepiece.T5: the Precompiled normalizer's base64 charsmap, Metaspace
// prefix and whitespace collapsing become the SentencePiece normalizer spec;
// trailing <extra_id_k> vocabulary entries become the sentinels) or WordPiece
// (built as a wordpiece.Tokenizer from the vocab and the BertNormalizer
// options). Added tokens with ids past the vocabulary are re-added in order.
func LoadJSON(path string) (Tokenizer, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	var tj hfTokenizerJSON
	if err := json.Unmarshal(buf, &tj); err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
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
		t5, n, err := unigramFromJSON(&tj, norms, pres, special)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		tok, vocabLen = t5, n
	case "WordPiece":
		wp, n, err := wordpieceFromJSON(&tj, norms)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		tok, vocabLen = wp, n
	default:
		return nil, fmt.Errorf("load %s: field %q: model type %q not supported (Unigram, WordPiece)", path, "model.type", tj.Model.Type)
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

func unigramFromJSON(tj *hfTokenizerJSON, norms, pres []component, special map[int]bool) (*sentencepiece.T5, int, error) {
	var vocab [][2]json.RawMessage
	if err := json.Unmarshal(tj.Model.Vocab, &vocab); err != nil {
		return nil, 0, fmt.Errorf("field %q: %w", "model.vocab", err)
	}
	pieces := make([]sentencepiece.Piece, len(vocab))
	for i, v := range vocab {
		if err := json.Unmarshal(v[0], &pieces[i].Piece); err != nil {
			return nil, 0, fmt.Errorf("field %q: entry %d: %w", "model.vocab", i, err)
		}
		var score float64
		if err := json.Unmarshal(v[1], &score); err != nil {
			return nil, 0, fmt.Errorf("field %q: entry %d: %w", "model.vocab", i, err)
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
			return nil, 0, fmt.Errorf("field %q: entry %d is %q, want %q (T5 sentinel order)", "model.vocab", base+extra-1-k, pieces[base+extra-1-k].Piece, want)
		}
	}
	pieces = pieces[:base]
	ts := sentencepiece.DefaultTrainerSpec()
	ts.VocabSize = int32(base)
	ts.ByteFallback = tj.Model.ByteFallback
	ts.UnkID, ts.BOSID, ts.EOSID, ts.PadID = -1, -1, -1, -1
	if tj.Model.UnkID == nil || *tj.Model.UnkID < 0 || *tj.Model.UnkID >= base {
		return nil, 0, fmt.Errorf("field %q: missing or out of range", "model.unk_id")
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
	for _, c := range norms {
		switch c.Type {
		case "Precompiled":
			cm, err := base64.StdEncoding.DecodeString(c.PrecompiledCharsmap)
			if err != nil {
				return nil, 0, fmt.Errorf("field %q: %w", "normalizer.precompiled_charsmap", err)
			}
			ns.PrecompiledCharsmap = cm
		case "Replace":
			if string(c.Pattern) != "" && regexp.MustCompile(`" \{2,\}"`).Match(c.Pattern) {
				ns.RemoveExtraWhitespaces = true
			}
		}
	}
	for _, c := range pres {
		switch c.Type {
		case "WhitespaceSplit":
			ns.RemoveExtraWhitespaces = true
		case "Metaspace":
			ns.AddDummyPrefix = (c.AddPrefixSpace != nil && *c.AddPrefixSpace) || c.PrependScheme == "always" || c.PrependScheme == "first"
		}
	}
	m, err := sentencepiece.New(pieces, ts, ns)
	if err != nil {
		return nil, 0, err
	}
	return sentencepiece.NewT5(m, extra), base + extra, nil
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
