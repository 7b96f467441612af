// Package bpe is the byte-level BPE tokenizer of GPT-2-style tokenizer.json
// files (Llama 3, Qwen2/Qwen3), with HF tokenizers semantics: added tokens
// split out first, the declared normalizer, the Split/ByteLevel
// pre-tokenizer (regex emulated in Go RE2), BPE by merge rank with a cache,
// the declared post-processor, and byte-level decoding. Chat templates from
// tokenizer_config.json are rendered by ApplyChatTemplate.
package bpe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/ragforge/ragforge/models/tokenizer/chat"
	"github.com/ragforge/ragforge/models/tokenizer/internal/addedtokens"
	"github.com/ragforge/ragforge/models/tokenizer/internal/postprocess"
)

// File names in an HF tokenizer directory.
const (
	TokenizerFile    = "tokenizer.json"
	ConfigFile       = addedtokens.ConfigFile
	ChatTemplateFile = "chat_template.jinja" // transformers >= 4.50
)

// Tokenizer is a byte-level BPE tokenizer read from tokenizer.json (and the
// special tokens, cleanup flag and chat template of tokenizer_config.json).
// It is safe for concurrent use except AddTokens.
type Tokenizer struct {
	m     *model
	norms []normalizer
	// splits are the Split pre-tokenizers in order; prefixSpace is ByteLevel's add_prefix_space.
	splits      []*splitter
	prefixSpace bool
	post        *postprocess.Processor

	added     []addedtokens.Pattern // in id order
	addedByID map[int]int           // id → index into added
	addedIDs  map[string]int        // content → id
	rawMatch  *addedtokens.Matcher  // normalized: false tokens, matched in the raw text
	normMatch *addedtokens.Matcher  // normalized: true tokens, matched after normalization

	cfg  Config
	doc  map[string]json.RawMessage // the file's nodes, rewritten by Save
	rawC map[string]json.RawMessage // tokenizer_config.json, nil when absent
}

// Config is what tokenizer_config.json adds to tokenizer.json.
type Config struct {
	BOSToken, EOSToken, PadToken, UnkToken string // "" when null or absent
	// CleanUp is clean_up_tokenization_spaces (transformers' default false
	// for these tokenizers when absent).
	CleanUp bool
	// ChatTemplate is the Jinja chat_template, "" when absent.
	ChatTemplate string
}

// Load reads dir/tokenizer.json and, when present, dir/tokenizer_config.json
// and (for a config without chat_template) dir/chat_template.jinja.
func Load(dir string) (*Tokenizer, error) {
	path := filepath.Join(dir, TokenizerFile)
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load bpe tokenizer: %w", err)
	}
	cpath := filepath.Join(dir, ConfigFile)
	cbuf, err := os.ReadFile(cpath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load bpe tokenizer: %w", err)
	}
	t, err := New(buf, cbuf)
	if err != nil {
		if cbuf != nil && errors.Is(err, errConfig) {
			return nil, fmt.Errorf("load %s: %w", cpath, err)
		}
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	if t.cfg.ChatTemplate == "" {
		// transformers >= 4.50 saves the template beside the config.
		tpath := filepath.Join(dir, ChatTemplateFile)
		b, err := os.ReadFile(tpath)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("load bpe tokenizer: %w", err)
		}
		t.cfg.ChatTemplate = string(b)
	}
	return t, nil
}

var errConfig = errors.New("tokenizer_config.json")

