// Package tinyqwen assembles a servable Qwen2 model directory for tests:
// ../shared/fixtures/qwen2-tiny (config.json, random weights, vocab 512)
// with a byte-level BPE tokenizer in Qwen's format small enough for it.
// Tests only; the model and tokenizer code are models/decoder and
// models/tokenizer/bpe.
//
// The tokenizer (tokenizer/tokenizer.json, tokenizer_config.json) has 512
// ids: the specials <|endoftext|>, <|im_start|>, <|im_end|> at 0-2 (the
// fixture's pad/bos/eos), the 256 byte-level symbols at 3-258 and the first
// 253 of Qwen3's merges whose parts are already in the vocabulary, with
// Qwen3's normalizer, pre-tokenizer and decoder and a ChatML chat
// template. Qwen3's own tokenizer has 151k ids and cannot drive a 512-row
// embedding. What tests built on it prove: tokenization, scoring,
// generation and serving on a real decoder checkpoint; the numbers are a
// random model's.
package tinyqwen

import (
	"embed"
	"os"
	"path/filepath"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/decoder"
)

//go:embed tokenizer/tokenizer.json tokenizer/tokenizer_config.json
var files embed.FS

// Dir returns a fresh directory under t.TempDir() holding qwen2-tiny's
// config.json and model.safetensors (symlinked) and the tokenizer files.
// It skips the test when ../shared is absent; other errors fail it.
func Dir(t testing.TB) string {
	t.Helper()
	src := testutil.SharedPath(t, "fixtures/qwen2-tiny")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	WriteTokenizer(t, dir)
	return dir
}

// WriteTokenizer writes the tokenizer files (tokenizer.json,
// tokenizer_config.json) into dir.
func WriteTokenizer(t testing.TB, dir string) {
	t.Helper()
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := files.ReadFile("tokenizer/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Random returns a fresh directory under t.TempDir() holding a random
// qwen2 of decoder.TinyConfig's shape (1024 positions, as `ragforge models
// init --arch qwen2 --size tiny` writes it) with the tokenizer: pad
// <|endoftext|> 0, eos <|im_end|> 2. Needs no ../shared.
func Random(t testing.TB, seed int64) string {
	t.Helper()
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := decoder.TinyConfig("qwen2", 512)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PadTokenID, cfg.EOSTokenIDs = 0, []int{2}
	m, err := decoder.NewRandom(be, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	WriteTokenizer(t, dir)
	return dir
}
