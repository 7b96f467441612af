package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/npy"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/models/hf"
)

func evalMetrics(t *testing.T, args ...string) evalRetrievalResult {
	t.Helper()
	var res evalRetrievalResult
	if err := json.Unmarshal([]byte(run(t, append(append([]string{"eval", "retrieval"}, args...), "--json")...)), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// Acceptance 5 on a small corpus: `encode` writes .npy files with the
// corpus's shape, and `eval retrieval --corpus rag2:DIR` gives exactly the
// metrics of encoding on the fly, prefixes included; a flag that disagrees
// with how the corpus was encoded is an error.
func TestEncodeThenEvalMatchesOnTheFly(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	enc := filepath.Join(dir, "encoded")
	var er encodeResult
	out := run(t, "encode", "--db", db, "--corpus", corpus, "--encoder", bert, "--out", enc, "--shard-size", "20",
		"--query-prefix", "question: ", "--passage-prefix", "passage: ", "--json")
	if err := json.Unmarshal([]byte(out), &er); err != nil {
		t.Fatal(err)
	}
	if er.Name != "corpus" || len(er.Embeddings) != 2 || len(er.Articles) != 2 {
		t.Fatalf("encode result %+v, want corpus in 2 shards", er)
	}
	rows := 0
	for _, f := range er.Embeddings {
		n, d, err := npy.ReadShape(f)
		if err != nil || d != 128 {
			t.Fatalf("%s: [%d, %d] %v, want D = 128", f, n, d, err)
		}
		rows += n
	}
	common := []string{"--db", db, "--qa", qa, "--retriever", "hybrid", "--encoder", bert, "--k", "1,2,4,8"}
	fly := evalMetrics(t, append(common, "--corpus", corpus, "--query-prefix", "question: ", "--passage-prefix", "passage: ")...)
	if rows != fly.Chunks || er.Rows != fly.Chunks {
		t.Fatalf("encoded %d rows (%d), on-the-fly eval has %d chunks", rows, er.Rows, fly.Chunks)
	}
	pre := evalMetrics(t, append(common, "--corpus", "rag2:"+enc)...)
	if pre.Chunks != fly.Chunks || pre.Queries != fly.Queries || !reflect.DeepEqual(pre.Metrics, fly.Metrics) {
		t.Errorf("pre-encoded: %d chunks %d queries %v\non the fly: %d chunks %d queries %v", pre.Chunks, pre.Queries, pre.Metrics, fly.Chunks, fly.Queries, fly.Metrics)
	}
	plain := evalMetrics(t, append(common, "--corpus", corpus)...)
	if reflect.DeepEqual(plain.Metrics, fly.Metrics) {
		t.Error("prefixes changed no metric: the comparison cannot tell whether they were applied")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pooling", "cls"}, "--pooling cls"}, // models init declared mean (1_Pooling), which encode used
		{[]string{"--query-prefix", "q: "}, "--query-prefix"},
		{[]string{"--chunk-size", "300"}, "--chunk-size"},
		{[]string{"--relevance", "span"}, "span"},
	} {
		args := append(append([]string{"eval", "retrieval", "--corpus", "rag2:" + enc}, common...), c.args...)
		if code, stderr := runErr(args...); code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %q", c.args, code, stderr, c.want)
		}
	}
	if code, stderr := runErr("encode", "--db", db, "--corpus", corpus, "--encoder", bert, "--out", enc); code == 0 || !strings.Contains(stderr, "already exists") {
		t.Errorf("encode over an existing corpus: exit %d, %q", code, stderr)
	}

	// pipeline build indexes the stored vectors and records how queries are encoded.
	pipe := filepath.Join(dir, "pipe")
	run(t, "pipeline", "build", "--db", db, "--corpus", "rag2:"+enc, "--retriever", bert, "--out", pipe)
	m, err := pipeline.ReadManifest(filepath.Join(pipe, pipeline.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if r := m.Retrieval; len(m.Corpora) != 1 || m.Corpora[0] != "corpus" || r.QueryInstruction != "question: " || r.DocInstruction != "passage: " || r.Pooling != "mean" || r.MaxLength != 512 {
		t.Errorf("pipeline manifest: corpora %v, retrieval %+v", m.Corpora, r)
	}
	p, err := pipeline.Load(pipe)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if c := p.Corpora[0]; c.Dense == nil || c.Dense.Len() != er.Rows || len(c.Chunks) != er.Rows {
		t.Errorf("pipeline corpus: %d chunks, dense %v", len(c.Chunks), c.Dense)
	}
	if code, stderr := runErr("pipeline", "build", "--db", db, "--corpus", "rag2:"+enc, "--out", filepath.Join(dir, "pipe2")); code == 0 || !strings.Contains(stderr, "--retriever") {
		t.Errorf("pipeline build without --retriever: exit %d, %q", code, stderr)
	}
}

// infer embed truncates as /v1/embeddings does and needs an input.
func TestInferEmbedTruncatesAndNeedsInput(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	long := strings.Repeat("fixação em formol tamponado ", 300) // well over 512 tokens
	embed := func(args ...string) []float32 {
		var e struct {
			Embedding []float32 `json:"embedding"`
		}
		if err := json.Unmarshal([]byte(run(t, append([]string{"infer", "embed", "--model", bert, "--json"}, args...)...)), &e); err != nil {
			t.Fatal(err)
		}
		return e.Embedding
	}
	full := embed("--input", long)
	// Truncated to 512 tokens, the tail does not matter.
	if longer := embed("--input", long+" hematoxilina eosina"); !reflect.DeepEqual(full, longer) {
		t.Error("text past the 512-token limit changed the embedding")
	}
	// --max-length 16 truncates further: another vector.
	short := embed("--input", long, "--max-length", "16")
	if reflect.DeepEqual(short, full) {
		t.Error("--max-length 16 gave the 512-token embedding")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--input is required"},
		{[]string{"--input", ""}, "--input is required"},
		{[]string{"--input", "x", "--max-length", "1"}, "--max-length"},
		{[]string{"--input", "x", "--input-type", "passage"}, "--input-type"},
	} {
		if code, stderr := runErr(append([]string{"infer", "embed", "--model", bert}, c.args...)...); code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}

// export --retriever writes a sentence-transformers directory with the
// source's settings unless flags override them.
func TestExportRetrieverCLI(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	st := filepath.Join(dir, "st")
	run(t, "export", "--db", db, "--retriever", bert, "--out", st, "--pooling", "mean", "--max-length", "256", "--query-prefix", "query: ")
	again := filepath.Join(dir, "st2")
	run(t, "export", "--db", db, "--retriever", st, "--out", again) // settings come from st's files
	got, ok, err := hf.ReadSentenceTransformer(again)
	want := hf.SentenceTransformer{Dim: 128, Pooling: "mean", Normalize: true, MaxSeqLength: 256, QueryPrompt: "query: "}
	if err != nil || !ok || got != want {
		t.Errorf("re-exported: %+v (ok %v, %v), want %+v", got, ok, err, want)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--retriever", bert, "--out", filepath.Join(dir, "x"), "--pooling", "max"}, "want cls or mean"},
		{[]string{"--from", bert, "--out", filepath.Join(dir, "y"), "--pooling", "mean"}, "--pooling applies to --retriever"},
		{[]string{"--retriever", bert, "--out", st}, "already exists"},
	} {
		if code, stderr := runErr(append([]string{"export", "--db", db}, c.args...)...); code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}