// New builds a tokenizer from tokenizer.json bytes and tokenizer_config.json
// bytes (nil when there is none). Errors name the field at fault; a model,
// normalizer, pre-tokenizer, post-processor or decoder this package does not
// implement is refused by its type name.
func New(tokenizerJSON, configJSON []byte) (*Tokenizer, error) {
	t := &Tokenizer{}
	if err := json.Unmarshal(tokenizerJSON, &t.doc); err != nil {
		return nil, err
	}
	var err error
	if t.m, err = newModel(t.doc["model"]); err != nil {
		return nil, err
	}
	if t.norms, err = parseNormalizer(t.doc["normalizer"]); err != nil {
		return nil, fmt.Errorf("field %q: %w", "normalizer", err)
	}
	if n, err := t.parsePreTokenizer(t.doc["pre_tokenizer"]); err != nil || n != 1 {
		if err == nil {
			err = fmt.Errorf("%d ByteLevel pre-tokenizers, want 1", n)
		}
		return nil, fmt.Errorf("field %q: %w", "pre_tokenizer", err)
	}
	if err := checkDecoder(t.doc["decoder"]); err != nil {
		return nil, fmt.Errorf("field %q: %w", "decoder", err)
	}
	var added []addedtokens.Pattern
	if raw := t.doc["added_tokens"]; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &added); err != nil {
			return nil, fmt.Errorf("field %q: %w", "added_tokens", err)
		}
	}
	t.setAdded(added)
	if t.post, err = postprocess.Parse(t.doc["post_processor"], t.TokenToID); err != nil {
		return nil, err
	}
	if configJSON != nil {
		if err := json.Unmarshal(configJSON, &t.rawC); err != nil {
			return nil, fmt.Errorf("%w: %w", errConfig, err)
		}
		if t.cfg, err = parseConfig(t.rawC); err != nil {
			return nil, fmt.Errorf("%w: %w", errConfig, err)
		}
		for _, tok := range []string{t.cfg.BOSToken, t.cfg.EOSToken, t.cfg.PadToken, t.cfg.UnkToken} {
			if _, ok := t.TokenToID(tok); tok != "" && !ok {
				return nil, fmt.Errorf("%w: special token %q is not in the vocabulary", errConfig, tok)
			}
		}
	}
	return t, nil
}

// parseConfig reads the special tokens (strings or AddedToken objects),
// clean_up_tokenization_spaces and chat_template.
func parseConfig(c map[string]json.RawMessage) (Config, error) {
	var cfg Config
	tok := func(key string, dst *string) error {
		raw, ok := c[key]
		if !ok || string(raw) == "null" {
			return nil
		}
		if json.Unmarshal(raw, dst) == nil {
			return nil
		}
		var obj struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
		*dst = obj.Content
		return nil
	}
	for key, dst := range map[string]*string{"bos_token": &cfg.BOSToken, "eos_token": &cfg.EOSToken, "pad_token": &cfg.PadToken, "unk_token": &cfg.UnkToken} {
		if err := tok(key, dst); err != nil {
			return cfg, err
		}
	}
	if raw, ok := c["clean_up_tokenization_spaces"]; ok {
		if err := json.Unmarshal(raw, &cfg.CleanUp); err != nil {
			return cfg, fmt.Errorf("field %q: %w", "clean_up_tokenization_spaces", err)
		}
	}
	if raw, ok := c["chat_template"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &cfg.ChatTemplate); err != nil {
			// transformers >= 4.43 saves several as [{name, template}]; the
			// one named "default" is apply_chat_template's.
			var named []struct{ Name, Template string }
			if err := json.Unmarshal(raw, &named); err != nil {
				return cfg, fmt.Errorf("field %q: want a template string or a list of {name, template}: %w", "chat_template", err)
			}
			for _, n := range named {
				if n.Name == "default" {
					cfg.ChatTemplate = n.Template
				}
			}
		}
	}
	return cfg, nil
}

