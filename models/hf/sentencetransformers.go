package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Files of a sentence-transformers model directory (SentenceTransformer.save).
const (
	STModulesFile   = "modules.json"
	STConfigFile    = "sentence_bert_config.json"
	STVersionFile   = "config_sentence_transformers.json"
	STPoolingDir    = "1_Pooling"
	STNormalizeDir  = "2_Normalize"
	TokenizerConfig = "tokenizer_config.json"
)

// STVersion is the sentence-transformers version the written files follow
// (the config_sentence_transformers.json layout with prompts and
// similarity_fn_name, sentence-transformers >= 3.0).
const STVersion = "3.0.0"

// SentenceTransformer describes a BERT bi-encoder as a sentence-transformers
// pipeline: Transformer (max_seq_length) → Pooling → optional Normalize.
type SentenceTransformer struct {
	Dim          int    // word_embedding_dimension: the encoder's hidden size
	Pooling      string // "cls" or "mean"
	Normalize    bool   // a 2_Normalize module (unit-length vectors)
	MaxSeqLength int    // tokens per text, [CLS] and [SEP] included
	// QueryPrompt and DocumentPrompt are prepended to queries and documents
	// (config_sentence_transformers.json "prompts" "query" and "document",
	// what encode_query / encode_document use); empty ones are left out.
	QueryPrompt, DocumentPrompt string
}

// Validate checks the fields; errors name the field.
func (s SentenceTransformer) Validate() error {
	switch {
	case s.Dim <= 0:
		return fmt.Errorf("sentence-transformers config: field %q: %d, want > 0", "Dim", s.Dim)
	case s.Pooling != "cls" && s.Pooling != "mean":
		return fmt.Errorf("sentence-transformers config: field %q: %q, want cls or mean", "Pooling", s.Pooling)
	case s.MaxSeqLength < 2:
		return fmt.Errorf("sentence-transformers config: field %q: %d, want >= 2", "MaxSeqLength", s.MaxSeqLength)
	}
	return nil
}

type stModule struct {
	Idx  int    `json:"idx"`
	Name string `json:"name"`
	Path string `json:"path"`
	Type string `json:"type"`
}

type stPooling struct {
	WordEmbeddingDimension       int  `json:"word_embedding_dimension"`
	PoolingModeCLSToken          bool `json:"pooling_mode_cls_token"`
	PoolingModeMeanTokens        bool `json:"pooling_mode_mean_tokens"`
	PoolingModeMaxTokens         bool `json:"pooling_mode_max_tokens"`
	PoolingModeMeanSqrtLenTokens bool `json:"pooling_mode_mean_sqrt_len_tokens"`
	PoolingModeWeightedMean      bool `json:"pooling_mode_weightedmean_tokens"`
	PoolingModeLastToken         bool `json:"pooling_mode_lasttoken"`
	IncludePrompt                bool `json:"include_prompt"`
}

// WriteSentenceTransformer adds the sentence-transformers files to dir, an
// HF BERT directory (config.json, weights, tokenizer files), so
// SentenceTransformer(dir) loads it and encodes as ragforge does:
//
//	modules.json                       Transformer (path ""), Pooling (1_Pooling), Normalize (2_Normalize, when s.Normalize)
//	1_Pooling/config.json              CLS or mean pooling over word_embedding_dimension s.Dim; include_prompt true
//	                                   (ragforge pools over the prefix tokens too)
//	2_Normalize/                       empty, as sentence-transformers saves it
//	sentence_bert_config.json          max_seq_length s.MaxSeqLength, do_lower_case false (the tokenizer lower-cases)
//	config_sentence_transformers.json  __version__, prompts, default_prompt_name null, similarity_fn_name cosine
//
// and sets model_max_length in dir/tokenizer_config.json (when present) to
// s.MaxSeqLength, the length ragforge truncates to. Errors: an invalid s,
// a malformed tokenizer_config.json, I/O errors.
func WriteSentenceTransformer(dir string, s SentenceTransformer) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("hf: write sentence-transformers files to %s: %w", dir, err)
	}
	modules := []stModule{
		{0, "0", "", "sentence_transformers.models.Transformer"},
		{1, "1", STPoolingDir, "sentence_transformers.models.Pooling"},
	}
	if s.Normalize {
		modules = append(modules, stModule{2, "2", STNormalizeDir, "sentence_transformers.models.Normalize"})
	}
	prompts := map[string]string{}
	if s.QueryPrompt != "" {
		prompts["query"] = s.QueryPrompt
	}
	if s.DocumentPrompt != "" {
		prompts["document"] = s.DocumentPrompt
	}
	for _, d := range []string{STPoolingDir, STNormalizeDir} {
		if d == STNormalizeDir && !s.Normalize {
			if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
				return fmt.Errorf("hf: %w", err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("hf: %w", err)
		}
	}
	files := []struct {
		path string
		v    any
	}{
		{filepath.Join(dir, STModulesFile), modules},
		{filepath.Join(dir, STPoolingDir, ConfigName), stPooling{
			WordEmbeddingDimension: s.Dim, PoolingModeCLSToken: s.Pooling == "cls", PoolingModeMeanTokens: s.Pooling == "mean",
			IncludePrompt: true,
		}},
		{filepath.Join(dir, STConfigFile), map[string]any{"max_seq_length": s.MaxSeqLength, "do_lower_case": false}},
		{filepath.Join(dir, STVersionFile), map[string]any{
			"__version__":         map[string]string{"sentence_transformers": STVersion},
			"prompts":             prompts,
			"default_prompt_name": nil,
			"similarity_fn_name":  "cosine",
		}},
	}
	for _, f := range files {
		if err := WriteJSON(f.path, f.v); err != nil {
			return err
		}
	}
	return SetModelMaxLength(dir, s.MaxSeqLength)
}

