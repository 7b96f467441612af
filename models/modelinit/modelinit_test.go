package modelinit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/hf"
)

// A tiny BERT bi-encoder from a vocab.txt: a loadable HF directory marked
// random, with its sentence-transformers pooling; options that make no
// sense are refused by their flag.
func TestInitBERT(t *testing.T) {
	vocab := filepath.Join(testutil.SharedPath(t, "fixtures/bert-tiny"), "vocab.txt")
	out := filepath.Join(t.TempDir(), "bert")
	info, err := Init(Options{Arch: "bert", Size: "tiny", Tokenizer: vocab, Out: out, Seed: 1, Backend: "go", TokenMatchScore: 8})
	if err != nil {
		t.Fatal(err)
	}
	if info.ModelType != "bert" || info.Parameters == 0 || info.Tokenizer != "vocab.txt" {
		t.Errorf("info %+v", info)
	}
	if r, err := hf.IsRandomInit(out); err != nil || !r {
		t.Errorf("IsRandomInit = %v, %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(out, "1_Pooling", "config.json")); err != nil {
		t.Errorf("pooling: %v", err)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Arch: "bert", Tokenizer: vocab}, "--arch, --tokenizer and --out are required"},
		{Options{Arch: "gpt9", Size: "tiny", Tokenizer: vocab, Out: t.TempDir(), TokenMatchScore: 8}, `--arch "gpt9"`},
		{Options{Arch: "bert", Size: "huge", Tokenizer: vocab, Out: t.TempDir(), TokenMatchScore: 8}, `--size "huge"`},
		{Options{Arch: "bert", Size: "tiny", Tokenizer: vocab, Out: t.TempDir(), TokenMatchHeads: 2, TokenMatchScore: 8}, "only for --arch t5"},
		{Options{Arch: "bert", Size: "tiny", Tokenizer: vocab, Out: t.TempDir(), Classifier: true, Pooling: "cls", TokenMatchScore: 8}, "has no pooling"},
	} {
		if _, err := Init(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Init(%+v): error %v, want %q", tc.o, err, tc.want)
		}
	}
}
