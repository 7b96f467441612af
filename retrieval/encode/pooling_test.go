package encode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
)

func TestDirPooling(t *testing.T) {
	st := func(pool string) func(string) error {
		return func(dir string) error {
			return hf.WriteSentenceTransformer(dir, hf.SentenceTransformer{Dim: 8, Pooling: pool, Normalize: true, MaxSeqLength: 16})
		}
	}
	tests := []struct {
		name    string
		setup   func(dir string) error
		want    bert.Pooling
		wantErr string
	}{
		{"bare HF directory", func(string) error { return nil }, bert.PoolCLS, ""},
		{"sentence-transformers mean", st("mean"), bert.PoolMean, ""},
		{"sentence-transformers cls", st("cls"), bert.PoolCLS, ""},
		{"malformed pooling config", func(dir string) error {
			if err := st("mean")(dir); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, hf.STPoolingDir, hf.ConfigName), []byte("{"), 0o644)
		}, "", hf.STPoolingDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			got, err := DirPooling(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("DirPooling = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
