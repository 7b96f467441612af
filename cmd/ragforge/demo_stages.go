package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
)

// The demo's stages. Each calls the same subcommand a user would run, so the
// summary's commands reproduce the figures.
func init() {
	demoStages = append(demoStages,
		stageFunc{"retrieval: BM25", demoEvalBM25},
	)
}

func (st *demoState) chunkArgs() []string {
	return []string{"--corpus", st.corpus, "--chunk-size", strconv.Itoa(st.o.ChunkSize), "--chunk-overlap", strconv.Itoa(st.o.Overlap)}
}

// evalRetrieval runs `eval retrieval` with extra args and returns the summary line.
func (st *demoState) evalRetrieval(extra ...string) (demoStage, error) {
	args := append([]string{"eval", "retrieval"}, st.chunkArgs()...)
	args = append(args, "--qa", st.qa, "--k", "1,2,4,8")
	args = append(args, extra...)
	out, err := st.sub(append(args, "--json")...)
	if err != nil {
		return demoStage{}, err
	}
	var res evalRetrievalResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return demoStage{}, fmt.Errorf("eval retrieval output: %w", err)
	}
	keep := map[string]float64{}
	for _, k := range []string{"P@1", "Recall@4", "nDCG@10", "MRR@10"} {
		keep[k] = res.Metrics[k]
	}
	var files []string
	for _, f := range res.Files {
		files = append(files, f)
	}
	return demoStage{Command: st.command(args...), RunID: res.RunID, Metrics: keep, Artifacts: files}, nil
}

func demoEvalBM25(ctx context.Context, st *demoState) (demoStage, error) {
	return st.evalRetrieval("--retriever", "bm25", "--bm25-index", filepath.Join(st.o.Work, "index", "bm25-"+strconv.Itoa(st.o.ChunkSize)))
}
