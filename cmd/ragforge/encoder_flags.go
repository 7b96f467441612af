package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/evalrun"
)

// encoderOptions are evalrun.Encoder from the encoder flags; `encode`, the
// dense retrievers of `eval` and `infer embed` share them.
type encoderOptions struct{ evalrun.Encoder }

func (o *encoderOptions) add(cmd *cobra.Command) { addEncoderFlags(cmd, &o.Encoder) }

func addEncoderFlags(cmd *cobra.Command, o *evalrun.Encoder) {
	f := cmd.Flags()
	f.StringVar(&o.Pooling, "pooling", "", "pooling: cls (BGE, MedEmbed, MedCPT) | mean (sentence-transformers) (default: the encoder's 1_Pooling/config.json, else cls)")
	f.IntVar(&o.MaxLength, "max-length", encode.DefaultMaxLength, "encoder token limit, [CLS]/[SEP] and the prompt included (texts are truncated after the prompt is prepended; clamped to the model's max_position_embeddings) (default: the encoder's sentence_bert_config.json max_seq_length, else 512)")
	f.IntVar(&o.BatchSize, "batch-size", encode.DefaultBatchSize, "texts per encoder forward pass")
	f.StringVar(&o.QueryPrefix, "query-prefix", "", `instruction prepended to queries (BGE: "`+encode.BGEQueryInstruction+`"; E5: "query: ") (default: the encoder's "query" prompt, config_sentence_transformers.json)`)
	f.StringVar(&o.PassagePrefix, "passage-prefix", "", `instruction prepended to passages (E5: "passage: ") (default: the encoder's "document", "passage" or "corpus" prompt)`)
	f.BoolVar(&o.Normalize, "normalize", true, "L2-normalize the vectors (cosine = inner product) (default: whether the encoder has a 2_Normalize module, else true)")
	o.Given = cmd.Flags().Changed
}

func (o *encoderOptions) validate() error           { return o.Check() }
func (o *encoderOptions) resolve(dir string) error  { return o.Resolve(dir) }
func (o *encoderOptions) settings() encode.Settings { return o.Settings() }

// apply sets the resolved options on enc and prints to w the flags that
// overrode the directory's settings.
func (o *encoderOptions) apply(enc *encode.BERTEncoder, w io.Writer) { o.Apply(enc, w) }
