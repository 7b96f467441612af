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
	DB      string // run store (SQLite)
	Backend string // GoMLX backend: "go" (default) or "xla[:plugin]"
	JSON    bool   // machine-readable output
	Out     io.Writer
	Err     io.Writer
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
	root.PersistentFlags().StringVar(&g.DB, "db", defaultDB(), "run store: SQLite database path ($RAGFORGE_DB)")
	root.PersistentFlags().StringVar(&g.Backend, "backend", "", "GoMLX backend: go (pure Go, default) or xla[:plugin] (needs a PJRT plugin; $GOMLX_BACKEND)")
	root.PersistentFlags().BoolVar(&g.JSON, "json", false, "print JSON instead of tables")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := checkFlags(cmd); err != nil {
			return err
		}
		// Every later backend.New("") follows the flag; an unusable XLA fails here, fast.
		if g.Backend != "" {
			if _, err := backend.New(g.Backend); err != nil {
				return err
			}
			return os.Setenv(backend.EnvVar, g.Backend)
		}
		return nil
	}
	root.SetOut(g.Out)
	root.SetErr(g.Err)
	for _, add := range commands {
		root.AddCommand(add(g))
	}
	return root
}

// commands are registered by each command file's init, so each stays in its own file.
var commands []func(*globals) *cobra.Command

func register(f func(*globals) *cobra.Command) { commands = append(commands, f) }

func execute(args []string, stdout, stderr io.Writer) int {
	ctx, stop := life.watch(context.Background(), stderr)
	defer stop()
	out := &outWriter{w: stdout}
	g := &globals{Out: out, Err: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	err := life.interrupted(root.ExecuteContext(ctx))
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
