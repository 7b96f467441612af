package filtertrain

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/models/filter"
)

// Data names the example files of a training run (RAG² filter schema, JSON
// list or JSONL; see models/filter.ReadExamples).
type Data struct {
	Train string // training examples (required)
	// Valid holds the validation examples; "" holds out ValidFrac of
	// Train's questions instead (SplitByQuestion).
	Valid string
	// ValidFrac is the fraction of examples, by whole questions, held out
	// when Valid is empty, in [0, 1); 0: no validation.
	ValidFrac float64
	// Augment holds extra training examples added after the split, so they
	// are never held out (e.g. `label ict` output); "" for none.
	Augment string
	// AugmentOnly trains on Augment's examples alone; Train then only
	// supplies the held-out questions (ValidFrac > 0, no Valid). For a
	// random T5, whose training on the evidence labels memorises which
	// passages were helpful (docs/recipes.md).
	AugmentOnly bool
}

// Check reports the first inconsistency of d, before any file is read:
// no Train, ValidFrac outside [0, 1), AugmentOnly without Augment and a
// held-out split of Train.
func (d Data) Check() error {
	if d.Train == "" {
		return fmt.Errorf("train filter data: no training file")
	}
	if d.ValidFrac < 0 || d.ValidFrac >= 1 {
		return fmt.Errorf("train filter data: valid fraction %v outside [0, 1)", d.ValidFrac)
	}
	if d.AugmentOnly && (d.Augment == "" || d.Valid != "" || d.ValidFrac <= 0) {
		return fmt.Errorf("--augment-only trains on --augment alone and holds out --valid-frac of --train's questions: it needs --augment and --valid-frac > 0, without --valid")
	}
	return nil
}

// The split files PrepareData writes beside the checkpoints.
const (
	TrainSplitFile = "train.jsonl"
	ValidSplitFile = "valid.jsonl"
)

// PrepareData reads d's files and returns the training and validation
// examples: Valid's, or else ValidFrac of Train's questions held out with
// cfg.Seed (SplitByQuestion); Augment's examples follow the training ones.
// For a fresh run (not cfg.Resume) with validation examples it writes both
// splits into cfg.OutputDir as TrainSplitFile and ValidSplitFile (JSONL), so
// `eval filter --data OUT/valid.jsonl` evaluates exactly the held-out
// questions. An OutputDir that holds checkpoints without cfg.Resume is
// refused (CheckOutputDir) before anything is written. Errors: no Train,
// ValidFrac outside [0, 1), the files' (naming file, record and field), a
// split needing two questions, write failures.
func PrepareData(cfg Config, d Data) (train, valid []filter.Example, err error) {
	if err := d.Check(); err != nil {
		return nil, nil, err
	}
	if train, err = filter.ReadExamples(d.Train); err != nil {
		return nil, nil, err
	}
	switch {
	case d.Valid != "":
		if valid, err = filter.ReadExamples(d.Valid); err != nil {
			return nil, nil, err
		}
	case d.ValidFrac > 0:
		if train, valid, err = SplitByQuestion(train, d.ValidFrac, cfg.Seed); err != nil {
			return nil, nil, err
		}
	}
	if d.Augment != "" {
		extra, err := filter.ReadExamples(d.Augment)
		if err != nil {
			return nil, nil, err
		}
		if d.AugmentOnly {
			train = nil
		}
		train = append(append([]filter.Example{}, train...), extra...)
	}
	if _, err := CheckOutputDir(cfg); err != nil {
		return nil, nil, err
	}
	if !cfg.Resume && len(valid) > 0 {
		if err := writeSplit(cfg.OutputDir, train, valid); err != nil {
			return nil, nil, err
		}
	}
	return train, valid, nil
}

// writeSplit writes train and valid into dir (created if needed) as
// TrainSplitFile and ValidSplitFile, each atomically.
func writeSplit(dir string, train, valid []filter.Example) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("train filter data: %w", err)
	}
	for name, exs := range map[string][]filter.Example{TrainSplitFile: train, ValidSplitFile: valid} {
		if err := filter.WriteExamples(filepath.Join(dir, name), filter.FormatJSONL, exs); err != nil {
			return fmt.Errorf("train filter data: %w", err)
		}
	}
	return nil
}
