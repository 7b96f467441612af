package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// encoderOptions say how a BERT bi-encoder encodes; `encode`, the dense
// retrievers of `eval` and `infer embed` share them, so a corpus encoded
// ahead of time and one encoded on the fly get the same vectors.
type encoderOptions struct {
	MaxLength     int    `json:"max_length"`
	BatchSize     int    `json:"batch_size"`
	QueryPrefix   string `json:"query_prefix,omitempty"`
	PassagePrefix string `json:"passage_prefix,omitempty"`
	Normalize     bool   `json:"normalize"`

	changed func(name string) bool // the command's Flags().Changed
}

func (o *encoderOptions) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.MaxLength, "max-length", encode.DefaultMaxLength, "encoder token limit, [CLS]/[SEP] included (texts are truncated; clamped to the model's max_position_embeddings)")
	f.IntVar(&o.BatchSize, "batch-size", encode.DefaultBatchSize, "texts per encoder forward pass")
	f.StringVar(&o.QueryPrefix, "query-prefix", "", `instruction prepended to queries (BGE: "`+encode.BGEQueryInstruction+`"; E5: "query: ")`)
	f.StringVar(&o.PassagePrefix, "passage-prefix", "", `instruction prepended to passages (E5: "passage: ")`)
	f.BoolVar(&o.Normalize, "normalize", true, "L2-normalize the vectors (cosine = inner product)")
	o.changed = cmd.Flags().Changed
}

func (o *encoderOptions) validate() error {
	if o.MaxLength < 2 {
		return fmt.Errorf("--max-length %d: want >= 2 ([CLS] and [SEP] need two tokens)", o.MaxLength)
	}
	if o.BatchSize < 1 {
		return fmt.Errorf("--batch-size %d: want >= 1", o.BatchSize)
	}
	return nil
}

// apply sets the options on enc.
func (o *encoderOptions) apply(enc *encode.BERTEncoder) {
	enc.MaxLength, enc.BatchSize = o.MaxLength, o.BatchSize
	enc.QueryInstruction, enc.DocInstruction = o.QueryPrefix, o.PassagePrefix
	enc.Normalize = o.Normalize
}

// matchInfo configures enc (loaded from dir with pooling) to encode queries
// as the pre-encoded corpus was encoded (info), so its vectors and the query
// vectors are comparable. A flag the user set to another value than info's
// is an error, as is an encoder whose weights differ from the corpus's.
func (o *encoderOptions) matchInfo(enc *encode.BERTEncoder, dir string, poolingChanged bool, info *data.EncodeInfo) error {
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
	changed := func(name string) bool { return o.changed != nil && o.changed(name) }
	conflicts := []struct {
		flag      string
		set       bool
		got, want any
	}{
		{"pooling", poolingChanged, string(enc.Pooling), info.Pooling},
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
