package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 30, acceptance 3: every input has a bound, enforced before the
// work it would blow up, and going over it is an error naming the limit
// and the flag that raises it. One case per bound; each crashed with
// out-of-memory before (10,000,000 new tokens reached 21 GB, an 8,000-word
// score input 3 GB, label import /dev/zero 5 GB, a 20 MB CSV field 2.6 GB).
// The limits are lowered by their flags where the default would take long
// to reach; the default of each is the flag's, checked apart.
func TestInputBounds(t *testing.T) {
	t5 := sharedDir(t, "fixtures/t5-flan-tiny")
	dir, _, qa := sampleFiles(t)
	big := filepath.Join(dir, "big.csv")
	if err := os.WriteFile(big, []byte("id,text\nd1,short text\nd2,"+strings.Repeat("word ", 400)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	words := strings.Repeat("hematoxylin stains nuclei ", 400)
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{"generate new tokens", []string{"infer", "generate", "--model", t5, "--input", "x", "--max-new-tokens", "100000000"},
			[]string{"--max-new-tokens 100000000: over the limit of 4096"}},
		{"generate input", []string{"infer", "generate", "--model", t5, "--input", words},
			[]string{"--input is", "tokens, over the limit of 512 (--max-input-tokens"}},
		{"score input", []string{"infer", "score", "--model", t5, "--input", words, "--target", "x"},
			[]string{"--input is", "tokens, over the limit of 512 (--max-input-tokens"}},
		{"score target", []string{"infer", "score", "--model", t5, "--input", "x", "--target", words, "--max-input-tokens", "100"},
			[]string{"--target is", "tokens, over the limit of 100 (--max-input-tokens"}},
		{"label import endless file", []string{"label", "import", "/dev/zero", "--max-bytes", "65536"},
			[]string{"/dev/zero: over the limit of 65536 bytes (max-bytes)"}},
		{"corpus field", []string{"eval", "retrieval", "--corpus", big, "--qa", qa, "--max-field-bytes", "1024"},
			[]string{`line 3: field "text"`, "2000 bytes, over the limit of 1024 bytes per field (max-field-bytes)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runErr(append(tc.args, "--db", filepath.Join(t.TempDir(), "runs.db"))...)
			for _, w := range tc.want {
				if code == 0 || !strings.Contains(stderr, w) {
					t.Errorf("exit %d, stderr %q; want an error containing %q", code, stderr, w)
				}
			}
		})
	}
	// The defaults are bounds too.
	root := newRoot(&globals{})
	for _, c := range []struct{ cmd, flag, want string }{
		{"infer generate", "max-input-tokens", "512"},
		{"infer score", "max-input-tokens", "512"},
		{"label import", "max-bytes", "1073741824"},
		{"eval retrieval", "max-field-bytes", "8388608"},
	} {
		cmd, _, err := root.Find(strings.Fields(c.cmd))
		if err != nil {
			t.Fatal(err)
		}
		if f := cmd.Flags().Lookup(c.flag); f == nil || f.DefValue != c.want {
			t.Errorf("%s --%s: default %v, want %s", c.cmd, c.flag, f, c.want)
		}
	}
}

// Values of the bounding and sampling flags that make no sense are
// refused before the model loads (they were silently replaced: 0 and -1
// new tokens gave 32, a top-p of 2 disabled nucleus sampling).
func TestGenerateFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-new-tokens", "0"}, "--max-new-tokens 0: must be at least 1"},
		{[]string{"--max-new-tokens", "-1"}, "--max-new-tokens -1: must be at least 1"},
		{[]string{"--top-p", "2"}, "--top-p 2: want a probability mass in (0, 1]"},
		{[]string{"--top-p", "-0.5"}, "--top-p -0.5: want a probability mass in (0, 1]"},
		{[]string{"--sample", "--temperature", "0"}, "--temperature 0: must be positive"},
		{[]string{"--max-input-tokens", "0"}, "--max-input-tokens 0: must be at least 1"},
	} {
		args := append([]string{"infer", "generate", "--model", "/nonexistent/t5", "--input", "x", "--db", filepath.Join(t.TempDir(), "runs.db")}, tc.args...)
		if code, stderr := runErr(args...); code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
}

// Issue 30, acceptance 4: values that were accepted silently, or silently
// replaced by a default, are refused at the edge naming the flag.
func TestSilentAcceptsRefused(t *testing.T) {
	t5 := sharedDir(t, "fixtures/t5-flan-tiny")
	bert := sharedDir(t, "fixtures/bert-tiny")
	corpus := []string{"--corpus", "/nonexistent/corpus.jsonl", "--qa", "/nonexistent/qa.csv"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"eval", "retrieval", "--bm25-k1", "-5"}, corpus...), `field "K1": -5 is not in [0, 100]`},
		{append([]string{"eval", "retrieval", "--bm25-k1", "1e18"}, corpus...), `field "K1": 1e+18 is not in [0, 100]`},
		{append([]string{"eval", "retrieval", "--bm25-b", "-0.5"}, corpus...), `field "B": -0.5 is not in [0, 1]`},
		{append([]string{"eval", "retrieval", "--k", "1,,2"}, corpus...), `--k "1,,2": entry 2 is empty`},
		{[]string{"label", "review", "--flip", "-1"}, "--flip -1: must be at least 0"},
		{[]string{"serve", "--pipeline", "/nonexistent/p", "--allowed-host", ""}, "--allowed-host ''"},
		{[]string{"serve", "--pipeline", "/nonexistent/p", "--request-timeout", "1ns"}, "--request-timeout 1ns: under 10ms"},
		{[]string{"serve", "--pipeline", "/nonexistent/p", "--max-queue", "0"}, "--max-queue 0: must be positive"},
		{[]string{"train", "filter", "--model", t5, "--train", "/nonexistent/t.jsonl", "--out", "/nonexistent/f", "--lr", "1e9"}, "--lr 1e+09: want a learning rate in (0, 1]"},
		{[]string{"pipeline", "build", "--corpus", "/nonexistent/c.jsonl", "--filter", bert, "--out", "/nonexistent/p"}, `--filter ` + bert + `: config.json model_type "bert" is not a T5 filter`},
		{[]string{"pipeline", "build", "--corpus", "/nonexistent/c.jsonl", "--reranker", t5, "--out", "/nonexistent/p"}, `--reranker ` + t5 + `: config.json model_type "t5" is not a BERT cross-encoder`},
	} {
		t.Run(strings.Join(tc.args[:3], " "), func(t *testing.T) {
			code, stderr := runErr(append(tc.args, "--db", filepath.Join(t.TempDir(), "runs.db"))...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.args, code, stderr, tc.want)
			}
		})
	}
}

// Issue 30, acceptance 7 (part): --union changed nothing at the default
// --depth 1000 (run.trec byte-identical): it is refused where it cannot
// have an effect, naming the chunk count, and outside the hybrid.
func TestUnionRefusedWhereItCannotAct(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--retriever", "hybrid", "--encoder", bert, "--union"}, "--union has no effect at --depth 1000: the corpus has"},
		{[]string{"--retriever", "bm25", "--union"}, "--union applies to --retriever hybrid only, not bm25"},
	} {
		args := append([]string{"eval", "retrieval", "--db", db, "--corpus", corpus, "--qa", qa}, tc.args...)
		if code, stderr := runErr(args...); code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
}
