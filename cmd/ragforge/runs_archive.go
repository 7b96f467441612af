package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/runarchive"
)

type runsExportOptions struct {
	IDs []string
	All bool
	Out string // file, "-" = stdout
}

func newRunsExportCmd(g *globals) *cobra.Command {
	var o runsExportOptions
	cmd := &cobra.Command{
		Use:   "export [ID...] (--all | IDs) -o FILE",
		Short: "Write runs with their metrics, artifacts, items, labels and reviews to a JSON Lines file, for runs import",
		Long: `Writes every stored column of the runs (ids or unique prefixes, or --all,
oldest first) to FILE ("-" = stdout): metrics, artifact records, resume
items, labels and their reviews. ` + "`ragforge runs import`" + ` stores them into another
run store, SQLite or PostgreSQL; the move is lossless (an import exported
again gives the same file). The scorers' log-probability cache is not moved.`,
		Example: `  ragforge --db ragforge.db runs export --all -o runs.jsonl
  ragforge --db postgres://ragforge@db.lab:5432/ragforge runs import runs.jsonl
  ragforge --db ragforge.db runs export --all -o - | ragforge --db postgres://… runs import -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.IDs = args
			return runRunsExport(cmd.Context(), g, o)
		},
	}
	cmd.Flags().BoolVar(&o.All, "all", false, "export every run")
	cmd.Flags().StringVarP(&o.Out, "output", "o", "", `output file ("-" = stdout; required)`)
	return cmd
}

func runRunsExport(_ context.Context, g *globals, o runsExportOptions) (err error) {
	switch {
	case o.Out == "":
		return fmt.Errorf("--output is required (a file, or - for stdout)")
	case o.All == (len(o.IDs) > 0):
		return fmt.Errorf("name the runs to export, or pass --all (not both)")
	}
	st, err := openStoreRead(g)
	if err != nil {
		return err
	}
	defer st.Close()
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		return err
	}
	ids := o.IDs
	if o.All {
		rs, err := st.List(tracker.ListOptions{})
		if err != nil {
			return err
		}
		ids = make([]string, len(rs))
		for i, r := range rs {
			ids[len(rs)-1-i] = r.ID // oldest first
		}
	}
	var w io.Writer = g.Out
	if o.Out != "-" {
		f, err := os.Create(o.Out)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}()
		w = f
	}
	if err := runarchive.Export(w, st, ls, ids); err != nil {
		return err
	}
	if o.Out != "-" {
		fmt.Fprintf(g.Err, "exported %d runs to %s\n", len(ids), o.Out)
	}
	return nil
}

func newRunsImportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Store the runs of a runs export file (all or none; a run id already stored is refused)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRunsImport(cmd.Context(), g, runsImportOptions{Path: args[0]})
		},
	}
}

// runsImportOptions are the argument of `runs import`.
type runsImportOptions struct {
	Path string // a runs export file, "-" for stdin
}

func runRunsImport(_ context.Context, g *globals, o runsImportOptions) error {
	var r io.Reader = os.Stdin
	if o.Path != "-" {
		f, err := os.Open(o.Path)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	st, err := openStore(g)
	if err != nil {
		return err
	}
	defer st.Close()
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		return err
	}
	ids, err := runarchive.Import(r, o.Path, st, ls)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, map[string]any{"imported": append([]string{}, ids...)})
	}
	fmt.Fprintf(g.Out, "imported %d runs into %s\n", len(ids), st.Path())
	return nil
}
