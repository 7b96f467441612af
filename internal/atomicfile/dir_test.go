package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDir(t *testing.T) {
	errFill := errors.New("fill failed")
	write := func(content string) func(string) error {
		return func(tmp string) error {
			if err := os.MkdirAll(filepath.Join(tmp, "sub"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(tmp, "sub", "f.txt"), []byte(content), 0o644)
		}
	}
	tests := []struct {
		name     string
		existing string // content of dir/sub/f.txt before, "" = no dir, "-" = an empty dir
		replace  bool
		fill     func(string) error
		wantErr  string
		want     string // dir/sub/f.txt after, "" = no dir
	}{
		{"new dir", "", false, write("new"), "", "new"},
		{"existing refused", "old", false, write("new"), "already exists", "old"},
		{"empty existing replaced", "-", false, write("new"), "", "new"},
		{"existing replaced", "old", true, write("new"), "", "new"},
		{"failed fill keeps existing", "old", true, func(tmp string) error { write("partial")(tmp); return errFill }, "fill failed", "old"},
		{"failed fill leaves nothing", "", false, func(string) error { return errFill }, "fill failed", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "a", "out")
			if tc.existing == "-" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			} else if tc.existing != "" {
				if err := write(tc.existing)(dir); err != nil {
					t.Fatal(err)
				}
			}
			err := Dir(dir, tc.replace, tc.fill)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Dir = %v, want error %q", err, tc.wantErr)
			}
			got, rerr := os.ReadFile(filepath.Join(dir, "sub", "f.txt"))
			if tc.want == "" {
				if !errors.Is(rerr, os.ErrNotExist) {
					t.Errorf("dir after a failed first publish: %v", rerr)
				}
			} else if string(got) != tc.want {
				t.Errorf("content %q (%v), want %q", got, rerr, tc.want)
			}
			ents, _ := os.ReadDir(filepath.Dir(dir))
			for _, e := range ents {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temporary %s left behind", e.Name())
				}
			}
			if info, err := os.Stat(dir); err == nil && info.Mode().Perm() != 0o755 {
				t.Errorf("mode %v, want 0755", info.Mode().Perm())
			}
		})
	}
}
