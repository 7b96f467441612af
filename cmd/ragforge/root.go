package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/models/backend"
)

// globals are the flags every command shares.
type globals struct {
	DB          string // run store: SQLite path or postgres:// URL
	Backend     string // GoMLX backend: "go" (default) or "xla[:plugin]"
	JSON        bool   // machine-readable output
	Profile     string // --cpuprofile: pprof CPU profile of the command
	stopProfile func() error
	Out         io.Writer
	Err         io.Writer
}

func defaultDB() string {
	if v := os.Getenv("RAGFORGE_DB"); v != "" {
		return v
	}
	return "ragforge.db"
}

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "ragforge",
		Short:         "Train, label, evaluate and serve the models behind medical RAG (RAG² filter, SL-HyDE)",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.DB, "db", defaultDB(), "run store: SQLite database path, or a postgres:// URL to share runs and labels between machines ($RAGFORGE_DB)")
	root.PersistentFlags().StringVar(&g.Backend, "backend", "", "GoMLX backend: go (pure Go, default) or xla[:plugin] (needs a PJRT plugin; $GOMLX_BACKEND)")
	root.PersistentFlags().BoolVar(&g.JSON, "json", false, "print JSON instead of tables")
	root.PersistentFlags().StringVar(&g.Profile, "cpuprofile", "", "write a pprof CPU profile of the command to this file (go tool pprof)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFlags(cmd); err != nil {
			return err
		}
		// g.Backend is passed to every model load; an unusable XLA fails
		// here, fast, rather than after the data is read.
		if g.Backend != "" {
			if _, err := backend.New(g.Backend); err != nil {
				return err
			}
		}
		stop, err := startCPUProfile(g.Profile)
		g.stopProfile = stop
		return err
	}
	root.SetOut(g.Out)
	root.SetErr(g.Err)
	addCommands(root, g)
	return root
}

// addCommands builds the command tree: every command of ragforge is added
// here, each built by its file's newXCmd(g) from its options struct.
func addCommands(root *cobra.Command, g *globals) {
	root.AddCommand(
		group("bench", "Measure model and server speed",
			newBenchModelsCmd(g), newBenchServeCmd(g), newBenchTrainCmd(g)),
		newDemoCmd(g),
		newEncodeCmd(g),
		group("eval", "Evaluate retrieval, the filter and answers",
			newEvalRetrievalCmd(g), newEvalFilterCmd(g), newEvalAnswersCmd(g), newEvalSensitivityCmd(g), newEvalMCQACmd(g)),
		newExportCmd(g),
		group("infer", "Run a model once: generate, embed, score",
			newGenerateCmd(g), newEmbedCmd(g), newScoreCmd(g)),
		group("label", "Make, review, export and compare RAG² [HELPFUL]/[NOT_HELPFUL] labels",
			newLabelEvidenceCmd(g), newLabelPerplexityCmd(g), newLabelReviewCmd(g), newLabelExportCmd(g),
			newLabelCountsCmd(g), newLabelDiffCmd(g), newLabelImportCmd(g), newLabelICTCmd(g)),
		group("models", "Create and inspect models in Hugging Face layout",
			newModelsInitCmd(g), newModelsInspectCmd(g)),
		group("pipeline", "Assemble the directory `ragforge serve` loads (corpora, indexes, retriever, filter, generator)",
			newPipelineBuildCmd(g)),
		group("runs", "List, show and compare runs stored in the run database",
			newRunsListCmd(g), newRunsShowCmd(g), newRunsCompareCmd(g), newRunsMarkCmd(g), newRunsGCCmd(g),
			newRunsExportCmd(g), newRunsImportCmd(g)),
		newPretrainCmd(g),
		newSelflearnCmd(g),
		newServeCmd(g),
		group("tokenizer", "Train tokenizers on a corpus",
			newTokenizerTrainCmd(g)),
		group("train", "Train the RAG² filter and its calibration, and LoRA-fine-tune decoder LMs (the SL-HyDE retriever trains inside `ragforge selflearn`)",
			newTrainFilterCmd(g), newTrainCalibrationCmd(g), newTrainLoRACmd(g)),
	)
}

// group is a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short}
	cmd.AddCommand(subs...)
	return cmd
}

func execute(args []string, stdout, stderr io.Writer) int {
	ctx, stop := life.watch(context.Background(), stderr)
	defer stop()
	out := &outWriter{w: stdout}
	g := &globals{Out: out, Err: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	err := life.interrupted(root.ExecuteContext(ctx))
	if g.stopProfile != nil {
		if perr := g.stopProfile(); err == nil {
			err = perr
		}
	}
	switch {
	case out.isBroken():
		// As a tool killed by SIGPIPE, silently; the run was finished.
		return 128 + int(syscall.SIGPIPE)
	case err != nil:
		fmt.Fprintln(stderr, "ragforge:", err)
		if s := life.signal(); s != nil {
			return exitCode(s)
		}
		return 1
	}
	return 0
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
