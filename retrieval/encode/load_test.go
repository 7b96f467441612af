package encode

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/bert"
)

// LoadBERT reads back a saved encoder: same vectors, the directory's name,
// the chosen pooling; a bad pooling or a tokenizer larger than the model's
// vocabulary is an error naming it.
func TestLoadBERT(t *testing.T) {
	toy := toyEncoder(t)
	dir := filepath.Join(t.TempDir(), "toy-bert")
	if err := toy.Model.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := toy.Tokenizer.Save(dir); err != nil {
		t.Fatal(err)
	}
	for _, pooling := range []string{"", "cls", "mean"} {
		enc, err := LoadBERT(dir, testBackend, pooling)
		if err != nil {
			t.Fatalf("pooling %q: %v", pooling, err)
		}
		want := bert.PoolCLS
		if pooling == "mean" {
			want = bert.PoolMean
		}
		if enc.Name() != "toy-bert" || enc.Pooling != want || enc.Dim() != toy.Dim() || !enc.Normalize {
			t.Errorf("pooling %q: name %q pooling %q dim %d normalize %v", pooling, enc.Name(), enc.Pooling, enc.Dim(), enc.Normalize)
		}
		if pooling == "cls" {
			got, err1 := enc.EncodeDocs(texts[:2])
			wantV, err2 := toy.EncodeDocs(texts[:2])
			if err1 != nil || err2 != nil || !reflect.DeepEqual(got, wantV) {
				t.Errorf("loaded vectors differ from the saved model's (%v, %v)", err1, err2)
			}
		}
	}
	if _, err := LoadBERT(dir, testBackend, "max"); err == nil || !strings.Contains(err.Error(), "want cls or mean") {
		t.Errorf("pooling max: err = %v", err)
	}
	if _, err := LoadBERT(filepath.Join(dir, "missing"), testBackend, ""); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing dir: err = %v", err)
	}
	// Two more tokens than the embedding has rows.
	vocab := filepath.Join(dir, "vocab.txt")
	b, err := os.ReadFile(vocab)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vocab, append(b, []byte("extra1\nextra2\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBERT(dir, testBackend, ""); err == nil || !strings.Contains(err.Error(), "vocab_size") {
		t.Errorf("tokenizer larger than vocab_size: err = %v", err)
	}
}
