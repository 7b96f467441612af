package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A train filter output directory resolves to its best checkpoint, and the
// command says which one it used; model directories and missing paths pass
// through unchanged.
func TestModelDirResolvesTrainingOutput(t *testing.T) {
	out := t.TempDir()
	ck := filepath.Join(out, "checkpoint-8")
	os.MkdirAll(ck, 0o755)
	os.WriteFile(filepath.Join(ck, "config.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(ck, "trainer_state.json"), []byte(`{"best_model_checkpoint": "checkpoint-8"}`), 0o644)
	var errb bytes.Buffer
	g := &globals{Err: &errb}
	got, err := modelDir(g, "model", out)
	if err != nil || got != ck {
		t.Fatalf("modelDir = %q, %v; want %s", got, err, ck)
	}
	if msg := errb.String(); !strings.Contains(msg, "--model "+out+" is a training output directory: using its best checkpoint "+ck) {
		t.Errorf("message %q", msg)
	}
	for _, dir := range []string{ck, filepath.Join(out, "missing")} {
		errb.Reset()
		if got, err := modelDir(g, "model", dir); err != nil || got != dir || errb.Len() != 0 {
			t.Errorf("modelDir(%s) = %q, %v, %q", dir, got, err, errb.String())
		}
	}
}
