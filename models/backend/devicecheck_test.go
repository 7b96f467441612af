package backend

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The GPU check script (scripts/device/check.sh, `make device-check`) fails
// at once, exit 2, naming what is missing, on a machine without an NVIDIA GPU
// or without a CUDA PJRT plugin, instead of running anything.
func TestDeviceCheckFailsFast(t *testing.T) {
	script, err := filepath.Abs("../../scripts/device/check.sh")
	if err != nil {
		t.Fatal(err)
	}
	fakeGPU := t.TempDir() // an nvidia-smi that lists a GPU
	if err := os.WriteFile(filepath.Join(fakeGPU, "nvidia-smi"), []byte("#!/bin/sh\necho 'NVIDIA H200'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	noTools := t.TempDir() // neither nvidia-smi nor python3
	for _, c := range []struct {
		name, path, want string
	}{
		{"no GPU", noTools + ":/usr/bin:/bin", "no NVIDIA GPU"},
		{"GPU but no plugin", fakeGPU + ":/usr/bin:/bin", "no CUDA PJRT plugin"}, // Debian python3 has no jax_plugins
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.path == noTools+":/usr/bin:/bin" {
				if _, err := os.Stat("/usr/bin/nvidia-smi"); err == nil {
					t.Skip("this machine has nvidia-smi")
				}
			}
			cmd := exec.Command("/bin/bash", script)
			cmd.Env = []string{"PATH=" + c.path, "PJRT_PLUGIN_LIBRARY_PATH=" + t.TempDir(), "OUT=" + t.TempDir()}
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
				t.Fatalf("check.sh: err %v, output %q; want exit 2 and %q", err, out, c.want)
			}
		})
	}
}
