package hook

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestCheckLinked(t *testing.T) {
	mod := func(v string) *debug.Module { return &debug.Module{Path: GoMLXModule, Version: v} }
	other := func() {}
	tests := []struct {
		name string
		deps []*debug.Module
		slot any
		want string // "" = accepted
	}{
		{"this binary", buildDeps(), native, ""},
		{"no build info", nil, native, ""},
		{"pinned version", []*debug.Module{{Path: "x/y", Version: "v1"}, mod(GoMLXVersion)}, native, ""},
		{"replaced by the same version", []*debug.Module{{Path: GoMLXModule, Version: "v0.28.2", Replace: mod(GoMLXVersion)}}, native, ""},
		{"newer GoMLX", []*debug.Module{mod("v0.28.2")}, native, "built with github.com/gomlx/gomlx v0.28.2"},
		{"empty slot", nil, executor(nil), "slot is empty"},
		{"another function in the slot", nil, other, "executor table changed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLinked(tc.deps, tc.slot)
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("checkLinked = %v, want %q", err, tc.want)
			}
		})
	}
}
