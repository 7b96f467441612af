// Package sample embeds the small corpus and QA set ragforge's demo runs on:
// 32 passages of laboratory-protocol style text and 37 questions with
// reference answers and contexts, written for this project (no copied
// documents). The corpus is BEIR corpus.jsonl (_id, title, text, category);
// the QA set has the AP QA CSV header (Question, Ground_Truth, Context), and
// every Context is a verbatim substring of one passage.
package sample

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

//go:embed corpus.jsonl qa.csv
var files embed.FS

// CorpusFile and QAFile are the embedded file names.
const (
	CorpusFile = "corpus.jsonl"
	QAFile     = "qa.csv"
)

// Bytes returns an embedded file's contents.
func Bytes(name string) ([]byte, error) { return files.ReadFile(name) }

// WriteTo writes the embedded files into dir (created if needed) and returns
// the corpus and QA paths, so the ordinary loaders read them like any user file.
func WriteTo(dir string) (corpus, qa string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("sample: %w", err)
	}
	for _, name := range []string{CorpusFile, QAFile} {
		b, err := files.ReadFile(name)
		if err != nil {
			return "", "", fmt.Errorf("sample: %w", err)
		}
		if err := atomicfile.WriteBytes(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", "", fmt.Errorf("sample: %w", err)
		}
	}
	return filepath.Join(dir, CorpusFile), filepath.Join(dir, QAFile), nil
}
