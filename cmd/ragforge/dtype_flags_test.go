package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/npy"
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

// encode --dtype reaches the encoder's loader: bfloat16 weights write other
// vectors than float32's, auto on the F32 fixture the same ones.
func TestDTypeEncode(t *testing.T) {
	bert := sharedDir(t, "fixtures/bert-tiny")
	dir, corpus, _ := sampleFiles(t)
	vecs := func(dtype string) []float32 {
		out := filepath.Join(dir, dtype)
		var er encodeResult
		if err := json.Unmarshal([]byte(run(t, "encode", "--db", filepath.Join(dir, "runs.db"), "--corpus", corpus,
			"--encoder", bert, "--out", out, "--dtype", dtype, "--json")), &er); err != nil {
			t.Fatal(err)
		}
		if len(er.Embeddings) != 1 {
			t.Fatalf("--dtype %s: %d .npy files, want 1", dtype, len(er.Embeddings))
		}
		x, _, _, err := npy.Read(er.Embeddings[0])
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	f32, auto, bf16 := vecs("float32"), vecs("auto"), vecs("bfloat16")
	if !slices.Equal(auto, f32) {
		t.Error("encode --dtype auto on an F32 checkpoint differs from --dtype float32")
	}
	if slices.Equal(bf16, f32) {
		t.Error("encode --dtype bfloat16 wrote the float32 vectors: the flag did not reach the loader")
	}
}
