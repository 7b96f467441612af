package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// encoderOptions say how a BERT bi-encoder encodes; `encode`, the dense
// retrievers of `eval` and `infer embed` share them, so a corpus encoded
// ahead of time and one encoded on the fly get the same vectors. Every
// setting defaults to what the encoder directory declares
// (encode.DirSettings: its sentence-transformers files); a flag overrides
// one value, says so on stderr, and Sources records which came from where.
type encoderOptions struct {
	Pooling       string `json:"pooling"`
	MaxLength     int    `json:"max_length"`
	BatchSize     int    `json:"batch_size"`
	QueryPrefix   string `json:"query_prefix"`
	PassagePrefix string `json:"passage_prefix"`
	Normalize     bool   `json:"normalize"`
	// Sources is where each setting came from (model, flag or default),
	// set by resolve.
	Sources encode.Sources `json:"sources,omitzero"`

	changed func(name string) bool // the command's Flags().Changed
	notes   []string               // overrides resolve found, printed by apply
}

func (o *encoderOptions) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Pooling, "pooling", "", "pooling: cls (BGE, MedEmbed, MedCPT) | mean (sentence-transformers) (default: the encoder's 1_Pooling/config.json, else cls)")
	f.IntVar(&o.MaxLength, "max-length", encode.DefaultMaxLength, "encoder token limit, [CLS]/[SEP] and the prompt included (texts are truncated after the prompt is prepended; clamped to the model's max_position_embeddings) (default: the encoder's sentence_bert_config.json max_seq_length, else 512)")
	f.IntVar(&o.BatchSize, "batch-size", encode.DefaultBatchSize, "texts per encoder forward pass")
	f.StringVar(&o.QueryPrefix, "query-prefix", "", `instruction prepended to queries (BGE: "`+encode.BGEQueryInstruction+`"; E5: "query: ") (default: the encoder's "query" prompt, config_sentence_transformers.json)`)
	f.StringVar(&o.PassagePrefix, "passage-prefix", "", `instruction prepended to passages (E5: "passage: ") (default: the encoder's "document", "passage" or "corpus" prompt)`)
	f.BoolVar(&o.Normalize, "normalize", true, "L2-normalize the vectors (cosine = inner product) (default: whether the encoder has a 2_Normalize module, else true)")
	o.changed = cmd.Flags().Changed
}

func (o *encoderOptions) validate() error {
	if o.Pooling != "" && !bert.Pooling(o.Pooling).Valid() {
		return fmt.Errorf("--pooling %q: want cls or mean", o.Pooling)
	}
	if o.MaxLength < 2 {
		return fmt.Errorf("--max-length %d: want >= 2 ([CLS] and [SEP] need two tokens)", o.MaxLength)
	}
	if o.BatchSize < 1 {
		return fmt.Errorf("--batch-size %d: want >= 1", o.BatchSize)
	}
	return nil
}

func (o *encoderOptions) flagSet(name string) bool { return o.changed != nil && o.changed(name) }

// resolve fills the settings no flag set with what the encoder directory
// dir declares (encode.DirSettings), records each one's source, and keeps a
// note for every flag that overrides the directory's value. Errors:
// malformed sentence-transformers files.
func (o *encoderOptions) resolve(dir string) error {
	s, src, err := encode.DirSettings(dir)
	if err != nil {
		return err
	}
	o.notes = nil
	// got is the flag's value (before set replaces it), model the directory's.
	for _, v := range []struct {
		flag, name, got, model string
		set                    func()
	}{
		{"pooling", "pooling", shown(o.Pooling), shown(string(s.Pooling)), func() { o.Pooling = string(s.Pooling) }},
		{"normalize", "normalize", shown(o.Normalize), shown(s.Normalize), func() { o.Normalize = s.Normalize }},
		{"max-length", "max_length", shown(o.MaxLength), shown(s.MaxLength), func() { o.MaxLength = s.MaxLength }},
		{"query-prefix", "query_prefix", shown(o.QueryPrefix), shown(s.QueryPrefix), func() { o.QueryPrefix = s.QueryPrefix }},
		{"passage-prefix", "passage_prefix", shown(o.PassagePrefix), shown(s.PassagePrefix), func() { o.PassagePrefix = s.PassagePrefix }},
	} {
		if !o.flagSet(v.flag) {
			v.set()
			continue
		}
		from := "the model's"
		if src.Get(v.name) == encode.SourceDefault {
			from = "ragforge's default"
		}
		o.notes = append(o.notes, fmt.Sprintf("encoder %s: --%s %s overrides %s %s", dir, v.flag, v.got, from, v.model))
		src.Set(v.name, encode.SourceFlag)
	}
	o.Sources = src
	return nil
}

// shown writes a setting's value for a message: strings quoted.
func shown(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// settings are the options as encode.Settings.
func (o *encoderOptions) settings() encode.Settings {
	return encode.Settings{Pooling: bert.Pooling(o.Pooling), Normalize: o.Normalize, MaxLength: o.MaxLength,
		QueryPrefix: o.QueryPrefix, PassagePrefix: o.PassagePrefix}
}

// apply sets the options (resolved against the encoder's directory) on enc
// and prints to w the flags that overrode the directory's settings.
func (o *encoderOptions) apply(enc *encode.BERTEncoder, w io.Writer) {
	enc.Apply(o.settings())
	enc.BatchSize = o.BatchSize
	for _, n := range o.notes {
		fmt.Fprintln(w, n)
	}
	o.notes = nil
}

// matchInfo configures enc (loaded from dir with pooling) to encode queries
// as the pre-encoded corpus was encoded (info), so its vectors and the query
// vectors are comparable. A flag the user set to another value than info's
// is an error, as is an encoder whose weights differ from the corpus's.
func (o *encoderOptions) matchInfo(enc *encode.BERTEncoder, dir string, info *data.EncodeInfo) error {
	if info == nil {
		return nil
	}
	sum, err := encode.WeightsSHA256(dir)
	if err != nil {
		return err
	}
	if info.WeightsSHA256 != "" && sum != "" && sum != info.WeightsSHA256 {
		return fmt.Errorf("--encoder %s: weights differ from those the corpus was encoded with (%s, sha256 %s)", dir, info.Encoder, info.WeightsSHA256)
	}
	changed := o.flagSet
	conflicts := []struct {
		flag      string
		set       bool
		got, want any
	}{
		{"pooling", changed("pooling"), string(enc.Pooling), info.Pooling},
		{"max-length", changed("max-length"), enc.MaxTokens(), info.MaxLength},
		{"query-prefix", changed("query-prefix"), o.QueryPrefix, info.QueryPrefix},
		{"passage-prefix", changed("passage-prefix"), o.PassagePrefix, info.PassagePrefix},
		{"normalize", changed("normalize"), o.Normalize, info.Normalize},
	}
	for _, c := range conflicts {
		if c.set && c.got != c.want {
			return fmt.Errorf("--%s %v: the pre-encoded corpus was encoded with %v (%s)", c.flag, c.got, c.want, data.EncodeInfoFile)
		}
	}
	if p := bert.Pooling(info.Pooling); p.Valid() {
		enc.Pooling = p
	} else if info.Pooling != "" {
		return fmt.Errorf("%s: field %q: %q, want cls or mean", data.EncodeInfoFile, "pooling", info.Pooling)
	}
	if info.MaxLength > 0 {
		enc.MaxLength = info.MaxLength
	}
	enc.QueryInstruction, enc.DocInstruction, enc.Normalize = info.QueryPrefix, info.PassagePrefix, info.Normalize
	return nil
}
