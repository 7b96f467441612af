// Package backend chooses the GoMLX backend ragforge computes on.
//
// The default is GoMLX's pure-Go backend ("go", a.k.a. simplego), which needs
// nothing installed. XLA (CPU or CUDA) is used only when asked for, by flag or
// by $GOMLX_BACKEND, and only with a PJRT plugin already on the machine:
// ragforge turns off GoMLX's plugin auto-install, so no code path downloads a
// plugin or hangs when offline.
//
// On the pure-Go backend, matrix products run on OpenBLAS (package
// models/backend/hook, imported here so every process that computes gets it):
// 20–25× GoMLX v0.26's own Go matmul on a large product here (BenchmarkMatmul).
package backend

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/backends/xla"

	"github.com/ragforge/ragforge/models/backend/hook"
)

// EnvVar is GoMLX's own variable for the backend configuration
// ("go", "xla", "xla:cuda", "xla:/abs/path/pjrt_c_api_cuda_plugin.so").
const EnvVar = backends.ConfigEnvVar

// PluginPathEnv is where the XLA backend looks for PJRT plugins
// (a colon-separated list of directories).
const PluginPathEnv = "PJRT_PLUGIN_LIBRARY_PATH"

func init() {
	// Never let the XLA backend download a plugin (it would fail or hang offline).
	xla.EnableAutoInstall(false)
}

// DefaultGoOptions configures the pure-Go backend when no options are given.
// GoMLX v0.26's simplego runs independent ops in parallel by default, and
// with few cores (2 here) ops that each wait for a worker of the same pool
// (DotGeneral's small-matrix path) deadlock. Running ops one at a time keeps
// each op's own parallelism and avoids that.
const DefaultGoOptions = "ops_sequential"

// Name resolves the backend configuration: the flag when set, else
// $GOMLX_BACKEND, else "go".
func Name(flag string) string {
	if flag != "" {
		return flag
	}
	if v := os.Getenv(EnvVar); v != "" {
		return v
	}
	return "go"
}

var (
	mu    sync.Mutex
	cache = map[string]backends.Backend{}
)

// New returns the backend named by config (see Name), creating it once per
// process. Errors:
//   - an unknown backend name;
//   - "xla" without a PJRT plugin: the error says what to install and where
//     ($PJRT_PLUGIN_LIBRARY_PATH), instead of trying to download one.
func New(config string) (backends.Backend, error) {
	config = Name(config)
	mu.Lock()
	defer mu.Unlock()
	if b, ok := cache[config]; ok {
		return b, nil
	}
	name, opts, _ := strings.Cut(config, ":")
	var (
		b   backends.Backend
		err error
	)
	switch name {
	case "go", "simplego":
		if opts == "" {
			opts = DefaultGoOptions
		}
		b, err = simplego.New(opts)
	case "xla", "stablehlo", "pjrt":
		b, err = newXLA(opts)
	default:
		return nil, fmt.Errorf("backend %q: unknown (want \"go\" or \"xla[:plugin]\")", config)
	}
	if err != nil {
		return nil, err
	}
	cache[config] = b
	return b, nil
}

func newXLA(plugin string) (b backends.Backend, err error) {
	name, _, _ := strings.Cut(plugin, ",")
	if !filepath.IsAbs(name) {
		available := xla.GetAvailablePlugins()
		if len(available) == 0 {
			return nil, fmt.Errorf("backend xla: no PJRT plugin found: install one (CPU: pjrt_c_api_cpu_plugin.so from github.com/gomlx/pjrt-cpu-binaries; CUDA: the pjrt_c_api_cuda_plugin.so shipped by the jax-cuda12-pjrt/jax-cuda13-pjrt wheel) and set $%s to its directory, or pass --backend xla:/abs/path/to/plugin.so; $%s is %q",
				PluginPathEnv, PluginPathEnv, os.Getenv(PluginPathEnv))
		}
	}
	defer func() {
		// The PJRT loader may panic on a broken plugin; report it as an error.
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("backend xla:%s: %v", plugin, r)
		}
	}()
	b, err = xla.New(plugin)
	if err != nil {
		return nil, fmt.Errorf("backend xla:%s: %w", plugin, err)
	}
	return b, nil
}

// XLAPlugins lists the PJRT plugins the XLA backend can load (from
// $PJRT_PLUGIN_LIBRARY_PATH and the standard locations), without loading one
// and without downloading anything. Empty means --backend xla will fail.
func XLAPlugins() []string { return xla.GetAvailablePlugins() }

// TestEnvVar names the backend the fixture-parity tests run on (default
// "go"); the XLA parity tests set it to run the same checks through XLA.
const TestEnvVar = "RAGFORGE_TEST_BACKEND"

// Describe returns a one-line description of a backend for logs and run
// records; for the pure-Go backend it names the matmul in use.
func Describe(b backends.Backend) string {
	if _, ok := b.(*simplego.Backend); ok {
		return fmt.Sprintf("%s (%s; matmul: %s; %s)", b.Name(), b.Description(), hook.Status(), hook.ParallelStatus())
	}
	return fmt.Sprintf("%s (%s)", b.Name(), b.Description())
}
