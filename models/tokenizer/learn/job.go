package learn

import (
	"fmt"
	"path/filepath"

	"github.com/ragforge/ragforge/data/tracker"
)

// TrainConfig is one `ragforge tokenizer train`; it is recorded with the
// run as it is (JSON).
type TrainConfig struct {
	Corpus    any    `json:"corpus"` // the corpus description recorded with the run
	Kind      string `json:"kind"`   // unigram (T5) | wordpiece (BERT)
	VocabSize int    `json:"vocab_size"`
	Out       string `json:"out"`
}

// Check validates the kind and the output directory.
func (c TrainConfig) Check() error {
	if c.Out == "" {
		return fmt.Errorf("--out is required")
	}
	if c.Kind != "unigram" && c.Kind != "wordpiece" {
		return fmt.Errorf("--kind %q: want unigram or wordpiece", c.Kind)
	}
	return nil
}

// TrainResult is what Train wrote; `tokenizer train --json` prints it.
type TrainResult struct {
	RunID string `json:"run_id"`
	Kind  string `json:"kind"`
	Dir   string `json:"dir"`
	// Size is the trained vocabulary: Unigram pieces (before T5's 100
	// sentinels) or WordPiece tokens; it may be below VocabSize.
	Size int    `json:"size"`
	Line string `json:"-"` // the human summary
}

// Train trains a tokenizer of c.Kind on texts (TrainUnigram + WriteT5Dir,
// or TrainWordPiece + WriteBERTDir, lower-cased) and writes it in HF layout
// to c.Out, recorded as a run of kind "tokenizer-train" whose artifact is
// its spiece.model or vocab.txt.
func Train(texts []string, c TrainConfig, start tracker.Starter) (TrainResult, error) {
	if err := c.Check(); err != nil {
		return TrainResult{}, err
	}
	run, err := start.Start("tokenizer-train", c)
	if err != nil {
		return TrainResult{}, err
	}
	res := TrainResult{Kind: c.Kind, Dir: c.Out}
	file := "spiece.model"
	switch c.Kind {
	case "unigram":
		m, err := TrainUnigram(texts, UnigramOptions{VocabSize: c.VocabSize})
		if err != nil {
			return res, err
		}
		if err := WriteT5Dir(c.Out, m); err != nil {
			return res, err
		}
		res.Size = m.Size()
		res.Line = fmt.Sprintf("wrote a %d-piece Unigram tokenizer (+100 sentinels) to %s", m.Size(), c.Out)
	case "wordpiece":
		v, err := TrainWordPiece(texts, WordPieceOptions{VocabSize: c.VocabSize})
		if err != nil {
			return res, err
		}
		if err := WriteBERTDir(c.Out, v, true); err != nil {
			return res, err
		}
		res.Size, file = len(v), "vocab.txt"
		res.Line = fmt.Sprintf("wrote a %d-token WordPiece vocabulary to %s", len(v), c.Out)
	}
	if run == nil {
		return res, nil
	}
	res.RunID = run.ID
	return res, run.Artifact("tokenizer", filepath.Join(c.Out, file))
}
