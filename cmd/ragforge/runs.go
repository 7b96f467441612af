package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/tracker"
)

// runsListOptions are the flags of `runs list`.
type runsListOptions struct {
	tracker.ListOptions
	Quiet bool // ids only
}

func newRunsListCmd(g *globals) *cobra.Command {
	var o runsListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRunsList(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.Kind, "kind", "", "only runs of this kind (e.g. eval-retrieval, train-filter, selflearn)")
	cmd.Flags().StringVar(&o.Status, "status", "", "only runs with this status ("+strings.Join(tracker.Statuses, ", ")+"; stale: running, but its process is gone)")
	cmd.Flags().IntVar(&o.Limit, "limit", 0, "at most this many runs (0 = all)")
	minInt(cmd.Flags(), 0, "limit")
	cmd.Flags().BoolVarP(&o.Quiet, "quiet", "q", false, "print only run ids, newest first (for scripts: RUN=$(ragforge runs list --kind label-evidence --limit 1 -q))")
	return cmd
}

func runRunsList(_ context.Context, g *globals, o runsListOptions) error {
	st, err := openStoreRead(g)
	if err != nil {
		return err
	}
	defer st.Close()
	rs, err := st.List(o.ListOptions)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, rs)
	}
	if o.Quiet {
		for _, r := range rs {
			fmt.Fprintln(g.Out, r.ID)
		}
		return nil
	}
	tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tSTARTED\tDURATION\tBACKEND")
	for _, r := range rs {
		dur := "-"
		if r.FinishedAt != nil {
			dur = r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Kind, r.Status, r.StartedAt.Local().Format("2006-01-02 15:04:05"), dur, r.Backend)
	}
	return tw.Flush()
}

// runsShowOptions are the arguments of `runs show`.
type runsShowOptions struct {
	ID string // a run id or a unique prefix
}

func newRunsShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one run: config, status, last value of each metric, artifacts (ID may be a unique prefix)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRunsShow(cmd.Context(), g, runsShowOptions{ID: args[0]})
		},
	}
}

func runRunsShow(_ context.Context, g *globals, o runsShowOptions) error {
	st, err := openStoreRead(g)
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := st.Get(o.ID)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, d)
	}
	fmt.Fprintf(g.Out, "run      %s\nkind     %s\nstatus   %s\nbackend  %s\nversion  %s\nstarted  %s\n", d.ID, d.Kind, d.Status, d.Backend, d.Version, d.StartedAt.Local().Format(time.RFC3339))
	if d.FinishedAt != nil {
		fmt.Fprintf(g.Out, "finished %s (%s)\n", d.FinishedAt.Local().Format(time.RFC3339), d.FinishedAt.Sub(d.StartedAt).Round(time.Millisecond))
	}
	if d.Error != "" {
		fmt.Fprintf(g.Out, "error    %s\n", d.Error)
	}
	fmt.Fprintf(g.Out, "config   %s\n", d.Config)
	last := lastMetrics(d.Metrics)
	if len(last) > 0 {
		fmt.Fprintln(g.Out, "\nmetrics (last value):")
		tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
		for _, name := range sortedKeys(last) {
			fmt.Fprintf(tw, "  %s\t%s\tstep %d\n", name, fmtNum(last[name].Value, 4, false), last[name].Step)
		}
		tw.Flush()
	}
	printVersus(g.Out, runBaselines(d.Kind, d.Metrics))
	if len(d.Artifacts) > 0 {
		fmt.Fprintln(g.Out, "\nartifacts:")
		for _, a := range d.Artifacts {
			fmt.Fprintf(g.Out, "  %-12s %s (%d bytes, sha256 %.12s)\n", a.Kind, a.Path, a.Bytes, a.SHA256)
		}
	}
	return nil
}

// runsCompareOptions are the arguments of `runs compare`.
type runsCompareOptions struct {
	A, B string // run ids or unique prefixes
}

func newRunsCompareCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "compare A B",
		Short: "Compare the last value of each metric of two runs",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRunsCompare(cmd.Context(), g, runsCompareOptions{A: args[0], B: args[1]})
		},
	}
}

func runRunsCompare(_ context.Context, g *globals, o runsCompareOptions) error {
	st, err := openStoreRead(g)
	if err != nil {
		return err
	}
	defer st.Close()
	diffs, err := st.Compare(o.A, o.B)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, diffs)
	}
	tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tA\tB\tB-A")
	for _, d := range diffs {
		diff := "-"
		if d.HasA && d.HasB {
			diff = fmtNum(d.Diff, 4, true)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Name, fmtOpt(d.A, d.HasA), fmtOpt(d.B, d.HasB), diff)
	}
	return tw.Flush()
}

// openStore opens the run store for a command that writes, and registers it
// so a forced exit after a signal can mark its open runs interrupted.
func openStore(g *globals) (*tracker.Store, error) {
	st, err := tracker.Open(g.DB)
	if err != nil {
		return nil, err
	}
	life.track(st)
	return st, nil
}

// openStoreRead opens the run store for a command that only reads: a
// corrupt file is opened read-only with a warning on stderr.
func openStoreRead(g *globals) (*tracker.Store, error) {
	st, err := tracker.OpenRead(g.DB)
	if err != nil {
		return nil, err
	}
	if w := st.Warning(); w != nil {
		fmt.Fprintf(g.Err, "ragforge: warning: %v\nragforge: warning: opened read-only; what follows may be incomplete\n", w)
	}
	return st, nil
}

func lastMetrics(ms []tracker.MetricPoint) map[string]tracker.MetricPoint {
	last := map[string]tracker.MetricPoint{}
	for _, m := range ms {
		if p, ok := last[m.Name]; !ok || m.Step >= p.Step {
			last[m.Name] = m
		}
	}
	return last
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func fmtOpt(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmtNum(v, 4, false)
}
