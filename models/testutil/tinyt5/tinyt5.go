// Package tinyt5 writes the small random T5 checkpoints that training
// tests start from. Tests only; the models themselves come from models/t5.
package tinyt5

import (
	"path/filepath"
	"testing"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// Save writes a random T5 smaller than t5.TinyConfig (d_model 32, d_kv 16,
// d_ff 64, 1 encoder and 1 decoder layer, 2 heads, the given dropout rate,
// seed 3) with tok's vocabulary and tok itself to a fresh directory under
// t.TempDir(), built on the backend named backendName, and returns the
// directory. Any error fails the test.
func Save(t testing.TB, tok tokenizer.Tokenizer, backendName string, dropout float64) string {
	t.Helper()
	be, err := backend.New(backendName)
	if err != nil {
		t.Fatal(err)
	}
	c := t5.TinyConfig(tok.Len())
	c.DModel, c.DKV, c.DFF, c.NumLayers, c.NumDecoderLayers, c.NumHeads = 32, 16, 64, 1, 1, 2
	c.DropoutRate = dropout
	m, err := t5.NewRandom(be, c, 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "base")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}
