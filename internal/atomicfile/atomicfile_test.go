package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	errFill := errors.New("fill failed")
	tests := []struct {
		name     string
		existing string // "" means no file before the write
		perm     os.FileMode
		fill     func(io.Writer) error
		wantErr  error
		want     string // content after the call
	}{
		{"new file", "", 0o644, func(w io.Writer) error { _, err := io.WriteString(w, "hello"); return err }, nil, "hello"},
		{"replaces existing", "old", 0o600, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }, nil, "new"},
		{"failed fill keeps existing", "old", 0o644, func(w io.Writer) error {
			io.WriteString(w, "partial")
			return errFill
		}, errFill, "old"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.json")
			if tc.existing != "" {
				if err := os.WriteFile(path, []byte(tc.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := Write(path, tc.perm, tc.fill)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Write = %v, want %v", err, tc.wantErr)
			}
			got, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if string(got) != tc.want {
				t.Fatalf("content = %q, want %q", got, tc.want)
			}
			if err == nil {
				st, _ := os.Stat(path)
				if st.Mode().Perm() != tc.perm {
					t.Fatalf("mode = %v, want %v", st.Mode().Perm(), tc.perm)
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				names := []string{}
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Fatalf("directory holds %v, want only out.json (temporary file left behind)", names)
			}
		})
	}
}

func TestWriteMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent", "out.json")
	if err := Write(path, 0o644, func(io.Writer) error { return nil }); err == nil {
		t.Fatal("Write into a missing directory: got nil error")
	}
}
