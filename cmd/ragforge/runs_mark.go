package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
)

// runsMarkOptions are the argument and flags of `runs mark`.
type runsMarkOptions struct {
	ID      string
	Status  string // failed, interrupted or done
	Message string // "" = "marked STATUS by runs mark" (except done)
	Force   bool
}

func newRunsMarkCmd(g *globals) *cobra.Command {
	var o runsMarkOptions
	cmd := &cobra.Command{
		Use:   "mark ID --status failed|interrupted|done",
		Short: "Close a run by hand, e.g. a stale one whose process is gone (ID may be a unique prefix)",
		Long: `Sets a run's status to failed, interrupted or done (and its finish time when
unset). A run still running in a live process, or on another host (where
this one cannot check its process), is refused unless --force.`,
		Example: `  ragforge runs mark 20261129-171500-train-filter-ab12 --status failed --message "killed by the OOM killer"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			return runRunsMark(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.Status, "status", "", "new status: failed, interrupted or done (required)")
	cmd.Flags().StringVar(&o.Message, "message", "", `error text stored with the run (default "marked STATUS by runs mark")`)
	cmd.Flags().BoolVar(&o.Force, "force", false, "mark a run even though its process is alive or on another host")
	return cmd
}

func runRunsMark(_ context.Context, g *globals, o runsMarkOptions) error {
	if o.Status == "" {
		return fmt.Errorf("--status is required (failed, interrupted or done)")
	}
	if o.Message == "" && o.Status != tracker.StatusDone {
		o.Message = "marked " + o.Status + " by runs mark"
	}
	st, err := openStore(g)
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := st.MarkRun(o.ID, o.Status, o.Message, o.Force)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, map[string]string{"id": id, "status": o.Status})
	}
	fmt.Fprintf(g.Out, "run %s marked %s\n", id, o.Status)
	return nil
}

func newRunsGCCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Mark every stale run (running, but its process on this host is gone) failed",
		Long: `Marks failed every run that reads as stale: stored as running by a process on
this host that no longer exists (or whose PID now belongs to another
process). Runs of other hosts are left alone. Nothing is deleted: labels and
reviews refer to runs by id.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRunsGC(cmd.Context(), g, runsGCOptions{})
		},
	}
}

// runsGCOptions are the options of `runs gc`: none.
type runsGCOptions struct{}

// runRunsGC marks the stale runs failed.
func runRunsGC(_ context.Context, g *globals, _ runsGCOptions) error {
	st, err := openStore(g)
	if err != nil {
		return err
	}
	defer st.Close()
	ids, err := st.MarkStale()
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, map[string]any{"marked_failed": append([]string{}, ids...)})
	}
	for _, id := range ids {
		fmt.Fprintf(g.Out, "run %s: stale, marked failed\n", id)
	}
	fmt.Fprintf(g.Out, "%d stale runs marked failed\n", len(ids))
	return nil
}
