package archtest

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCommandsAreThin holds cmd/ragforge to its limits: every capability
// lives in a library a notebook can call, the command only parses, calls and
// prints.
func TestCommandsAreThin(t *testing.T) {
	v, err := ThinViolations("../../cmd/ragforge", MaxCommandFuncLines, MaxCommandFileLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range v {
		t.Error("cmd/ragforge/" + s)
	}
}

func TestThinViolations(t *testing.T) {
	dir := t.TempDir()
	long := "package p\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", 4) + "}\n\nfunc short() {\n\t_ = func() {\n\t\t_ = 2\n\t}\n}\n"
	for name, src := range map[string]string{"a.go": long, "a_test.go": long} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name             string
		maxFunc, maxFile int
		want             []string
	}{
		{"within limits", 6, 20, nil},
		{"long function", 5, 20, []string{"a.go:3: long is 6 lines, want at most 5"}},
		{"long literal and file", 2, 10, []string{
			"a.go: 14 lines, want at most 10",
			"a.go:3: long is 6 lines, want at most 2",
			"a.go:10: short is 5 lines, want at most 2",
			"a.go:11: func literal is 3 lines, want at most 2",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ThinViolations(dir, tc.maxFunc, tc.maxFile)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
