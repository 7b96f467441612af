package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/tokenizer/learn"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// Issue 30: `tokenizer train` and `export` honour --json and are recorded
// as runs (listed by `runs list`, a file of the written directory their artifact).
func TestTokenizerTrainAndExportJSONRuns(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir, corpus, _ := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	var tok learn.TrainResult
	out := run(t, "tokenizer", "train", "--db", db, "--corpus", corpus, "--kind", "wordpiece", "--vocab-size", "300", "--out", filepath.Join(dir, "wp"), "--json")
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.RunID == "" || tok.Kind != "wordpiece" || tok.Size < 100 || tok.Dir != filepath.Join(dir, "wp") {
		t.Fatalf("tokenizer train --json: %+v (%v)\n%s", tok, err, out)
	}
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	var exp filtertrain.ExportResult
	out = run(t, "export", "--db", db, "--retriever", bert, "--out", filepath.Join(dir, "st"), "--json")
	if err := json.Unmarshal([]byte(out), &exp); err != nil || exp.RunID == "" || exp.Kind != "retriever" || exp.Source != bert {
		t.Fatalf("export --json: %+v (%v)\n%s", exp, err, out)
	}
	if text := run(t, "export", "--db", db, "--retriever", bert, "--out", filepath.Join(dir, "st2")); !strings.HasPrefix(text, "run ") || !strings.Contains(text, "exported "+bert) {
		t.Errorf("export without --json: %q", text)
	}
	list := run(t, "runs", "list", "--db", db)
	for _, id := range []string{tok.RunID, exp.RunID} {
		if !strings.Contains(list, id) {
			t.Errorf("run %s missing from runs list:\n%s", id, list)
		}
	}
	show := run(t, "runs", "show", "--db", db, exp.RunID)
	if !strings.Contains(show, filepath.Join(dir, "st")) {
		t.Errorf("runs show %s lacks the exported directory:\n%s", exp.RunID, show)
	}
}
