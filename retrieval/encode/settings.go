package encode

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
)

// Settings say how a bi-encoder turns a text into a vector, as a
// sentence-transformers directory declares it (hf.ReadSentenceTransformer):
// the prompt (QueryPrefix for queries, PassagePrefix for documents) is
// prepended, the result is tokenized and truncated to MaxLength tokens
// ([CLS] and [SEP] included), pooled and, with Normalize, L2-normalized —
// SentenceTransformer.encode_query / encode_document's order
// (sentence_transformers/SentenceTransformer.py and models/Transformer.py,
// v5.1: the prompt is prepended before tokenizing, so it counts against
// max_seq_length). The JSON names are those of data.EncodeInfo.
type Settings struct {
	Pooling       bert.Pooling `json:"pooling"`
	Normalize     bool         `json:"normalize"`
	MaxLength     int          `json:"max_length"`
	QueryPrefix   string       `json:"query_prefix"`
	PassagePrefix string       `json:"passage_prefix"`
}

// Where a setting's value came from.
const (
	SourceModel   = "model"   // the encoder directory's sentence-transformers files
	SourceDefault = "default" // ragforge's default: the directory declares none
	SourceFlag    = "flag"    // a command-line flag overrode the directory's
)

// Setting names: the JSON names of Settings, in the order they are listed.
var SettingNames = []string{"pooling", "normalize", "max_length", "query_prefix", "passage_prefix"}

// Sources say, per setting, where its value came from (SourceModel,
// SourceDefault or SourceFlag); ragforge_encode.json records them.
type Sources = data.EncodeSources

// DefaultSettings are ragforge's settings for a bare HF BERT directory (no
// sentence-transformers files): CLS pooling, normalized (BGE, MedCPT),
// DefaultMaxLength tokens, no prompts.
func DefaultSettings() Settings {
	return Settings{Pooling: bert.PoolCLS, Normalize: true, MaxLength: DefaultMaxLength}
}

// DirSettings reads the settings an encoder directory declares in its
// sentence-transformers files (modules.json, 1_Pooling/config.json,
// 2_Normalize, sentence_bert_config.json max_seq_length,
// config_sentence_transformers.json prompts and default_prompt_name) and
// where each came from. It is model-agnostic (any encoder's directory) and
// the one place every consumer (encode, infer embed, eval, selflearn,
// pipeline build, serve, export) takes its defaults from. A directory
// without the files gets DefaultSettings, all SourceDefault; one without
// max_seq_length gets DefaultMaxLength for it (sentence-transformers would
// take min(max_position_embeddings, model_max_length), 512 for BERT).
// Errors: malformed or unsupported files, naming the file.
func DirSettings(dir string) (Settings, Sources, error) {
	s := DefaultSettings()
	var src Sources
	for _, n := range SettingNames {
		src.Set(n, SourceDefault)
	}
	st, ok, err := hf.ReadSentenceTransformer(dir)
	if err != nil {
		return s, src, fmt.Errorf("encoder %s: settings: %w", dir, err)
	}
	if !ok {
		return s, src, nil
	}
	s.Pooling, s.Normalize, s.QueryPrefix, s.PassagePrefix = bert.Pooling(st.Pooling), st.Normalize, st.QueryPrompt, st.DocumentPrompt
	for _, n := range []string{"pooling", "normalize", "query_prefix", "passage_prefix"} {
		src.Set(n, SourceModel)
	}
	if st.MaxSeqLength > 0 {
		s.MaxLength, src.MaxLength = st.MaxSeqLength, SourceModel
	}
	return s, src, nil
}

// Apply sets s on e.
func (e *BERTEncoder) Apply(s Settings) {
	e.Pooling, e.Normalize, e.MaxLength = s.Pooling, s.Normalize, s.MaxLength
	e.QueryInstruction, e.DocInstruction = s.QueryPrefix, s.PassagePrefix
}
