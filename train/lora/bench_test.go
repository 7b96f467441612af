package lora

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/decoder"
)

// A bench step at the fixture's shape trains the LoRA weights alone: AdamW
// holds two moments per LoRA weight and none for a frozen one.
func TestBenchStepKeepsNoFrozenState(t *testing.T) {
	p := filepath.Join(testutil.SharedPath(t, "fixtures/qwen2-tiny"), "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := decoder.ParseConfig(p, b)
	if err != nil {
		t.Fatal(err)
	}
	r, err := BenchStep("go", c, decoder.LoRA{R: 8, Alpha: 16, TargetModules: []string{AllLinear}}, 2, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.OptimizerOnFrozen != 0 || r.OptimizerFloats != 2*r.TrainableParams || r.TrainableParams != 2*8*(128+96+96+128+224+224+224) {
		t.Fatalf("%+v: want AdamW state for the LoRA weights only", r)
	}
	if r.FrozenParams != c.Parameters() {
		t.Errorf("frozen %d, want the base model's %d", r.FrozenParams, c.Parameters())
	}
}

// TestBenchQwen25HalfB is the real-size LoRA step: Qwen2.5-0.5B
// shape, batch 2 × 512 tokens, r 8 on every projection. It runs only with
// RAGFORGE_LORA_BENCH set (to the number of layers, "24" for the full
// model; fewer to sample the cost per layer) and logs time and peak RSS.
func TestBenchQwen25HalfB(t *testing.T) {
	layers := os.Getenv("RAGFORGE_LORA_BENCH")
	if layers == "" {
		t.Skip("set RAGFORGE_LORA_BENCH=24 to run the Qwen2.5-0.5B LoRA step")
	}
	n, err := strconv.Atoi(layers)
	if err != nil || n < 1 {
		t.Fatalf("RAGFORGE_LORA_BENCH=%q: want a layer count", layers)
	}
	c := decoder.Qwen25HalfBConfig()
	c.NumHiddenLayers = n
	r, err := BenchStep("", c, decoder.LoRA{R: 8, Alpha: 16, TargetModules: []string{AllLinear}}, 2, 512, 2)
	if err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d layers: %+v; peak RSS %.2f GiB; GOMAXPROCS %d", n, r, float64(ru.Maxrss)/(1<<20), runtime.GOMAXPROCS(0))
	if r.OptimizerOnFrozen != 0 || r.OptimizerFloats != 2*r.TrainableParams {
		t.Errorf("optimizer state beyond the LoRA weights: %+v", r)
	}
}
