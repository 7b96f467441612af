package encode

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/testutil/tinyxlmr"
	"github.com/ragforge/ragforge/models/xlmr"
)

// LoadBERT reads back a saved encoder: same vectors, the directory's name,
// the chosen pooling; a bad pooling or a tokenizer larger than the model's
// vocabulary is an error naming it.
func TestLoadBERT(t *testing.T) {
	toy, dir := saveToy(t)
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

// An XLM-R directory (model_type xlm-roberta) loads through the same
// LoadBERT, with its sentencepiece.bpe.model; a tokenizer with more ids than
// vocab_size, bge-m3's sparse/colbert modes, an unknown pooling and another
// model family are refused by name.
func TestLoadXLMR(t *testing.T) {
	tok := tinyxlmr.Tokenizer(t)
	save := func(vocab int) string { return tinyxlmr.Save(t, xlmr.TinyConfig(vocab), tok, testBackend) }
	dir := save(tok.Len())
	enc, err := LoadBERT(dir, testBackend, "mean")
	if err != nil {
		t.Fatal(err)
	}
	if enc.Model.ModelType() != xlmr.ModelType || enc.MaxTokens() != 64 || enc.Pooling != bert.PoolMean {
		t.Fatalf("model type %q, max tokens %d, pooling %q; want xlm-roberta, 64, mean", enc.Model.ModelType(), enc.MaxTokens(), enc.Pooling)
	}
	ids, err := enc.Tokenize([]string{"query: Coloração de Gram"})
	if err != nil {
		t.Fatal(err)
	}
	if ids[0][0] != 0 || ids[0][len(ids[0])-1] != 2 {
		t.Fatalf("ids %v: want <s>=0 … </s>=2", ids[0])
	}
	vecs, err := enc.EncodeQueries([]string{"Coloração de Gram", "Azul de Toluidina"})
	if err != nil || len(vecs) != 2 || len(vecs[0]) != 64 {
		t.Fatalf("EncodeQueries: %d vectors, err %v", len(vecs), err)
	}

	small := save(tok.Len() - 2)
	for _, tc := range []struct {
		name, dir, pooling string
		want               []string
	}{
		{"tokenizer past vocab_size", small, "", []string{"tokenizer.json: 2002 tokens", "vocab_size 2000"}},
		{"bge-m3 sparse", dir, "sparse", []string{"sparse", "colbert", "dense only"}},
		{"bge-m3 colbert", dir, "colbert", []string{"colbert", "dense only"}},
		{"unknown pooling", dir, "max", []string{`pooling "max"`, "want cls or mean"}},
	} {
		_, err := LoadBERT(tc.dir, testBackend, tc.pooling)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: err = %v, want it to name %q", tc.name, err, w)
			}
		}
	}
	t5dir := testutil.SharedPath(t, "fixtures/t5-flan-tiny")
	if _, err := LoadBERT(t5dir, testBackend, "cls"); err == nil || !strings.Contains(err.Error(), `model_type "t5" is not a supported bi-encoder`) {
		t.Errorf("t5 directory: err = %v", err)
	}
}

// saveToy saves the toy encoder as the model directory toy-bert (weights
// and tokenizer) and returns it with the directory.
func saveToy(t *testing.T) (*BERTEncoder, string) {
	t.Helper()
	toy := toyEncoder(t)
	dir := filepath.Join(t.TempDir(), "toy-bert")
	if err := toy.Model.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := toy.Tokenizer.Save(dir); err != nil {
		t.Fatal(err)
	}
	return toy, dir
}
