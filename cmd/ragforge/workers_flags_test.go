package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Split flags that make no sense are refused before any corpus or model is
// read, naming the flag.
func TestWorkerFlagsRefused(t *testing.T) {
	enc := []string{"encode", "--corpus", "/nonexistent/c.jsonl", "--encoder", "/nonexistent/bert", "--out", "/nonexistent/out"}
	sl := []string{"selflearn", "--corpus", "/nonexistent/c.jsonl", "--retriever", "/nonexistent/bert", "--eval-qa", "/nonexistent/qa.csv"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(enc, "--workers", "2", "--queue-batch", "100"), "--queue-batch 100: want a multiple of 256"},
		{append(enc, "--shard", "2/2"), `shard "2/2": want i/N`},
		{append(enc, "--shard", "0/2", "--workers", "2"), "--shard splits statically"},
		{append(enc, "--job", "j", "--lease", "10ms"), "--lease 10ms: want at least 1s"},
		{append(enc, "--workers", "0"), "--workers 0: must be at least 1"},
		{append(sl, "--gen-concurrency", "0"), "--gen-concurrency 0: must be at least 1"},
	} {
		t.Run(strings.Join(tc.args[len(tc.args)-2:], " "), func(t *testing.T) {
			code, stderr := runErr(append(tc.args, "--db", filepath.Join(t.TempDir(), "runs.db"))...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.args, code, stderr, tc.want)
			}
		})
	}
}

// selflearn --generator given twice lists both servers.
func TestSelflearnGeneratorRepeated(t *testing.T) {
	root := newRoot(&globals{})
	cmd, rest, err := root.Find([]string{"selflearn", "--generator", "openai:http://a:1/v1", "--generator", "openai:http://b:2/v1#m"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("generator").DefValue; got != "ict" {
		t.Errorf("default %q, want ict", got)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("generator").Value.String(); got != "openai:http://a:1/v1,openai:http://b:2/v1#m" {
		t.Errorf("--generator twice = %q", got)
	}
}
