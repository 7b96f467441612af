package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/retrieval/bm25"
)

func newLabelICTCmd(g *globals) *cobra.Command {
	var (
		corpus corpusFlags
		opt    label.ICTOptions
		out    string
		random bool
	)
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
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			if opt.PerChunk < 1 {
				return fmt.Errorf("--per-chunk %d: want >= 1", opt.PerChunk)
			}
			switch {
			case opt.NumNegatives < 1:
				return fmt.Errorf("--negatives %d: want >= 1", opt.NumNegatives)
			case opt.Keep < 0 || opt.Keep > 1:
				return fmt.Errorf("--keep %v: want a fraction in [0, 1]", opt.Keep)
			case opt.QueryWords < 0:
				return fmt.Errorf("--query-words %d: want >= 0 (0: the whole sentence)", opt.QueryWords)
			case opt.DropWords < 0 || opt.DropWords >= 1:
				return fmt.Errorf("--drop-words %v: want a probability in [0, 1)", opt.DropWords)
			}
			if err := opt.Validate(); err != nil {
				return fmt.Errorf("label ict: %w", err)
			}
			format, err := label.FormatOf("", out)
			if err != nil {
				return err
			}
			_, chunks, err := corpus.load(g)
			if err != nil {
				return err
			}
			if !random {
				idx, err := bm25.NewMemory(chunks, bm25.DefaultConfig())
				if err != nil {
					return err
				}
				defer idx.Close()
				opt.Negatives = idx
			}
			st, run, err := startRun(g, "label-ict", map[string]any{"corpus": corpus, "per_chunk": opt.PerChunk, "max_chunks": opt.MaxChunks, "min_words": opt.MinWords,
				"keep": opt.Keep, "query_words": opt.QueryWords, "drop_words": opt.DropWords, "negatives": opt.NumNegatives,
				"random_negatives": random, "seed": opt.Seed, "out": out})
			if err != nil {
				return err
			}
			defer st.Close()
			defer finishRun(run, &err)
			ex, err := label.ICTExamples(cmdContext(cmd), chunks, opt)
			if err != nil {
				return err
			}
			if err := label.WriteExamples(out, format, ex); err != nil {
				return err
			}
			if err := run.Artifact("labels", out); err != nil {
				return err
			}
			counts := map[string]int{}
			for _, e := range ex {
				counts[e.Answer]++
			}
			for k, v := range counts {
				if err := run.Metric("labels_"+map[string]string{label.Helpful: "helpful", label.NotHelpful: "not_helpful"}[k], 0, float64(v)); err != nil {
					return err
				}
			}
			return labelResult{RunID: run.ID, Labels: len(ex), Counts: counts, Out: out}.print(g)
		},
	}
	corpus.add(cmd)
	f := cmd.Flags()
	f.IntVar(&opt.PerChunk, "per-chunk", 2, "pseudo-questions per chunk")
	f.IntVar(&opt.MaxChunks, "max-chunks", 0, "draw pseudo-questions from this many sampled chunks only (0 = all)")
	f.IntVar(&opt.MinWords, "min-words", 4, "shortest sentence (words) used as a pseudo-question")
	f.Float64Var(&opt.Keep, "keep", 0, "fraction of pseudo-questions whose sentence stays in its [HELPFUL] evidence, in [0, 1] (0: always removed)")
	f.IntVar(&opt.QueryWords, "query-words", 0, "cut each pseudo-question to a random span of at most N words (0: the whole sentence)")
	f.Float64Var(&opt.DropWords, "drop-words", 0, "probability of dropping each word of a pseudo-question, in [0, 1)")
	f.IntVar(&opt.NumNegatives, "negatives", 1, "[NOT_HELPFUL] chunks per pseudo-question (best BM25 hits of other documents first)")
	f.BoolVar(&random, "random-negatives", false, "negative evidence: a random chunk of another document instead of the best BM25 hit")
	f.Uint64Var(&opt.Seed, "seed", 42, "sampling seed")
	f.StringVar(&out, "out", "", "output file in the RAG² filter schema (.json or .jsonl) (required)")
	return cmd
}
