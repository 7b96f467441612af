package inspect

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

func TestDecoderDirs(t *testing.T) {
	cases := []struct {
		fixture            string
		heads, kv, headDim int
		tied               bool
		params             int64
	}{
		{"qwen2-tiny", 4, 2, 16, false, 152128},
		{"llama-tiny", 4, 4, 16, true, 127296},
		{"qwen3-tiny", 4, 2, 32, false, 176576},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			info, err := Dir(testutil.SharedPath(t, filepath.Join("fixtures", tc.fixture)))
			if err != nil {
				t.Fatal(err)
			}
			d := info.Decoder
			if d == nil || d.Unsupported != "" || d.Heads != tc.heads || d.KVHeads != tc.kv || d.HeadDim != tc.headDim ||
				d.Tied != tc.tied || d.ConfigParameters != tc.params || info.Parameters != tc.params || d.Layers != 2 {
				t.Fatalf("decoder info %+v (tensors hold %d parameters)", d, info.Parameters)
			}
		})
	}
}

func TestDecoderUnsupportedNamed(t *testing.T) {
	src := testutil.SharedPath(t, "fixtures/llama-tiny")
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["num_hidden_layers"] = 3
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := os.ReadFile(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), w, 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Decoder == nil || !strings.Contains(info.Decoder.Unsupported, `tensor "model.layers.2.input_layernorm.weight" missing`) {
		t.Fatalf("decoder info %+v", info.Decoder)
	}
}