// parsePreTokenizer accepts ByteLevel alone (use_regex: GPT-2's pattern) or a
// Sequence of Split (behavior Isolated, not inverted) nodes and one
// ByteLevel; it returns the number of ByteLevel nodes it read.
func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage) (int, error) {
	var n struct {
		Type           string            `json:"type"`
		Pretokenizers  []json.RawMessage `json:"pretokenizers"`
		AddPrefixSpace bool              `json:"add_prefix_space"`
		UseRegex       bool              `json:"use_regex"`
		Pattern        struct {
			Regex  *string `json:"Regex"`
			String *string `json:"String"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, err
	}
	switch n.Type {
	case "Sequence":
		total := 0
		for i, c := range n.Pretokenizers {
			k, err := t.parsePreTokenizer(c)
			if err != nil {
				return 0, fmt.Errorf("pretokenizers[%d]: %w", i, err)
			}
			if k > 0 && i != len(n.Pretokenizers)-1 {
				return 0, fmt.Errorf("pretokenizers[%d]: ByteLevel must come last", i)
			}
			total += k
		}
		return total, nil
	case "Split":
		if n.Behavior != "Isolated" || n.Invert {
			return 0, fmt.Errorf("Split behavior %q invert %v not supported (Isolated, not inverted)", n.Behavior, n.Invert)
		}
		var pat string
		switch {
		case n.Pattern.Regex != nil:
			pat = *n.Pattern.Regex
		case n.Pattern.String != nil:
			pat = regexp.QuoteMeta(*n.Pattern.String)
		default:
			return 0, errors.New("Split without a Regex or String pattern")
		}
		sp, err := compileSplit(pat)
		if err != nil {
			return 0, fmt.Errorf("Split: %w", err)
		}
		t.splits = append(t.splits, sp)
		return 0, nil
	case "ByteLevel":
		t.prefixSpace = n.AddPrefixSpace
		if n.UseRegex {
			sp, err := compileSplit(gpt2Pattern)
			if err != nil {
				return 0, err
			}
			t.splits = append(t.splits, sp)
		}
		return 1, nil
	}
	return 0, fmt.Errorf("type %q not supported (ByteLevel, Split, Sequence)", n.Type)
}

// checkDecoder accepts a ByteLevel decoder, alone or in a Sequence.
func checkDecoder(raw json.RawMessage) error {
	var n struct {
		Type     string            `json:"type"`
		Decoders []json.RawMessage `json:"decoders"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		return errors.New("null: a byte-level BPE needs the ByteLevel decoder")
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return err
	}
	switch n.Type {
	case "ByteLevel":
		return nil
	case "Sequence":
		if len(n.Decoders) == 1 {
			return checkDecoder(n.Decoders[0])
		}
	}
	return fmt.Errorf("type %q not supported (ByteLevel)", n.Type)
}

// setAdded installs the added tokens and rebuilds the two matchers.
func (t *Tokenizer) setAdded(added []addedtokens.Pattern) {
	slices.SortStableFunc(added, func(a, b addedtokens.Pattern) int { return a.ID - b.ID })
	t.added = added
	t.addedByID = make(map[int]int, len(added))
	t.addedIDs = make(map[string]int, len(added))
	var raw, normed []addedtokens.Pattern
	for i, a := range added {
		t.addedByID[a.ID] = i
		t.addedIDs[a.Content] = a.ID
		if a.Normalized {
			n := t.normalize(a.Content, 0)
			a.Content = n.s
			normed = append(normed, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.rawMatch = addedtokens.NewMatcher(raw)
	t.normMatch = nil
	if len(normed) > 0 {
		t.normMatch = addedtokens.NewMatcher(normed)
	}
}

// Config returns what tokenizer_config.json declared.
func (t *Tokenizer) Config() Config { return t.cfg }

// ApplyChatTemplate renders messages with tokenizer_config.json's
// chat_template (see package chat), with this tokenizer's bos/eos tokens.
func (t *Tokenizer) ApplyChatTemplate(messages []chat.Message, addGenerationPrompt bool) (string, error) {
	tmpl, err := chat.Compile(t.cfg.ChatTemplate)
	if err != nil {
		return "", err
	}
	return tmpl.Apply(messages, addGenerationPrompt, chat.Tokens{BOS: t.cfg.BOSToken, EOS: t.cfg.EOSToken})
}
