package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// pipelineBuildOptions are the flags of `pipeline build`:
// pipeline.BuildConfig, stored as the run's config.
type pipelineBuildOptions struct{ pipeline.BuildConfig }

func newPipelineBuildCmd(g *globals) *cobra.Command {
	var o pipelineBuildOptions
	build := &cobra.Command{
		Use:   "build",
		Short: "Chunk corpora, build BM25 and FAISS indexes with the retriever, and copy the models into a pipeline directory",
		Long: `Writes a pipeline directory:
  pipeline.json                  manifest (retrieval mode, k, RRF weights, prompts, filter windows)
  corpora/<name>/chunks.jsonl    chunks with ids, spans and metadata
  corpora/<name>/bm25/           BM25 index
  corpora/<name>/dense/          FAISS index (index.faiss + ids.json, --faiss factory), when --retriever is set
  retriever/ filter/ generator/ reranker/   HF model directories, when given
and records it as a run (kind pipeline), so ` + "`ragforge serve --run ID`" + ` finds it.
--nprobe (IVF) and --ef-search (HNSW) are stored in pipeline.json
(faiss_search) and applied whenever the pipeline is loaded.`,
		Example: `  ragforge pipeline build --corpus ../shared/data/ap_protocols --retriever work/selflearn/round-1/retriever \
    --filter work/filter-export --out work/pipeline`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Given = cmd.Flags().Changed
			return runPipelineBuild(cmd.Context(), g, o)
		},
	}
	o.addFlags(build)
	return build
}

func (o *pipelineBuildOptions) addFlags(build *cobra.Command) {
	f := build.Flags()
	f.StringVar(&o.FromRun, "from-run", "", "eval-retrieval run id whose settings the pipeline serves: retriever mode and directory, hybrid weights, fusion depth, BM25, chunking, faiss and encoder options (recorded as from_run in pipeline.json; a flag that disagrees is an error)")
	f.StringSliceVar(&o.Corpora, "corpus", nil, "corpus path, name=path, or rag2:DIR[#name] (pre-encoded by ragforge encode: its vectors are the dense index); repeat for several corpora (balanced retrieval) (required)")
	f.StringVar(&o.Chunk.TextField, "text-field", "", "text field name")
	f.StringVar(&o.Chunk.IDField, "id-field", "", "id field name")
	f.IntVar(&o.Chunk.ChunkSize, "chunk-size", 512, "chunk size in characters (0: whole documents)")
	f.IntVar(&o.Chunk.Overlap, "chunk-overlap", 128, "chunk overlap in characters")
	minInt(f, 0, "chunk-size", "chunk-overlap")
	f.StringVar(&o.Retriever, "retriever", "", "BERT bi-encoder directory (dense, hybrid and hyde modes)")
	f.StringVar(&o.Filter, "filter", "", "T5 filter directory with [HELPFUL]/[NOT_HELPFUL] tokens")
	f.StringVar(&o.Generator, "generator", "", "T5 generator directory (rationale, answers, HyDE, /v1/completions)")
	f.StringVar(&o.Reranker, "reranker", "", "BERT cross-encoder directory (optional rerank stage)")
	f.StringVar(&o.Mode, "mode", "", "default retrieval mode: bm25 | dense | hybrid | hyde (default hybrid with a retriever, else bm25)")
	f.IntVar(&o.K, "k", 0, "default number of snippets (default 5)")
	minInt(f, 0, "k")
	f.StringVar(&o.Out, "out", "", "pipeline directory to create (must not exist) (required)")
	f.StringVar(&o.Factory, "faiss", "Flat", "FAISS index_factory string of the dense indexes (Flat, HNSW32, IVF256,Flat); needs --retriever")
	addFAISSSearchFlags(build, &o.Nprobe, &o.EfSearch)
	addBM25Flags(build, &o.BM25)
}

// runPipelineBuild builds the pipeline (pipeline.Prepare, Plan.Build) as a
// run of kind pipeline and prints where it is.
func runPipelineBuild(_ context.Context, g *globals, o pipelineBuildOptions) (err error) {
	var ev *pipeline.Evaluated
	if o.FromRun != "" {
		if ev, err = readEvaluatedRetrieval(g, o.FromRun); err != nil {
			return err
		}
	}
	o.Backend, o.Log, o.FilterWindows = g.Backend, g.Err, filtertrain.CheckpointWindows
	o.ResolveModel = func(flag, dir string) (string, error) { return modelDir(g, flag, dir) }
	plan, err := pipeline.Prepare(o.BuildConfig, ev)
	if err != nil {
		return err
	}
	defer plan.Close()
	st, run, err := startRun(g, pipeline.RunKind, pipelineBuildOptions{plan.Config})
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	res, err := plan.Build(context.Background(), run)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, map[string]any{"run_id": res.RunID, "dir": res.Dir})
	}
	printPipelineBuild(g, plan, res)
	return nil
}

// printPipelineBuild prints the build's summary.
func printPipelineBuild(g *globals, plan *pipeline.Plan, res *pipeline.BuildResult) {
	man := res.Manifest
	fmt.Fprintf(g.Out, "run %s: pipeline in %s (mode %s, k %d)\n", res.RunID, res.Dir, man.Retrieval.Mode, man.Retrieval.K)
	if ev := res.Evaluated; ev != nil {
		fmt.Fprintf(g.Out, "settings of evaluation run %s: %s\n", ev.RunID, retrievalLabel(string(man.Retrieval.Mode), man.Retrieval.DenseWeight, man.Retrieval.BM25Weight))
	}
	if plan.Config.Retriever != "" {
		fmt.Fprintf(g.Out, "dense indexes: faiss %s, nprobe %d, efSearch %d (0 = faiss's default)\n", man.FAISSFactory, man.FAISSSearch.Nprobe, man.FAISSSearch.EfSearch)
	}
}
