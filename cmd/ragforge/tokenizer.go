package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/models/tokenizer/learn"
)

// tokenizerTrainOptions are the flags of `tokenizer train`.
type tokenizerTrainOptions struct {
	Corpus    corpusFlags `json:"corpus"`
	Kind      string      `json:"kind"` // unigram | wordpiece
	VocabSize int         `json:"vocab_size"`
	Out       string      `json:"out"`
}

func newTokenizerTrainCmd(g *globals) *cobra.Command {
	var o tokenizerTrainOptions
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train a SentencePiece Unigram (T5) or WordPiece (BERT) tokenizer on a corpus and write it in HF layout",
		Long: `Trains on the corpus documents' text (no chunking):
  unigram    SentencePiece Unigram as spm_train does it (seed substrings,
             EM, pruning), nmt_nfkc normalization, T5 specials and 100
             sentinels: writes spiece.model and the T5 tokenizer json files
  wordpiece  BERT WordPiece (lower-cased, accents stripped): writes vocab.txt
             and tokenizer_config.json
The vocabulary may come out smaller than --vocab-size on a small corpus.`,
		Example: `  ragforge tokenizer train --corpus ../shared/data/ap_protocols --kind unigram --vocab-size 4000 --out work/spm-ap`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTokenizerTrain(cmd.Context(), g, o)
		},
	}
	o.Corpus.add(cmd)
	f := cmd.Flags()
	f.StringVar(&o.Kind, "kind", "unigram", "tokenizer: unigram (T5) | wordpiece (BERT)")
	f.IntVar(&o.VocabSize, "vocab-size", 2000, "vocabulary size (specials included)")
	f.StringVar(&o.Out, "out", "", "output directory (required)")
	return cmd
}

// runTokenizerTrain trains a tokenizer on the corpus documents' text and
// writes it in HF layout to o.Out (learn.Train), recorded as a run.
func runTokenizerTrain(_ context.Context, g *globals, o tokenizerTrainOptions) (err error) {
	o.Corpus.ChunkSize = 0
	cfg := learn.TrainConfig{Corpus: o.Corpus, Kind: o.Kind, VocabSize: o.VocabSize, Out: o.Out} // the flags as given, before loading
	if err := cfg.Check(); err != nil {
		return err
	}
	docs, _, err := o.Corpus.load(g)
	if err != nil {
		return err
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Text
	}
	r, start := startRunOf(g)
	defer r.finish(&err)
	res, err := learn.Train(texts, cfg, start)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, res)
	}
	fmt.Fprintf(g.Out, "run %s: %s\n", res.RunID, res.Line)
	return nil
}
