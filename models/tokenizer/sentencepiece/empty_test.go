package sentencepiece

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A 0-byte spiece.model says so, instead of failing on a missing unk_id.
func TestLoadEmptyModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spiece.model")
	os.WriteFile(path, nil, 0o644)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "file is empty (0 bytes)") {
		t.Errorf("error %v", err)
	}
}
