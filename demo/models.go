package demo

import (
	"context"
	"strings"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/modelinit"
	"github.com/ragforge/ragforge/models/tokenizer/learn"
	"github.com/ragforge/ragforge/retrieval/evalrun"
)

// trainTokenizers trains a SentencePiece Unigram (T5) and a WordPiece
// (BERT) tokenizer on the corpus, so the demo needs no downloaded
// vocabulary.
func trainTokenizers(ctx context.Context, st *state) (Stage, error) {
	corpus := evalrun.DefaultCorpus(st.corpus) // recorded as the command's flags give it
	docs, _, err := st.load(0, st.o.Overlap)   // whole documents
	if err != nil {
		return Stage{}, err
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.Text
	}
	var cmds []string
	for _, t := range []struct {
		kind, name string
		vocab      int
	}{{"unigram", "spm", 2000}, {"wordpiece", "wordpiece", 1500}} {
		out := st.fresh("tokenizers", t.name)
		cfg := learn.TrainConfig{Corpus: corpus, Kind: t.kind, VocabSize: t.vocab, Out: out}
		if err := st.record(func(start tracker.Starter) error {
			_, err := learn.Train(texts, cfg, start)
			return err
		}); err != nil {
			return Stage{}, err
		}
		st.dirs[t.name] = out
		cmds = append(cmds, st.command("tokenizer", "train", "--corpus", st.corpus, "--kind", t.kind, "--vocab-size", itoa(t.vocab), "--out", out))
	}
	return Stage{Command: strings.Join(cmds, "\n  "), Artifacts: []string{st.dirs["spm"], st.dirs["wordpiece"]}}, nil
}

// initT5 writes a random tiny T5 from the demo's Unigram tokenizer with
// token-matching heads: the random filter learns the question–evidence
// word match from this start within the demo's budget (docs/recipes.md,
// "Filter, third sweep"). It returns the equivalent command.
func (st *state) initT5(out string, seed int64) (string, error) {
	o := modelinit.Options{Arch: "t5", Size: "tiny", Tokenizer: st.dirs["spm"], Out: out, Seed: seed,
		AddTokens: []string{filter.Helpful, filter.NotHelpful}, TokenMatchHeads: 4, TokenMatchScore: 8, Backend: st.o.Backend}
	if _, err := modelinit.Init(o); err != nil {
		return "", err
	}
	return st.command("models", "init", "--arch", "t5", "--size", "tiny", "--tokenizer", o.Tokenizer, "--seed", itoa(seed), "--out", out,
		"--token-match-heads", "4", "--token-match-score", "8"), nil
}

// initModels writes the random tiny T5 (the filter's start) and BERT (the
// retriever's) from the demo's tokenizers.
func initModels(ctx context.Context, st *state) (Stage, error) {
	t5 := st.fresh("models", "t5-tiny")
	cmdT5, err := st.initT5(t5, st.o.Seed)
	if err != nil {
		return Stage{}, err
	}
	st.dirs["t5-tiny"] = t5
	bert := st.fresh("models", "bert-tiny")
	o := modelinit.Options{Arch: "bert", Size: "tiny", Tokenizer: st.dirs["wordpiece"], Out: bert, Seed: st.o.Seed, TokenMatchScore: 8, Backend: st.o.Backend}
	if _, err := modelinit.Init(o); err != nil {
		return Stage{}, err
	}
	st.dirs["bert-tiny"] = bert
	cmdBERT := st.command("models", "init", "--arch", "bert", "--size", "tiny", "--tokenizer", o.Tokenizer, "--seed", itoa(st.o.Seed), "--out", bert)
	return Stage{Command: cmdT5 + "\n  " + cmdBERT, Artifacts: []string{t5, bert}}, nil
}
