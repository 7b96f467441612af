package sentencepiece

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/ragforge/ragforge/models/tokenizer/internal/addedtokens"
	"github.com/ragforge/ragforge/models/tokenizer/internal/postprocess"
)

// TokenizerJSONFile is the HF tokenizers file a fast tokenizer loads.
const TokenizerJSONFile = "tokenizer.json"

// The node types below serialize as HF tokenizers (Rust, >= 0.19) writes
// them, field for field, so AutoTokenizer loads the file without converting
// spiece.model.

type tjNode map[string]any

type tjUnigram struct {
	Type         string   `json:"type"`
	UnkID        int      `json:"unk_id"`
	Vocab        [][2]any `json:"vocab"`
	ByteFallback bool     `json:"byte_fallback"`
}

type tokenizerJSON struct {
	Version       string                `json:"version"`
	Truncation    any                   `json:"truncation"`
	Padding       any                   `json:"padding"`
	AddedTokens   []addedtokens.Pattern `json:"added_tokens"`
	Normalizer    tjNode                `json:"normalizer"`
	PreTokenizer  tjNode                `json:"pre_tokenizer"`
	PostProcessor tjNode                `json:"post_processor"`
	Decoder       tjNode                `json:"decoder"`
	Model         tjUnigram             `json:"model"`
}

// Framing is the special tokens a written tokenizer.json's post-processor
// adds around a sequence.
type Framing int

const (
	// FrameEOS is T5's "$A </s>" (pair "$A </s> $B </s>").
	FrameEOS Framing = iota
	// FrameBOSEOS is XLM-R's "<s> $A </s>" (pair "<s> $A </s> </s> $B </s>").
	FrameBOSEOS
)

// TokenizerJSON is TokenizerJSONFramed(FrameEOS), the file T5TokenizerFast reads.
func (t *T5) TokenizerJSON() ([]byte, error) { return t.TokenizerJSONFramed(FrameEOS) }

// TokenizerJSON returns the tokenizer.json that transformers' T5Converter
// (convert_slow_tokenizer.py, SpmConverter with legacy=True) writes for t,
// so T5TokenizerFast needs no conversion:
//
//   - model: Unigram over the SentencePiece pieces and scores, then the
//     sentinels <extra_id_{n-1}> … <extra_id_0> with score 0, unk_id and
//     byte_fallback from the trainer spec;
//   - normalizer: Sequence[Precompiled(the spiece.model charsmap, base64),
//     Strip(right), Replace(Regex " {2,}" → "▁")] (without a charsmap, the
//     last two only);
//   - pre_tokenizer and decoder: Metaspace("▁", prepend_scheme "always",
//     split) when the model adds a dummy prefix ("never" otherwise);
//   - post_processor: TemplateProcessing appending </s> (single: $A </s>,
//     pair: $A </s> $B </s>), or with FrameBOSEOS XLMRobertaConverter's
//     <s> $A </s> (pair: <s> $A </s> </s> $B </s>);
//   - added_tokens: control and unknown pieces, the sentinels and the added
//     tokens (e.g. [HELPFUL]) in id order, with the flags Save writes into
//     tokenizer_config.json's added_tokens_decoder.
//
// Errors: a model that is not Unigram, one without </s>, or, with
// FrameBOSEOS, one without <s>.
func (t *T5) TokenizerJSONFramed(framing Framing) ([]byte, error) {
	sp := t.sp
	if sp.trainer.ModelType != 1 {
		return nil, fmt.Errorf("tokenizer.json: model type %d, only Unigram (1) is written", sp.trainer.ModelType)
	}
	eos := sp.EOSID()
	if eos < 0 || eos >= sp.Size() {
		return nil, errors.New("tokenizer.json: the model has no </s> piece to append")
	}
	n := sp.Size()
	vocab := make([][2]any, 0, t.Len())
	for _, p := range sp.pieces {
		vocab = append(vocab, [2]any{p.Piece, float64(p.Score)})
	}
	for k := t.extraIDs - 1; k >= 0; k-- {
		vocab = append(vocab, [2]any{fmt.Sprintf("<extra_id_%d>", k), 0.0})
	}
	var added []addedtokens.Pattern
	for id, p := range sp.pieces {
		if p.Type == Control || p.Type == Unknown {
			added = append(added, addedtokens.Pattern{ID: id, Entry: addedtokens.Entry{Content: p.Piece, Special: true}})
		}
	}
	for id := n; id < n+t.extraIDs; id++ {
		added = append(added, addedtokens.Pattern{ID: id, Entry: addedtokens.Entry{Content: t.IDToToken(id), LStrip: true, RStrip: true, Special: true}})
	}
	for i, a := range t.added {
		added = append(added, addedtokens.Pattern{ID: n + t.extraIDs + i, Entry: addedtokens.Entry{Content: a.Content, Normalized: !a.Special, Special: a.Special}})
	}
	sort.Slice(added, func(i, j int) bool { return added[i].ID < added[j].ID })

	norms := []any{
		tjNode{"type": "Strip", "strip_left": false, "strip_right": true},
		tjNode{"type": "Replace", "pattern": tjNode{"Regex": " {2,}"}, "content": "▁"},
	}
	if cm := sp.normalizer.PrecompiledCharsmap; len(cm) > 0 {
		// encoding/json writes []byte as standard base64, as tokenizers does.
		norms = append([]any{tjNode{"type": "Precompiled", "precompiled_charsmap": cm}}, norms...)
	}
	scheme := "always"
	if !sp.normalizer.AddDummyPrefix {
		scheme = "never"
	}
	meta := tjNode{"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": true}
	eosTok := postprocess.Special{Token: sp.IDToPiece(eos), ID: eos}
	var post tjNode
	switch framing {
	case FrameEOS:
		post = postprocess.TemplateJSON(nil, []postprocess.Special{eosTok}, nil, 0)
	case FrameBOSEOS:
		bos := sp.BOSID()
		if bos < 0 || bos >= n {
			return nil, errors.New("tokenizer.json: <s> … </s> framing asked, but the model has no <s> piece")
		}
		bosTok := postprocess.Special{Token: sp.IDToPiece(bos), ID: bos}
		post = postprocess.TemplateJSON([]postprocess.Special{bosTok}, []postprocess.Special{eosTok}, []postprocess.Special{eosTok}, 0)
	default:
		return nil, fmt.Errorf("tokenizer.json: framing %d unknown", framing)
	}
	doc := tokenizerJSON{
		Version:       "1.0",
		AddedTokens:   added,
		Normalizer:    tjNode{"type": "Sequence", "normalizers": norms},
		PreTokenizer:  meta,
		PostProcessor: post,
		Decoder:       meta,
		Model:         tjUnigram{Type: "Unigram", UnkID: sp.UnkID(), Vocab: vocab, ByteFallback: sp.trainer.ByteFallback},
	}
	buf, err := addedtokens.MarshalJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return buf, nil
}

