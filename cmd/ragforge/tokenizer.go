package main

import (
	"context"
	"fmt"
	"path/filepath"

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

// tokenizerTrainResult is what --json prints.
type tokenizerTrainResult struct {
	RunID string `json:"run_id"`
	Kind  string `json:"kind"`
	Dir   string `json:"dir"`
	// Size is the trained vocabulary: Unigram pieces (before T5's 100
	// sentinels) or WordPiece tokens; it may be below --vocab-size.
	Size int `json:"size"`
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
// writes it in HF layout to o.Out, recorded as a run (kind
// tokenizer-train, its spiece.model or vocab.txt the artifact).
func runTokenizerTrain(_ context.Context, g *globals, o tokenizerTrainOptions) (err error) {
	if o.Out == "" {
		return fmt.Errorf("--out is required")
	}
	if o.Kind != "unigram" && o.Kind != "wordpiece" {
		return fmt.Errorf("--kind %q: want unigram or wordpiece", o.Kind)
	}
	o.Corpus.ChunkSize = 0
	st, run, err := startRun(g, "tokenizer-train", o)
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	res := tokenizerTrainResult{RunID: run.ID, Kind: o.Kind, Dir: o.Out}
	docs, _, err := o.Corpus.load(g)
	if err != nil {
		return err
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Text
	}
	var line string
	switch o.Kind {
	case "unigram":
		m, err := learn.TrainUnigram(texts, learn.UnigramOptions{VocabSize: o.VocabSize})
		if err != nil {
			return err
		}
		if err := learn.WriteT5Dir(o.Out, m); err != nil {
			return err
		}
		res.Size = m.Size()
		line = fmt.Sprintf("wrote a %d-piece Unigram tokenizer (+100 sentinels) to %s", m.Size(), o.Out)
	case "wordpiece":
		v, err := learn.TrainWordPiece(texts, learn.WordPieceOptions{VocabSize: o.VocabSize})
		if err != nil {
			return err
		}
		if err := learn.WriteBERTDir(o.Out, v, true); err != nil {
			return err
		}
		res.Size = len(v)
		line = fmt.Sprintf("wrote a %d-token WordPiece vocabulary to %s", len(v), o.Out)
	}
	file := "spiece.model"
	if o.Kind == "wordpiece" {
		file = "vocab.txt"
	}
	if err := run.Artifact("tokenizer", filepath.Join(o.Out, file)); err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, res)
	}
	fmt.Fprintf(g.Out, "run %s: %s\n", run.ID, line)
	return nil
}
