package backend

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsPureGo(t *testing.T) {
	t.Setenv(EnvVar, "")
	os.Unsetenv(EnvVar)
	if got := Name(""); got != "go" {
		t.Fatalf("Name(\"\") = %q, want \"go\"", got)
	}
	b, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(b.Name()), "go") {
		t.Fatalf("default backend %q, want go", b.Name())
	}
	// Importing this package is what puts the pure-Go backend's matmul on OpenBLAS.
	if d := Describe(b); !strings.Contains(d, "matmul: OpenBLAS") {
		t.Fatalf("Describe = %q, want the OpenBLAS matmul", d)
	}
}

func TestFlagOverridesEnv(t *testing.T) {
	t.Setenv(EnvVar, "xla")
	if got := Name("go"); got != "go" {
		t.Fatalf("Name(\"go\") with env xla = %q", got)
	}
	if got := Name(""); got != "xla" {
		t.Fatalf("Name(\"\") with env xla = %q", got)
	}
}

func TestUnknownBackend(t *testing.T) {
	if _, err := New("tpu-magic"); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("want unknown-backend error, got %v", err)
	}
}

// Without a plugin, XLA must fail fast and say what to install, never download.
func TestXLAWithoutPluginFailsFast(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(PluginPathEnv, dir)
	start := time.Now()
	_, err := New("xla")
	if err == nil {
		t.Skip("a PJRT plugin is installed on this machine; nothing to check")
	}
	if !strings.Contains(err.Error(), PluginPathEnv) {
		t.Fatalf("error should name %s: %v", PluginPathEnv, err)
	}
	t.Logf("failed in %v with: %v", time.Since(start), err)
}
