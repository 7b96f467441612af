package trainer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveModelDir(t *testing.T) {
	mkCk := func(out, name, best string) {
		d := filepath.Join(out, name)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "config.json"), []byte("{}"), 0o644)
		os.WriteFile(filepath.Join(d, StateFile), []byte(`{"best_model_checkpoint": "`+best+`"}`), 0o644)
	}
	for _, tc := range []struct {
		name        string
		setup       func(dir string)
		want, which string
		err         string
	}{
		{"a model directory", func(d string) { os.WriteFile(filepath.Join(d, "config.json"), []byte("{}"), 0o644) }, "", "", ""},
		{"best link", func(d string) {
			mkCk(d, "checkpoint-10", "")
			mkCk(d, "checkpoint-20", "")
			os.Symlink("checkpoint-10", filepath.Join(d, BestLink))
		}, "checkpoint-10", "best", ""},
		{"best in state", func(d string) {
			mkCk(d, "checkpoint-10", "")
			mkCk(d, "checkpoint-20", "checkpoint-10")
		}, "checkpoint-10", "best", ""},
		{"latest", func(d string) {
			mkCk(d, "checkpoint-10", "")
			mkCk(d, "checkpoint-20", "")
		}, "checkpoint-20", "latest", ""},
		{"neither", func(string) {}, "", "", "no config.json, and no checkpoint-<step>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(dir)
			got, which, err := ResolveModelDir(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), dir) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != filepath.Join(dir, tc.want) || which != tc.which {
				t.Errorf("got %s (%q), want %s (%q)", got, which, filepath.Join(dir, tc.want), tc.which)
			}
		})
	}
}
