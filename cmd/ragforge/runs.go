package main

import (
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data/runs"
)

func init() { register(newRunsCmd) }

func newRunsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "runs", Short: "List, show and compare runs stored in the run database"}
	var opt runs.ListOptions
	var quiet bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			rs, err := st.List(opt)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.Out, rs)
			}
			if quiet {
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
		},
	}
	list.Flags().StringVar(&opt.Kind, "kind", "", "only runs of this kind (e.g. eval-retrieval, train-filter, selflearn)")
	list.Flags().StringVar(&opt.Status, "status", "", "only runs with this status (running, done, failed)")
	list.Flags().IntVar(&opt.Limit, "limit", 0, "at most this many runs (0 = all)")
	list.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only run ids, newest first (for scripts: RUN=$(ragforge runs list --kind label-evidence --limit 1 -q))")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one run: config, status, last value of each metric, artifacts (ID may be a unique prefix)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			d, err := st.Get(args[0])
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
					fmt.Fprintf(tw, "  %s\t%.4f\tstep %d\n", name, last[name].Value, last[name].Step)
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
		},
	}
	compare := &cobra.Command{
		Use:   "compare A B",
		Short: "Compare the last value of each metric of two runs",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openStore(g)
			if err != nil {
				return err
			}
			defer st.Close()
			diffs, err := st.Compare(args[0], args[1])
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
					diff = fmt.Sprintf("%+.4f", d.Diff)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Name, fmtOpt(d.A, d.HasA), fmtOpt(d.B, d.HasB), diff)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(list, show, compare)
	return cmd
}

func openStore(g *globals) (*runs.Store, error) {
	st, err := runs.Open(g.DB)
	if err != nil {
		return nil, fmt.Errorf("open run store %s: %w", g.DB, err)
	}
	return st, nil
}

func lastMetrics(ms []runs.MetricPoint) map[string]runs.MetricPoint {
	last := map[string]runs.MetricPoint{}
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
	return fmt.Sprintf("%.4f", v)
}
