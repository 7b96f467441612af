package memory

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/xlmr"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1024", 1024, true}, {"8GiB", 8 << 30, true}, {"1.5 GiB", 3 << 29, true}, {"500MB", 500e6, true},
		{"64KiB", 64 << 10, true}, {"2TB", 2e12, true}, {"100B", 100, true},
		{"", 0, false}, {"0", 0, false}, {"-1GiB", 0, false}, {"lots", 0, false}, {"8GB/s", 0, false}, {"NaN", 0, false},
	} {
		got, err := ParseBytes(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestParameterCounts checks the estimates count the published sizes:
// bge-large-en-v1.5 335M, bge-m3 568M, flan-t5-large 783M.
func TestParameterCounts(t *testing.T) {
	large, flan := bert.LargeConfig(30522), t5.LargeConfig()
	for _, tc := range []struct {
		name      string
		e         Estimate
		want      float64 // millions
		embedding int64   // the largest variable's elements: the word embeddings
	}{
		{"bge-large", Retriever(large, "bert", 4096, 512), 335, 30522 * 1024},
		{"bge-m3", Retriever(xlmr.BGEM3Config(), "xlm-roberta", 4096, 512), 568, 250002 * 1024},
		{"flan-t5-large", Filter(flan, 4, 512, 2), 783, 32128 * 1024},
	} {
		if got := float64(tc.e.Params) / 1e6; math.Abs(got-tc.want) > 0.01*tc.want {
			t.Errorf("%s: %.1fM parameters, want %.0fM ±1%%", tc.name, got, tc.want)
		}
		if want := 3 * 4 * tc.embedding; tc.e.Update != want || tc.e.Total() != tc.e.Weights+tc.e.Gradients+tc.e.Optimizer+tc.e.Activations+want {
			t.Errorf("%s: update temporaries %d bytes, want three float32 copies of the embeddings (%d)", tc.name, tc.e.Update, want)
		}
		if tc.e.Optimizer != 2*tc.e.Weights || tc.e.Gradients != 2*tc.e.Weights || tc.e.Activations <= 0 ||
			tc.e.CheckpointedActivations >= tc.e.Activations {
			t.Errorf("%s: inconsistent estimate %+v", tc.name, tc.e)
		}
		t.Log(tc.e)
	}
}

// TestActivationsScale: activations grow linearly in the batch and faster
// than linearly in the length (attention scores).
func TestActivationsScale(t *testing.T) {
	c := t5.DefaultConfig()
	a1, a2 := Filter(c, 1, 256, 2).Activations, Filter(c, 2, 256, 2).Activations
	if a2 != 2*a1 {
		t.Errorf("batch 2: %d, want 2 × %d", a2, a1)
	}
	if l2 := Filter(c, 1, 512, 2).Activations; l2 <= 2*a1 {
		t.Errorf("length 512: %d, want > 2 × %d", l2, a1)
	}
	b := xlmr.TinyConfig(600)
	if r := Retriever(b, "xlm-roberta", 4096, 64); r.Activations != Retriever(b, "xlm-roberta", 4096+63, 64).Activations {
		t.Errorf("a partial row changed the GradCache pass")
	}
}

func TestCheck(t *testing.T) {
	// Peaks (× 1.25): big 1750, small 625, checkpointed 512, fixed 500.
	big := Estimate{What: "x", Weights: 100, Gradients: 100, Optimizer: 200, Activations: 1000, CheckpointedActivations: 10, PeakFactor: 1.25}
	small := big
	small.Activations = 100
	for _, tc := range []struct {
		name  string
		e     Estimate
		avail int64
		opts  []Option
		want  []string // substrings; nil: no error
		not   string   // a substring the error must not have
	}{
		{"fits", big, 2000, nil, nil, ""},
		{"unknown limit", big, 0, nil, nil, ""},
		{"option fits", big, 800, []Option{{"--too-big", big}, {"--batch-size 1", small}}, []string{"exceeds", "--gradient-checkpointing fits", "--batch-size 1 fits"}, ""},
		{"only checkpointing fits", big, 600, []Option{{"--batch-size 1", small}}, []string{"exceeds", "--gradient-checkpointing fits"}, "no smaller batch"},
		{"nothing fits", big, 505, []Option{{"--batch-size 1", small}}, []string{"exceeds", "no smaller batch"}, "--gradient-checkpointing"},
		{"already checkpointing", big.WithCheckpointing(), 505, nil, []string{"x, gradient checkpointing: peak", "no smaller batch"}, "--gradient-checkpointing"},
		{"checkpointed fits", big.WithCheckpointing(), 600, nil, nil, ""},
		{"tensors fit, peak does not", big, 1500, nil, []string{"exceeds"}, ""},
		{"weights alone", big, 450, nil, []string{"weights, gradients and AdamW state alone need", "smaller model"}, ""},
	} {
		err := Check(tc.e, tc.avail, "test", tc.opts)
		if (err == nil) != (tc.want == nil) {
			t.Fatalf("%s: err %v", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, err, w)
			}
		}
		if tc.not != "" && err != nil && strings.Contains(err.Error(), tc.not) {
			t.Errorf("%s: %q has %q", tc.name, err, tc.not)
		}
	}
}

func TestAvailable(t *testing.T) {
	t.Setenv(LimitEnv, "3MiB")
	if n, src, err := Available(); err != nil || n != 3<<20 || src != "$"+LimitEnv {
		t.Fatalf("Available() = %d %q %v", n, src, err)
	}
	t.Setenv(LimitEnv, "three")
	if _, _, err := Available(); err == nil || !strings.Contains(err.Error(), LimitEnv) {
		t.Fatalf("bad limit: %v", err)
	}
	os.Unsetenv(LimitEnv)
	if _, err := os.Stat(filepath.Join("/proc", "meminfo")); err == nil {
		if n, src, err := Available(); err != nil || n <= 0 || !strings.Contains(src, "MemAvailable") {
			t.Fatalf("Available() = %d %q %v", n, src, err)
		}
	}
}
