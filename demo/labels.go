package demo

import (
	"context"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/filter"
)

// labelMetrics are a labeling stage's summary figures.
func labelMetrics(res label.Result) map[string]float64 {
	return map[string]float64{"helpful": float64(res.Counts[filter.Helpful]), "not_helpful": float64(res.Counts[filter.NotHelpful])}
}

// labelEvidence labels the BM25 top 10 of every question by the evidence
// rule (the reference context in the chunk), keeping 3 [NOT_HELPFUL]
// candidates per question: the filter's held-out questions and, with
// FilterFinetuneEpochs or FilterCalibrate, its training questions.
func labelEvidence(ctx context.Context, st *state) (Stage, error) {
	out := st.path("labels", "evidence.jsonl")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return Stage{}, err
	}
	corpus := st.corpusAt(st.o.ChunkSize, st.o.Overlap)
	queries, qrels, idx, err := label.LoadCandidates(st.qa, 0, &corpus, st.o.BM25, st.log)
	corpus = st.corpusAt(st.o.ChunkSize, st.o.Overlap) // recorded as given, whatever Load filled in
	if err != nil {
		return Stage{}, err
	}
	defer idx.Close()
	const topN, negatives, seed = 10, 3, 42 // seed: label evidence's default
	job := label.EvidenceJob{Queries: queries, Qrels: qrels, Index: idx, Out: out,
		Labeler: label.EvidenceLabeler{TopN: topN, NegativesPerQuestion: negatives, Seed: seed, DatasetName: data.CorpusName(st.corpus)},
		Flags:   map[string]any{"corpus": corpus, "qa": st.qa, "top_n": topN, "limit": 0, "out": out, "bm25": st.o.BM25}}
	bar := progress.New(st.log, len(queries), "evidence labels")
	job.Progress = label.Progress(bar.Func())
	var res label.Result
	err = st.record(func(start tracker.Starter) error {
		res, err = label.RunEvidence(ctx, job, start)
		return err
	})
	bar.Finish()
	if err != nil {
		return Stage{}, err
	}
	st.dirs["labels"] = out
	args := append([]string{"label", "evidence"}, st.chunkArgs()...)
	args = append(args, "--qa", st.qa, "--top-n", itoa(topN), "--negatives", itoa(negatives), "--out", out)
	args = append(args, st.bm25Args()...)
	return Stage{Command: st.command(args...), RunID: res.RunID, Artifacts: []string{out}, Metrics: labelMetrics(res)}, nil
}

// labelICT makes self-supervised filter examples from the corpus (label
// ict), the filter's training data: a random T5 trained on the evidence
// labels memorises which chunks were helpful (make demo-ap then fine-tunes
// the ICT-trained filter on them, trainFilter). The settings are the
// scratch recipe's sweep (docs/recipes.md): 200-character chunks (short
// inputs, many updates), ICTPerChunk pseudo-questions per chunk (8), the
// sentence kept in its evidence, random negatives. ICTMaxChunks (150)
// bounds the cost on a real corpus; make demo-ap draws 2 from every chunk
// instead, which transfers better there (docs/recipes.md).
func labelICT(ctx context.Context, st *state) (Stage, error) {
	out := st.path("labels", "ict.jsonl")
	const size, overlap, minWords = 200, 0, 3
	_, chunks, err := st.load(size, overlap)
	if err != nil {
		return Stage{}, err
	}
	job := label.ICTJob{Out: out, RandomNegatives: true, Corpus: st.corpusAt(size, overlap),
		ICT: label.ICTOptions{PerChunk: st.o.ICTPerChunk, MaxChunks: st.o.ICTMaxChunks, MinWords: minWords, Keep: 1, NumNegatives: 1, Seed: uint64(st.o.Seed)}}
	var res label.Result
	if err := st.record(func(start tracker.Starter) error {
		res, err = label.RunICT(ctx, chunks, job, start)
		return err
	}); err != nil {
		return Stage{}, err
	}
	st.dirs["labels-ict"] = out
	args := []string{"label", "ict", "--corpus", st.corpus, "--chunk-size", itoa(size), "--chunk-overlap", itoa(overlap), "--min-words", itoa(minWords),
		"--per-chunk", itoa(st.o.ICTPerChunk), "--keep", "1", "--random-negatives", "--max-chunks", itoa(st.o.ICTMaxChunks), "--seed", itoa(st.o.Seed), "--out", out}
	return Stage{Command: st.command(args...), RunID: res.RunID, Artifacts: []string{out}, Metrics: labelMetrics(res)}, nil
}
