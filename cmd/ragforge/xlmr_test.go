package main

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ragforge/ragforge/models/hf"
)

// An XLM-R retriever from models init goes through encode, eval retrieval
// (dense and hybrid, pre-encoded equal to on the fly, E5 prefixes) and
// export, which writes its sentence-transformers files with the 64-token
// limit its positions allow.
func TestXLMRRetrieverCLI(t *testing.T) {
	spm := sharedDir(t, "fixtures/tokenizer/spiece.model")
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	x := filepath.Join(dir, "me5")
	run(t, "models", "init", "--db", db, "--arch", "xlm-roberta", "--size", "tiny", "--tokenizer", spm, "--out", x)
	enc := filepath.Join(dir, "encoded")
	run(t, "encode", "--db", db, "--corpus", corpus, "--encoder", x, "--out", enc, "--query-prefix", "query: ", "--passage-prefix", "passage: ")
	for _, mode := range []string{"dense", "hybrid"} {
		common := []string{"--db", db, "--qa", qa, "--retriever", mode, "--encoder", x, "--k", "1,10"}
		fly := evalMetrics(t, append(common, "--corpus", corpus, "--query-prefix", "query: ", "--passage-prefix", "passage: ")...)
		pre := evalMetrics(t, append(common, "--corpus", "rag2:"+enc)...)
		if fly.Chunks == 0 || !reflect.DeepEqual(pre.Metrics, fly.Metrics) {
			t.Errorf("%s: pre-encoded %v, on the fly %v (%d chunks)", mode, pre.Metrics, fly.Metrics, fly.Chunks)
		}
	}
	st := filepath.Join(dir, "st")
	run(t, "export", "--db", db, "--retriever", x, "--out", st, "--query-prefix", "query: ", "--passage-prefix", "passage: ")
	got, ok, err := hf.ReadSentenceTransformer(st)
	want := hf.SentenceTransformer{Dim: 64, Pooling: "mean", Normalize: true, MaxSeqLength: 64, QueryPrompt: "query: ", DocumentPrompt: "passage: "}
	if err != nil || !ok || got != want {
		t.Errorf("exported: %+v (ok %v, %v), want %+v", got, ok, err, want)
	}
}
