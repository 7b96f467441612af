// Package testutil holds helpers shared by ragforge's tests.
package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// SharedEnvVar, when set, is the directory used instead of ../shared (for a
// test binary run outside its checkout, as on a GPU machine).
const SharedEnvVar = "RAGFORGE_SHARED"

// SharedPath returns <module root>/../shared/<rel> (or $RAGFORGE_SHARED/<rel>),
// the read-only reference data and fixtures laid beside a checkout, or skips
// the test with a visible message when it is missing (a user's clone has no
// ../shared; CI always has it).
func SharedPath(t testing.TB, rel string) string {
	t.Helper()
	if d := os.Getenv(SharedEnvVar); d != "" {
		p := filepath.Join(d, rel)
		if _, err := os.Stat(p); err != nil {
			t.Skipf("SKIP: %s not found ($%s=%s): %v", p, SharedEnvVar, d, err)
		}
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("SKIP: %s not found (needs ../shared beside the checkout): %v", p, err)
	}
	return p
}
