// Package tinyxlmr writes the small random XLM-R checkpoints retriever tests
// start from, with an XLM-R tokenizer made of the SentencePiece fixture.
// Tests only; the model comes from models/xlmr, the tokenizer from
// models/tokenizer.
package tinyxlmr

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
	"github.com/ragforge/ragforge/models/xlmr"
)

// Tokenizer is XLMRobertaTokenizer over ../shared/fixtures/tokenizer's
// spiece.model re-laid out as a sentencepiece.bpe.model
// (sentencepiece.XLMRLayout): 2002 ids, <pad> 1. The test skips when the
// fixture is absent.
func Tokenizer(t testing.TB) tokenizer.Tokenizer {
	t.Helper()
	sp, err := sentencepiece.Load(filepath.Join(testutil.SharedPath(t, "fixtures/tokenizer"), "spiece.model"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := sentencepiece.XLMRLayout(sp)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, sentencepiece.XLMRFile), m.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Save writes a random XLM-R of config cfg (seed 3) and tok to a fresh
// directory under t.TempDir() on the backend named backendName and returns
// it. Any error fails the test.
func Save(t testing.TB, cfg bert.Config, tok tokenizer.Tokenizer, backendName string) string {
	t.Helper()
	be, err := backend.New(backendName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := xlmr.NewRandom(be, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}
