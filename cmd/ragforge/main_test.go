package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/internal/testutil"
)

// run executes the CLI in-process and returns stdout; it fails the test on a
// non-zero exit.
func run(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := execute(args, &out, &errb); code != 0 {
		t.Fatalf("ragforge %s: exit %d\nstderr: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String()
}

// runErr executes the CLI and returns its exit code and stderr.
func runErr(args ...string) (int, string) {
	var out, errb bytes.Buffer
	code := execute(args, &out, &errb)
	return code, errb.String()
}

// sampleFiles writes the embedded sample corpus and its QA file into a
// fresh temporary directory and returns the directory and both paths.
func sampleFiles(t *testing.T) (dir, corpus, qa string) {
	t.Helper()
	dir = t.TempDir()
	corpus, qa, err := sample.WriteTo(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, corpus, qa
}

// sharedDir returns <module root>/../shared/rel or skips.
func sharedDir(t *testing.T, rel string) string { return testutil.SharedPath(t, rel) }

func TestEvalRetrievalSampleJSONAndRunsList(t *testing.T) {
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	out := run(t, "eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa, "--retriever", "bm25", "--k", "1,2,4,8", "--json")
	var res evalRetrievalResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	for _, m := range []string{"P@1", "Recall@1", "F1@1", "P@8", "Recall@8", "F1@8", "nDCG@10", "MRR@10",
		"Success@1", "Success@8", "MRR@1", "MAP", "Recall@1000"} {
		v, ok := res.Metrics[m]
		if !ok || v < 0 || v > 1 {
			t.Errorf("metric %s = %v (present %v)", m, v, ok)
		}
	}
	// The hit rate is never below the fraction of relevant chunks found.
	for _, k := range []string{"1", "2", "4", "8"} {
		if res.Metrics["Success@"+k] < res.Metrics["Recall@"+k] {
			t.Errorf("Success@%s %.4f < Recall@%s %.4f", k, res.Metrics["Success@"+k], k, res.Metrics["Recall@"+k])
		}
	}
	if q, err := os.ReadFile(res.Files["qrels"]); err != nil || !strings.Contains(string(q), " 0 ") {
		t.Errorf("qrels.tsv: %v\n%.200s", err, q)
	}
	if res.Queries != 37 {
		t.Errorf("evaluated %d questions, want the 37 of the sample", res.Queries)
	}
	// BM25 on questions written from these passages must find most contexts.
	if res.Metrics["Recall@8"] < 0.8 {
		t.Errorf("Recall@8 = %.3f on the sample, want >= 0.8", res.Metrics["Recall@8"])
	}
	list := run(t, "runs", "list", "--db", db)
	if !strings.Contains(list, res.RunID) || !strings.Contains(list, "eval-retrieval") || !strings.Contains(list, "done") {
		t.Errorf("runs list does not show run %s as done:\n%s", res.RunID, list)
	}
	show := run(t, "runs", "show", res.RunID[:20], "--db", db)
	if !strings.Contains(show, "nDCG@10") || !strings.Contains(show, "run.trec") {
		t.Errorf("runs show lacks metrics or artifacts:\n%s", show)
	}
	for _, f := range res.Files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("output file %s: %v", f, err)
		}
	}
}

// Acceptance 1 of the foundation issue, as written.
func TestEvalRetrievalAPCorpus(t *testing.T) {
	corpus := sharedDir(t, "data/ap_protocols")
	qa := sharedDir(t, "data/ap_protocols_qa/dev.csv")
	db := filepath.Join(t.TempDir(), "runs.db")
	out := run(t, "eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa,
		"--chunk-size", "512", "--chunk-overlap", "128", "--retriever", "bm25", "--k", "1,2,4,8", "--json")
	var res evalRetrievalResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Chunks != 956 {
		t.Errorf("AP corpus gave %d chunks at 512/128, want 956", res.Chunks)
	}
	if res.Queries != 200 || res.Judged+res.Unjudged != 200 {
		t.Errorf("queries %d (judged %d + unjudged %d), want 200", res.Queries, res.Judged, res.Unjudged)
	}
	// Every figure divides by all 200 questions; the judged ones' figure
	// (trec_eval -c on qrels.tsv) is the same sum over fewer.
	for _, m := range []string{"Success@1", "Recall@8", "nDCG@10", "MRR@10"} {
		if want := res.MetricsJudged[m] * float64(res.Judged) / float64(res.Queries); math.Abs(res.Metrics[m]-want) > 1e-9 {
			t.Errorf("%s over all %v, want the judged %v × %d/%d = %v", m, res.Metrics[m], res.MetricsJudged[m], res.Judged, res.Queries, want)
		}
	}
	t.Logf("AP BM25: P@1 %.3f R@1 %.3f | P@8 %.3f R@8 %.3f | nDCG@10 %.3f MRR@10 %.3f",
		res.Metrics["P@1"], res.Metrics["Recall@1"], res.Metrics["P@8"], res.Metrics["Recall@8"], res.Metrics["nDCG@10"], res.Metrics["MRR@10"])
	if !strings.Contains(run(t, "runs", "list", "--db", db), res.RunID) {
		t.Error("run missing from runs list")
	}
}

// TestEvalRetrievalPseudoQueries: --pseudo-queries ict judges chunks (no
// document mapping), one query per chunk with two usable sentences, and a
// sentence left in the index (--pseudo-keep 1) is found far more often
// at rank 1 than one removed from it.
func TestEvalRetrievalPseudoQueries(t *testing.T) {
	dir, corpus, _ := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	s1 := map[string]float64{}
	for _, keep := range []string{"0", "1"} {
		out := run(t, "eval", "retrieval", "--db", db, "--corpus", corpus, "--pseudo-queries", "ict", "--pseudo-keep", keep, "--json")
		var res evalRetrievalResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.Relevance != "ict" || res.Queries == 0 || res.Queries > res.Chunks || res.Unjudged != 0 {
			t.Errorf("keep %s: relevance %q, %d queries (%d unjudged) over %d chunks", keep, res.Relevance, res.Queries, res.Unjudged, res.Chunks)
		}
		if q, err := os.ReadFile(res.Files["qrels"]); err != nil || !strings.Contains(string(q), "ict:") || !strings.Contains(string(q), "#") {
			t.Errorf("keep %s: qrels.tsv does not judge chunks of ict: queries: %v\n%.200s", keep, err, q)
		}
		s1[keep] = res.Metrics["Success@1"]
	}
	if s1["1"] < 0.9 || s1["0"] >= s1["1"] {
		t.Errorf("Success@1: sentence kept %.3f, removed %.3f; want kept >= 0.9 and above removed", s1["1"], s1["0"])
	}
}

func TestEvalRetrievalBadInputKeepsStoredRuns(t *testing.T) {
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	first := run(t, "eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa, "--json")
	var res evalRetrievalResult
	if err := json.Unmarshal([]byte(first), &res); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("Question,Ground_Truth,Context\n\"q1\",\"a1\"\n"), 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing corpus", []string{"--corpus", filepath.Join(dir, "nope.jsonl"), "--qa", qa}, "nope.jsonl"},
		{"csv row missing a column", []string{"--corpus", corpus, "--qa", bad}, "bad.csv"},
		{"unknown retriever", []string{"--corpus", corpus, "--qa", qa, "--retriever", "magic"}, "magic"},
		{"dense without encoder", []string{"--corpus", corpus, "--qa", qa, "--retriever", "dense"}, "--encoder"},
		{"bad k", []string{"--corpus", corpus, "--qa", qa, "--k", "0"}, "--k"},
		{"pseudo-queries and qa", []string{"--corpus", corpus, "--qa", qa, "--pseudo-queries", "ict"}, "--pseudo-queries"},
		{"unknown pseudo-queries", []string{"--corpus", corpus, "--pseudo-queries", "cloze"}, "cloze"},
		{"pseudo-keep out of range", []string{"--corpus", corpus, "--pseudo-queries", "ict", "--pseudo-keep", "2"}, "--pseudo-keep"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stderr := runErr(append([]string{"eval", "retrieval", "--db", db}, c.args...)...)
			if code == 0 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want failure naming %q", code, stderr, c.want)
			}
		})
	}
	list := run(t, "runs", "list", "--db", db, "--json")
	if !strings.Contains(list, res.RunID) {
		t.Fatalf("the earlier run was lost:\n%s", list)
	}
	if !strings.Contains(list, `"failed"`) {
		t.Errorf("a failed evaluation should be stored with status failed:\n%s", list)
	}
}