// XLMRFile is the SentencePiece model of XLM-R checkpoints (bge-m3,
// multilingual-e5); a Unigram model despite its name.
const XLMRFile = "sentencepiece.bpe.model"

// XLMRTokenizerJSON returns the tokenizer.json transformers'
// XLMRobertaConverter writes for m, an XLM-R sentencepiece.bpe.model (pieces
// <unk>, <s>, </s>, then the vocabulary):
//
//   - model: Unigram with fairseq's ids: <s> 0, <pad> 1, </s> 2, <unk> 3
//     (unk_id), piece k (k >= 3) at k+1, <mask> last; so the ids equal
//     XLMRobertaTokenizer's (slow) sp_id + fairseq_offset 1;
//   - normalizer, pre_tokenizer, decoder: as TokenizerJSON;
//   - post_processor: <s> $A </s> (pair: <s> $A </s> </s> $B </s>);
//   - added_tokens: <s>, <pad>, </s>, <unk> and <mask> (lstrip, as
//     XLMRobertaTokenizer declares it).
//
// Errors: pieces 0..2 are not <unk> (unknown), <s>, </s>.
func XLMRTokenizerJSON(m *Model) ([]byte, error) {
	if len(m.pieces) < 4 || m.pieces[0].Type != Unknown || m.pieces[1].Piece != "<s>" || m.pieces[2].Piece != "</s>" {
		return nil, errors.New("tokenizer.json: not an XLM-R SentencePiece model (want <unk>, <s>, </s> as pieces 0, 1, 2)")
	}
	vocab := [][2]any{{"<s>", 0.0}, {"<pad>", 0.0}, {"</s>", 0.0}, {"<unk>", 0.0}}
	for _, p := range m.pieces[3:] {
		vocab = append(vocab, [2]any{p.Piece, float64(p.Score)})
	}
	mask := len(vocab)
	vocab = append(vocab, [2]any{"<mask>", 0.0})
	var added []addedtokens.Pattern
	for id, s := range []string{"<s>", "<pad>", "</s>", "<unk>"} {
		added = append(added, addedtokens.Pattern{ID: id, Entry: addedtokens.Entry{Content: s, Special: true}})
	}
	added = append(added, addedtokens.Pattern{ID: mask, Entry: addedtokens.Entry{Content: "<mask>", LStrip: true, Special: true}})
	// The T5 writer's normalizer and Metaspace nodes, for the same model.
	base, err := NewT5(m, 0).TokenizerJSON()
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		return nil, err
	}
	bos, eos := postprocess.Special{Token: "<s>", ID: 0}, postprocess.Special{Token: "</s>", ID: 2}
	doc["added_tokens"] = added
	doc["post_processor"] = postprocess.TemplateJSON([]postprocess.Special{bos}, []postprocess.Special{eos}, []postprocess.Special{eos}, 0)
	doc["model"] = tjUnigram{Type: "Unigram", UnkID: 3, Vocab: vocab, ByteFallback: m.trainer.ByteFallback}
	buf, err := addedtokens.MarshalJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return buf, nil
}

// XLMRLayout re-lays m out as an XLM-R sentencepiece.bpe.model: <unk>, <s>,
// </s> as pieces 0, 1, 2, then m's pieces that are neither control nor
// unknown, in order, with m's trainer and normalizer settings. It turns a
// T5 spiece.model (<pad>, </s>, <unk> first) into a vocabulary an XLM-R
// model of random init can use (`models init --arch xlm-roberta`, tests).
func XLMRLayout(m *Model) (*Model, error) {
	pieces := []Piece{{Piece: "<unk>", Type: Unknown}, {Piece: "<s>", Type: Control}, {Piece: "</s>", Type: Control}}
	for _, p := range m.pieces {
		if p.Type != Control && p.Type != Unknown {
			pieces = append(pieces, p)
		}
	}
	ts := m.trainer
	ts.UnkID, ts.BOSID, ts.EOSID, ts.PadID, ts.VocabSize = 0, 1, 2, -1, int32(len(pieces))
	return New(pieces, ts, m.normalizer)
}
