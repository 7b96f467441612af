package main

import (
	"slices"
	"strings"
	"testing"
)

// TestDemoSelflearnArgs checks that the demo passes its retriever flags on
// to selflearn only when set, under selflearn's own flag names (the args
// are parsed by the selflearn command).
func TestDemoSelflearnArgs(t *testing.T) {
	base := demoOptions{ChunkSize: 512, Overlap: 128, Seed: 42, Samples: 64, TrainFuse: -1}
	tests := []struct {
		name string
		edit func(*demoOptions)
		want []string // flag=value pairs expected among the args
		not  []string // flags that must be absent
	}{
		{"defaults", func(*demoOptions) {}, []string{"samples=64"}, []string{"--queries-per-chunk", "--negatives", "--candidates", "--train-fuse", "--recipe"}},
		{"ap settings", func(o *demoOptions) {
			o.Samples, o.QueriesPerChunk, o.Negatives, o.Candidates, o.TrainFuse = 0, 4, 3, 1, 0
		}, []string{"samples=0", "queries-per-chunk=4", "negatives=3", "candidates=1", "train-fuse=0"}, []string{"--recipe"}},
		{"explicit recipe", func(o *demoOptions) { o.Recipe = "scratch" }, []string{"recipe=scratch"}, []string{"--negatives"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			st := &demoState{o: o, corpus: "c.jsonl", qa: "qa.csv", dirs: map[string]string{"bert-tiny": "bert"}}
			args := st.selflearnArgs("work")
			if args[0] != "selflearn" {
				t.Fatalf("args[0] = %q, want selflearn", args[0])
			}
			for _, n := range tc.not {
				if slices.Contains(args, n) {
					t.Errorf("args %v contain %s", args, n)
				}
			}
			cmd := newSelflearnCmd(&globals{})
			if err := cmd.ParseFlags(args[1:]); err != nil {
				t.Fatalf("selflearn rejects the demo's args %v: %v", args, err)
			}
			for _, w := range tc.want {
				name, val, _ := strings.Cut(w, "=")
				if got := cmd.Flags().Lookup(name).Value.String(); got != val {
					t.Errorf("--%s = %q, want %q (args %v)", name, got, val, args)
				}
			}
		})
	}
}
