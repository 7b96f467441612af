package learn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Train checks the kind and output first, writes the tokenizer's HF files
// and, without a Starter, records no run.
func TestTrain(t *testing.T) {
	texts := []string{"tissue is fixed in formalin", "slides are stained with hematoxylin and eosin", "the tissue sample is embedded in paraffin"}
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		cfg  TrainConfig
		file string
		err  string
	}{
		{"wordpiece", TrainConfig{Kind: "wordpiece", VocabSize: 120, Out: filepath.Join(dir, "wp")}, "vocab.txt", ""},
		{"unknown kind", TrainConfig{Kind: "bpe", VocabSize: 120, Out: filepath.Join(dir, "bpe")}, "", `--kind "bpe"`},
		{"no output", TrainConfig{Kind: "unigram", VocabSize: 120}, "", "--out is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := Train(texts, c.cfg, nil)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(c.cfg.Out, c.file)); err != nil {
				t.Errorf("%s not written: %v", c.file, err)
			}
			if res.RunID != "" || res.Size == 0 || res.Size > c.cfg.VocabSize || res.Dir != c.cfg.Out || !strings.Contains(res.Line, c.cfg.Out) {
				t.Errorf("result %+v", res)
			}
		})
	}
}
