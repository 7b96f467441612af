package main

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
)

// --dtype on an inference command: auto keeps the F32 fixture float32 (the
// float32 vector exactly), bfloat16 rounds the weights (a vector close to
// it but not equal); an unknown name is refused while the flags are parsed
// and float16 on the go backend by name.
func TestDTypeFlag(t *testing.T) {
	bert := sharedDir(t, "fixtures/bert-tiny")
	embed := func(dtype string) []float32 {
		var e struct {
			Embedding []float32 `json:"embedding"`
		}
		out := run(t, "infer", "embed", "--model", bert, "--input", "fixação em formol", "--dtype", dtype, "--json")
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatal(err)
		}
		return e.Embedding
	}
	f32, auto, bf16 := embed("float32"), embed("auto"), embed("bfloat16")
	if !slices.Equal(auto, f32) {
		t.Error("--dtype auto on an F32 checkpoint differs from --dtype float32")
	}
	if slices.Equal(bf16, f32) {
		t.Error("--dtype bfloat16 gave the float32 vector: the weights were not cast")
	}
	var dot, n1, n2 float64
	for i := range f32 {
		dot += float64(f32[i]) * float64(bf16[i])
		n1 += float64(f32[i]) * float64(f32[i])
		n2 += float64(bf16[i]) * float64(bf16[i])
	}
	if cos := dot / math.Sqrt(n1*n2); cos < 0.999 {
		t.Errorf("bfloat16 vs float32 cosine %.5f, want ≥ 0.999", cos)
	}
	for _, c := range []struct{ dtype, want string }{
		{"half", `invalid argument "half" for "--dtype"`},
		{"float16", "no float16"},
	} {
		if code, stderr := runErr("infer", "embed", "--model", bert, "--input", "x", "--dtype", c.dtype, "--backend", "go"); code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("--dtype %s: exit %d, stderr %q; want %q", c.dtype, code, stderr, c.want)
		}
	}
}

// bench models' --dtype holds the bge-large/bge-m3 encoders' weights; on
// any other shape it makes no sense and is refused before any work.
func TestBenchDTypeOnlyForEncoders(t *testing.T) {
	if code, stderr := runErr("bench", "models", "--only", "mini", "--dtype", "bfloat16"); code == 0 || !strings.Contains(stderr, "--dtype apply to --only bge-large, bge-m3 or bge-small") {
		t.Fatalf("bench models --only mini --dtype bfloat16: exit %d, stderr %q", code, stderr)
	}
}
