package demo

import (
	"context"
	"fmt"
	"slices"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/train/selflearn"
)

// selflearnRound runs one ICT self-learning round from the models init
// BERT and reports the variants' nDCG@10 before and after it; the tuned
// retriever (with its fusion weights) is what evalTuned evaluates.
func selflearnRound(ctx context.Context, st *state) (Stage, error) {
	work := st.fresh("selflearn")
	cfg, set, args, err := st.selflearnConfig(work)
	if err != nil {
		return Stage{}, err
	}
	if cfg, err = selflearn.Prepare(cfg, set, st.log); err != nil {
		return Stage{}, err
	}
	_, chunks, err := st.load(st.o.ChunkSize, st.o.Overlap)
	if err != nil {
		return Stage{}, err
	}
	queries, qrels, err := evalSet(st.qa, chunks, st.o.ChunkSize)
	if err != nil {
		return Stage{}, err
	}
	stages := progress.NewStages(st.log, "selflearn")
	rep, err := selflearn.Run(ctx, cfg, chunks, queries, qrels, st.store, stages.Func())
	stages.Finish()
	if err != nil {
		return Stage{}, err
	}
	m := map[string]float64{}
	var vs []tracker.Versus
	for _, r := range rep.Rounds {
		for _, v := range r.Variants {
			if slices.Contains([]string{"dense", "sl-hyde", "base", "bm25"}, v.Name) {
				m[fmt.Sprintf("r%d %s nDCG@10", r.Round, v.Name)] = v.Metrics["nDCG@10"]
			}
			if v.Name == "dense" && r.Round > 0 {
				vs = append(vs, tracker.Versus{Model: fmt.Sprintf("dense retriever (round %d)", r.Round), Metric: "nDCG@10",
					Learned: v.Metrics["nDCG@10"], Baseline: "round 0", Value: m["r0 dense nDCG@10"]})
			}
		}
		if r.Fusion != nil {
			m[fmt.Sprintf("r%d dense_weight", r.Round)] = r.Fusion.DenseWeight
		}
		if r.RetrieverDir != "" {
			st.dirs["retriever-tuned"] = r.RetrieverDir
		}
	}
	if st.dirs["retriever-tuned"] == "" {
		return Stage{}, fmt.Errorf("selflearn reported no tuned retriever")
	}
	return Stage{Command: st.command(args...), RunID: rep.RunID, Metrics: m, Versus: vs, Artifacts: []string{st.dirs["retriever-tuned"]}}, nil
}

// selflearnConfig is the demo's self-learning run: one ICT round from the
// models init BERT, the demo's retriever settings passed on only when set
// (otherwise selflearn's recipe and defaults apply), with its command line.
func (st *state) selflearnConfig(work string) (selflearn.Config, selflearn.Settings, []string, error) {
	c := selflearn.DefaultConfig()
	c.RetrieverDir, c.Generator, c.Rounds, c.WorkDir, c.Samples, c.MaxLength, c.Seed = st.dirs["bert-tiny"], "ict", 1, work, st.o.Samples, 256, st.o.Seed
	c.ChunkSize, c.ChunkOverlap, c.Backend = st.o.ChunkSize, st.o.Overlap, st.o.Backend
	set := selflearn.Settings{Recipe: st.o.Recipe, Explicit: []string{"MaxLength"}}
	args := append([]string{"selflearn"}, st.chunkArgs()...)
	args = append(args, "--retriever", c.RetrieverDir, "--generator", c.Generator, "--rounds", "1", "--eval-qa", st.qa,
		"--work", work, "--samples", itoa(c.Samples), "--max-length", itoa(c.MaxLength), "--seed", itoa(c.Seed))
	if st.o.QueriesPerChunk > 0 {
		c.QueriesPerChunk, set.Explicit = st.o.QueriesPerChunk, append(set.Explicit, "QueriesPerChunk")
		args = append(args, "--queries-per-chunk", itoa(c.QueriesPerChunk))
	}
	if st.o.Negatives >= 0 {
		c.NumNegatives = st.o.Negatives
		args = append(args, "--negatives", itoa(c.NumNegatives))
	}
	if st.o.Candidates > 0 {
		c.L = st.o.Candidates
		args = append(args, "--candidates", itoa(c.L))
	}
	if st.o.TrainFuse >= 0 {
		c.TrainFuse = st.o.TrainFuse
		args = append(args, "--train-fuse", itoa(c.TrainFuse))
	}
	bm, err := st.o.BM25.Config()
	if err != nil {
		return c, set, nil, err
	}
	if !bm.Equal(bm25.DefaultConfig()) {
		c.BM25 = bm // else zero: the config hash of earlier runs stays
	}
	args = append(args, st.bm25Args()...)
	return c, set, append(args, st.recipeArgs()...), nil
}

// evalSet reads the evaluation questions of a self-learning run and judges
// them at chunk level: a QA CSV by the contains rule, BEIR qrels by their
// documents' chunks.
func evalSet(qa string, chunks []data.Chunk, chunkSize int) ([]data.Query, data.Qrels, error) {
	queries, qrels, err := data.OpenQueries(qa, "test")
	if err != nil {
		return nil, nil, err
	}
	switch {
	case qrels == nil:
		qrels, err = eval.BuildQrels(queries, chunks, eval.Rule{})
	case chunkSize > 0:
		qrels = eval.ChunkQrels(qrels, chunks)
	}
	return queries, qrels, err
}
