package main

import (
	"fmt"

	"github.com/spf13/cobra"

	tktrain "github.com/ragforge/ragforge/models/tokenizer/train"
)

func init() { register(newTokenizerCmd) }

func newTokenizerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tokenizer", Short: "Train tokenizers on a corpus"}
	var (
		corpus    corpusFlags
		kind, out string
		vocab     int
	)
	train := &cobra.Command{
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
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			corpus.ChunkSize = 0
			docs, _, err := corpus.load(g)
			if err != nil {
				return err
			}
			texts := make([]string, len(docs))
			for i, d := range docs {
				texts[i] = d.Text
			}
			switch kind {
			case "unigram":
				m, err := tktrain.TrainUnigram(texts, tktrain.UnigramOptions{VocabSize: vocab})
				if err != nil {
					return err
				}
				if err := tktrain.WriteT5Dir(out, m); err != nil {
					return err
				}
				fmt.Fprintf(g.Out, "wrote a %d-piece Unigram tokenizer (+100 sentinels) to %s\n", m.Size(), out)
			case "wordpiece":
				v, err := tktrain.TrainWordPiece(texts, tktrain.WordPieceOptions{VocabSize: vocab})
				if err != nil {
					return err
				}
				if err := tktrain.WriteBERTDir(out, v, true); err != nil {
					return err
				}
				fmt.Fprintf(g.Out, "wrote a %d-token WordPiece vocabulary to %s\n", len(v), out)
			default:
				return fmt.Errorf("--kind %q: want unigram or wordpiece", kind)
			}
			return nil
		},
	}
	corpus.add(train)
	f := train.Flags()
	f.StringVar(&kind, "kind", "unigram", "tokenizer: unigram (T5) | wordpiece (BERT)")
	f.IntVar(&vocab, "vocab-size", 2000, "vocabulary size (specials included)")
	f.StringVar(&out, "out", "", "output directory (required)")
	cmd.AddCommand(train)
	return cmd
}
