package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/label"
)

// labelICTOptions are the flags of `label ict`.
type labelICTOptions struct {
	Corpus          corpusFlags
	ICT             label.ICTOptions
	Out             string
	RandomNegatives bool
}

func newLabelICTCmd(g *globals) *cobra.Command {
	var o labelICTOptions
	cmd := &cobra.Command{
		Use:   "ict",
		Short: "Make self-supervised filter examples from the corpus alone (inverse cloze: a sentence is the question)",
		Long: `Draws --per-chunk sentences of each chunk as pseudo-questions (inverse cloze
task, Lee et al. 2019). For each, the chunk with that sentence removed is
[HELPFUL] evidence and the best BM25 hit of another document (--random-negatives:
a random chunk of another document) is [NOT_HELPFUL] evidence. Every chunk is
as often helpful as not, so only the question–evidence match predicts the
label: extra training data (train filter --augment) that keeps a randomly
initialised filter from memorising which chunks were helpful. No relevance
labels are used.`,
		Example: `  ragforge label ict --corpus ../shared/data/ap_protocols --per-chunk 2 --out work/labels-ict.jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLabelICT(cmdContext(cmd), g, o)
		},
	}
	o.Corpus.add(cmd)
	f := cmd.Flags()
	f.IntVar(&o.ICT.PerChunk, "per-chunk", 2, "pseudo-questions per chunk")
	f.IntVar(&o.ICT.MaxChunks, "max-chunks", 0, "draw pseudo-questions from this many sampled chunks only (0 = all)")
	f.IntVar(&o.ICT.MinWords, "min-words", 4, "shortest sentence (words) used as a pseudo-question")
	f.Float64Var(&o.ICT.Keep, "keep", 0, "fraction of pseudo-questions whose sentence stays in its [HELPFUL] evidence, in [0, 1] (0: always removed)")
	f.IntVar(&o.ICT.QueryWords, "query-words", 0, "cut each pseudo-question to a random span of at most N words (0: the whole sentence)")
	f.IntVar(&o.ICT.ContentWords, "content-words", 0, "write each pseudo-question as a wh-word and at most N of its content words (4+ letters), e.g. \"How fixative volume tissue?\" (0: the words as they are)")
	f.Float64Var(&o.ICT.DropWords, "drop-words", 0, "probability of dropping each word of a pseudo-question, in [0, 1)")
	f.IntVar(&o.ICT.NumNegatives, "negatives", 1, "[NOT_HELPFUL] chunks per pseudo-question (best BM25 hits of other documents first)")
	f.BoolVar(&o.RandomNegatives, "random-negatives", false, "negative evidence: a random chunk of another document instead of the best BM25 hit")
	f.Uint64Var(&o.ICT.Seed, "seed", 42, "sampling seed")
	f.StringVar(&o.Out, "out", "", "output file in the RAG² filter schema (.json or .jsonl) (required)")
	return cmd
}

func runLabelICT(ctx context.Context, g *globals, o labelICTOptions) (err error) {
	if o.Out == "" {
		return fmt.Errorf("--out is required")
	}
	if o.ICT.PerChunk < 1 {
		return fmt.Errorf("--per-chunk %d: want >= 1", o.ICT.PerChunk)
	}
	switch {
	case o.ICT.NumNegatives < 1:
		return fmt.Errorf("--negatives %d: want >= 1", o.ICT.NumNegatives)
	case o.ICT.Keep < 0 || o.ICT.Keep > 1:
		return fmt.Errorf("--keep %v: want a fraction in [0, 1]", o.ICT.Keep)
	case o.ICT.QueryWords < 0:
		return fmt.Errorf("--query-words %d: want >= 0 (0: the whole sentence)", o.ICT.QueryWords)
	case o.ICT.DropWords < 0 || o.ICT.DropWords >= 1:
		return fmt.Errorf("--drop-words %v: want a probability in [0, 1)", o.ICT.DropWords)
	case o.ICT.ContentWords < 0:
		return fmt.Errorf("--content-words %d: want >= 0 (0: the words as they are)", o.ICT.ContentWords)
	}
	j := label.ICTJob{ICT: o.ICT, RandomNegatives: o.RandomNegatives, Out: o.Out, Corpus: &o.Corpus}
	if err := j.Check(); err != nil {
		return err
	}
	_, chunks, err := o.Corpus.load(g)
	if err != nil {
		return err
	}
	r, start := startRunOf(g)
	defer r.finish(&err)
	res, err := label.RunICT(ctx, chunks, j, start)
	if err != nil {
		return err
	}
	return printLabels(g, res)
}