func TestXLAWithoutPluginFailsFast(t *testing.T) {
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", t.TempDir())
	t.Setenv("GOMLX_BACKEND", "go") // restored after the test
	code, stderr := runErr("--backend", "xla", "runs", "list", "--db", filepath.Join(t.TempDir(), "x.db"))
	if code == 0 {
		t.Skip("a PJRT plugin is installed here")
	}
	if !strings.Contains(stderr, "PJRT_PLUGIN_LIBRARY_PATH") {
		t.Fatalf("want a message naming PJRT_PLUGIN_LIBRARY_PATH, got %q", stderr)
	}
}

// --backend is configuration passed to the model loads, not a change of the
// process environment that later code would read.
func TestBackendFlagLeavesEnvironment(t *testing.T) {
	t.Setenv("GOMLX_BACKEND", "")
	run(t, "--backend", "go", "runs", "list", "--db", filepath.Join(t.TempDir(), "x.db"))
	if v := os.Getenv("GOMLX_BACKEND"); v != "" {
		t.Fatalf("GOMLX_BACKEND = %q after --backend go, want it unchanged (empty)", v)
	}
}

// --cpuprofile writes a pprof profile (gzip-compressed protobuf) once the
// command has run, and an unwritable path is an error naming the flag.
func TestCPUProfileFlag(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.prof")
	run(t, "--cpuprofile", prof, "runs", "list", "--db", filepath.Join(dir, "x.db"))
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("%s: want a gzip-compressed pprof profile, got %d bytes starting %q", prof, len(b), b[:min(len(b), 8)])
	}
	code, stderr := runErr("--cpuprofile", filepath.Join(dir, "no", "such", "dir", "cpu.prof"), "runs", "list", "--db", filepath.Join(dir, "x.db"))
	if code == 0 || !strings.Contains(stderr, "--cpuprofile") {
		t.Fatalf("unwritable --cpuprofile: exit %d, stderr %q; want an error naming the flag", code, stderr)
	}
}
