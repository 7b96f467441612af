package t5

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

// LoadWithTokenizer loads the fixture with a tokenizer that fits its
// embedding, and names the directory when a file is missing.
func TestLoadWithTokenizer(t *testing.T) {
	dir := testutil.SharedPath(t, "fixtures/t5-flan-tiny")
	m, tok, err := LoadWithTokenizer(dir, "go")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Len() > m.Config.VocabSize || tok.Len() == 0 {
		t.Errorf("tokenizer %d tokens, model vocab_size %d", tok.Len(), m.Config.VocabSize)
	}
	bad := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadWithTokenizer(bad, "go"); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("no weights: err = %v, want one naming %s", err, bad)
	}
}
