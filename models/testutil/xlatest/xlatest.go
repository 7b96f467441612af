// Package xlatest runs a package's fixture-parity tests through XLA.
package xlatest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/ragforge/ragforge/models/backend"
)

// RunXLAParity re-runs the calling test binary's tests matching pattern with
// backend.TestEnvVar=xla, so a package's fixture-parity tests run through XLA exactly
// as they run on the pure-Go backend. It skips, with a message saying what
// to install, when no PJRT plugin is available. For use from tests only.
func RunXLAParity(t *testing.T, pattern string) {
	t.Helper()
	if os.Getenv(backend.TestEnvVar) != "" {
		t.Skip("already running under " + backend.TestEnvVar)
	}
	if len(backend.XLAPlugins()) == 0 {
		t.Skipf("SKIP: no PJRT plugin found (set $%s to the directory of pjrt_c_api_cpu_plugin.so or pjrt_c_api_cuda_plugin.so); XLA parity not checked", backend.PluginPathEnv)
	}
	cmd := exec.Command(os.Args[0], "-test.run", pattern, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), backend.TestEnvVar+"=xla")
	out, err := cmd.CombinedOutput()
	t.Logf("XLA run of %s:\n%s", pattern, out)
	if err != nil {
		t.Fatalf("fixture parity through XLA failed: %v", err)
	}
}
