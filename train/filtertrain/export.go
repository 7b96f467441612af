package filtertrain

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/train/trainer"
)

// trainerOnly are checkpoint files that belong to the training run, not to the model.
var trainerOnly = map[string]bool{trainer.OptimizerFile: true, trainer.StateFile: true}

// Export copies the model of checkpointDir (a checkpoint-<step> directory or
// the "best" link) to outDir in HF layout: config.json, model.safetensors and
// the tokenizer files with the added label tokens (tokenizer.json for
// AutoTokenizer's fast tokenizer included) and generation_config.json,
// loadable by t5.Load / tokenizer.Load and by transformers'
// from_pretrained; training_args.json
// is kept for provenance, optimizer and trainer state are left out. The
// checkpoint is checked first (it must load as a filter, label tokens
// included). outDir is written through a temporary sibling and renamed, so
// it is either complete or absent. Errors: outDir exists, the checkpoint is
// not a filter checkpoint, I/O failures.
func Export(checkpointDir, outDir string) error { return ExportAt(checkpointDir, outDir, nil) }

// ExportAt is Export with the windows the filter is to be read at recorded
// in config.json (filter.WindowsKey): w, or when nil the checkpoint's own
// (CheckpointWindows), so eval filter, pipeline build and serve read the
// export as it was evaluated. Errors: Export's, invalid windows.
func ExportAt(checkpointDir, outDir string, w *filter.Windowing) error {
	if w == nil {
		cw, _, err := CheckpointWindows(checkpointDir)
		if err != nil {
			return fmt.Errorf("export %s: %w", checkpointDir, err)
		}
		w = &cw
	}
	if err := w.Check(); err != nil {
		return fmt.Errorf("export %s: %w", checkpointDir, err)
	}
	return exportWith(checkpointDir, outDir, func(c *t5.Config) error { return c.SetExtra(filter.WindowsKey, *w) })
}

// exportWith is Export with config.json rewritten after edit changes the
// checkpoint's config, when edit is not nil.
func exportWith(checkpointDir, outDir string, edit func(*t5.Config) error) error {
	src, err := filepath.EvalSymlinks(checkpointDir)
	if err != nil {
		return fmt.Errorf("export %s: %w", checkpointDir, err)
	}
	if _, err := os.Lstat(outDir); err == nil {
		return fmt.Errorf("export %s: %s already exists (not overwritten)", checkpointDir, outDir)
	}
	lb, err := loadForEval("", src, EvalOptions{}.withDefaults().predictor(), nn.Auto)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	err = atomicfile.Dir(outDir, false, func(tmp string) error {
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || trainerOnly[e.Name()] {
				continue
			}
			if err := hf.CopyFile(filepath.Join(src, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
				return err
			}
		}
		// Checkpoints written before ragforge saved them lack the fast
		// tokenizer and the generation config; both derive from what was checked.
		if err := tokenizer.WriteJSON(tmp, lb.Tokenizer); err != nil {
			return err
		}
		if err := lb.Model.Config.WriteGenerationConfig(tmp); err != nil {
			return err
		}
		if edit != nil {
			c := lb.Model.Config
			if err := edit(&c); err != nil {
				return err
			}
			b, err := c.MarshalConfig()
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(tmp, t5.ConfigFile), b, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("export %s: %w", checkpointDir, err)
	}
	return nil
}
