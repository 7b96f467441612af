package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/train/filtertrain"
)

// exportOptions are the flags of `export`.
type exportOptions struct {
	Run, From, Out string
	Retriever      retrieverExportFlags
	Windows        filterWindows // a filter export's
}

func newExportCmd(g *globals) *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write a trained filter (HF layout) or retriever (sentence-transformers layout) for transformers / sentence-transformers",
		Long: `Copies the best checkpoint of a train-filter run (--run) or a checkpoint
directory (--from) to --out in Hugging Face layout: config.json,
model.safetensors, generation_config.json, spiece.model, tokenizer.json and
the tokenizer json files with [HELPFUL]/[NOT_HELPFUL], loadable by ragforge
and by transformers' T5ForConditionalGeneration/AutoTokenizer. A filter
trained with --match-marks keeps "ragforge_filter_match_marks" in its
config.json: outside ragforge its instructions must be marked before
tokenizing (the rule and a Python function: docs/recipes.md). A filter made
by train calibration keeps "ragforge_filter_calibration": outside ragforge
its P([HELPFUL]) is the T5's until that map is applied (docs/recipes.md).
The export records the windows it is to be read at in config.json
("ragforge_filter_windows": --max-seq-length and --doc-stride, by default
the checkpoint's own), which eval filter, pipeline build and serve read.

With --retriever DIR, copies a BERT bi-encoder and writes the
sentence-transformers files (modules.json, 1_Pooling/config.json,
2_Normalize when normalized, sentence_bert_config.json,
config_sentence_transformers.json; tokenizer_config.json model_max_length
set to max_seq_length), so SentenceTransformer(--out) encodes as ragforge.`,
		Example: `  ragforge export --run 20261129-171500-train-filter-ab12 --out work/filter-export
  ragforge export --retriever work/selflearn/round-1/retriever --out work/retriever-st`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExport(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Run, "run", "", "train-filter run id (its best checkpoint is exported)")
	f.StringVar(&o.From, "from", "", "checkpoint directory to export instead of a run's")
	f.StringVar(&o.Out, "out", "", "output directory (required)")
	o.Retriever.add(cmd)
	o.Windows.add(cmd)
	return cmd
}

// exportModel writes a filter checkpoint (a train-filter run's best, or
// o.From: filtertrain.ExportFilter) or, with --retriever, a bi-encoder to
// o.Out.
func exportModel(g *globals, o exportOptions) (*filtertrain.ExportResult, error) {
	if o.Retriever.Dir != "" {
		if o.Out == "" || o.Run != "" || o.From != "" {
			return nil, fmt.Errorf("--retriever takes --out and neither --run nor --from")
		}
		for _, f := range []string{"max-seq-length", "doc-stride"} {
			if o.Windows.changed(f) {
				return nil, fmt.Errorf("--%s applies to filter exports only (a retriever's is --max-length)", f)
			}
		}
		line, err := o.Retriever.export(g, o.Out)
		return &filtertrain.ExportResult{Kind: "retriever", Source: o.Retriever.Dir, Dir: o.Out, Line: line}, err
	}
	if o.Out == "" || (o.Run == "") == (o.From == "") {
		return nil, fmt.Errorf("--out and exactly one of --run, --from or --retriever are required")
	}
	if err := o.Retriever.stray(); err != nil {
		return nil, err
	}
	src, err := modelDir(g, "from", o.From)
	if err != nil {
		return nil, err
	}
	if o.Run != "" {
		st, err := openStore(g)
		if err != nil {
			return nil, err
		}
		src, err = filtertrain.BestOfRun(st, o.Run)
		st.Close()
		if err != nil {
			return nil, err
		}
	}
	return filtertrain.ExportFilter(filtertrain.ExportJob{Source: src, Out: o.Out, Windows: o.Windows.request(), Note: g.Err})
}

// runExport runs an export as a run of kind "export", started
// first so that a refused export is recorded too (the exported config.json
// is its artifact), and prints the result, as JSON with --json.
func runExport(_ context.Context, g *globals, o exportOptions) (err error) {
	st, run, err := startRun(g, "export", filtertrain.ExportRunConfig{Run: o.Run, From: o.From, Retriever: o.Retriever.Dir, Out: o.Out})
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	res, err := exportModel(g, o)
	if err != nil {
		return err
	}
	res.RunID = run.ID
	if err := filtertrain.RecordExport(run, res); err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, res)
	}
	fmt.Fprintf(g.Out, "run %s: %s\n", run.ID, res.Line)
	return nil
}