// SetModelMaxLength sets "model_max_length" in dir/tokenizer_config.json,
// keeping every other key; a directory without the file is left alone.
func SetModelMaxLength(dir string, n int) error {
	path := filepath.Join(dir, TokenizerConfig)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var cfg map[string]json.RawMessage
	if err := readJSON(path, &cfg); err != nil {
		return err
	}
	if cfg == nil {
		return fmt.Errorf("hf: read %s: top level is null, want a JSON object", path)
	}
	cfg["model_max_length"] = json.RawMessage(fmt.Sprint(n))
	return WriteJSON(path, cfg)
}

// Prompt names sentence-transformers looks up (sentence_transformers/
// SentenceTransformer.py, v5.1: encode_query uses "query"; encode_document
// the first of "document", "passage", "corpus" the model has; either falls
// back to default_prompt_name when none is there).
var (
	STQueryPromptName     = "query"
	STDocumentPromptNames = []string{"document", "passage", "corpus"}
)

// ReadSentenceTransformer reads the sentence-transformers description of
// dir, any encoder's (nothing here is BERT's). ok is false when dir has no
// modules.json. The prompts are resolved as SentenceTransformer.encode_query
// and encode_document resolve them (STQueryPromptName, STDocumentPromptNames,
// then default_prompt_name); MaxSeqLength is 0 when sentence_bert_config.json
// has none. Errors name the file: a pipeline that is not Transformer →
// Pooling (CLS or mean, include_prompt true) → optional Normalize,
// do_lower_case true (ragforge leaves casing to the tokenizer), a
// default_prompt_name without its prompt, malformed files.
func ReadSentenceTransformer(dir string) (s SentenceTransformer, ok bool, err error) {
	var modules []stModule
	if err := readJSON(filepath.Join(dir, STModulesFile), &modules); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return s, false, nil
		}
		return s, false, err
	}
	for i, m := range modules {
		switch m.Type {
		case "sentence_transformers.models.Transformer":
		case "sentence_transformers.models.Pooling":
			// include_prompt defaults to true in sentence-transformers.
			p := stPooling{IncludePrompt: true}
			path := filepath.Join(dir, m.Path, ConfigName)
			if err := readJSON(path, &p); err != nil {
				return s, false, err
			}
			s.Dim = p.WordEmbeddingDimension
			switch {
			case p.PoolingModeCLSToken && !p.PoolingModeMeanTokens:
				s.Pooling = "cls"
			case p.PoolingModeMeanTokens && !p.PoolingModeCLSToken:
				s.Pooling = "mean"
			}
			if s.Pooling == "" || p.PoolingModeMaxTokens || p.PoolingModeMeanSqrtLenTokens || p.PoolingModeWeightedMean || p.PoolingModeLastToken {
				return s, false, fmt.Errorf("hf: read %s: pooling: want exactly one of cls or mean tokens", path)
			}
			if !p.IncludePrompt {
				return s, false, fmt.Errorf("hf: read %s: field %q: false, ragforge pools over the prompt's tokens too (want true)", path, "include_prompt")
			}
		case "sentence_transformers.models.Normalize":
			s.Normalize = true
		default:
			return s, false, fmt.Errorf("hf: read %s: module %d: type %q is not Transformer, Pooling or Normalize", filepath.Join(dir, STModulesFile), i, m.Type)
		}
	}
	var sb struct {
		MaxSeqLength int  `json:"max_seq_length"`
		DoLowerCase  bool `json:"do_lower_case"`
	}
	if err := readJSON(filepath.Join(dir, STConfigFile), &sb); err != nil && !errors.Is(err, os.ErrNotExist) {
		return s, false, err
	}
	if sb.DoLowerCase {
		return s, false, fmt.Errorf("hf: read %s: field %q: true, ragforge leaves casing to the tokenizer (want false)", filepath.Join(dir, STConfigFile), "do_lower_case")
	}
	if sb.MaxSeqLength < 0 {
		return s, false, fmt.Errorf("hf: read %s: field %q: %d, want > 0", filepath.Join(dir, STConfigFile), "max_seq_length", sb.MaxSeqLength)
	}
	s.MaxSeqLength = sb.MaxSeqLength
	var v struct {
		Prompts           map[string]string `json:"prompts"`
		DefaultPromptName *string           `json:"default_prompt_name"`
	}
	path := filepath.Join(dir, STVersionFile)
	if err := readJSON(path, &v); err != nil && !errors.Is(err, os.ErrNotExist) {
		return s, false, err
	}
	var fallback string
	if v.DefaultPromptName != nil {
		p, ok := v.Prompts[*v.DefaultPromptName]
		if !ok {
			return s, false, fmt.Errorf("hf: read %s: field %q: %q is not in prompts", path, "default_prompt_name", *v.DefaultPromptName)
		}
		fallback = p
	}
	s.QueryPrompt = fallback
	if p, ok := v.Prompts[STQueryPromptName]; ok {
		s.QueryPrompt = p
	}
	s.DocumentPrompt = fallback
	for _, name := range STDocumentPromptNames {
		if p, ok := v.Prompts[name]; ok {
			s.DocumentPrompt = p
			break
		}
	}
	return s, true, nil
}
