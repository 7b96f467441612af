package filtertrain

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/models/filter"
)

// Where a filter's windows came from (CheckpointWindows).
const (
	WindowsFromModel    = "model"    // config.json's filter.WindowsKey (export, train calibration)
	WindowsFromTraining = "training" // the checkpoint's training_args.json (the windows it trained at)
	WindowsFromDefault  = "default"  // neither: RAG²'s 512 / 128
	WindowsFromFlag     = "flag"     // a command-line flag
)

// CheckpointWindows returns the windows a filter directory is read at and
// where they came from: the windows its config.json records
// (filter.WindowsKey, written by Export and Calibrate: those it was
// evaluated or calibrated at), else those of the training run that saved
// it (ArgsFile), else filter.DefaultWindows. Errors: a malformed
// config.json or training_args.json, naming the file.
func CheckpointWindows(dir string) (filter.Windowing, string, error) {
	s, err := filter.DirSettings(dir)
	if err != nil {
		return filter.Windowing{}, "", err
	}
	if s.Windows != nil {
		return *s.Windows, WindowsFromModel, nil
	}
	path := filepath.Join(dir, ArgsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return filter.DefaultWindows(), WindowsFromDefault, nil
	}
	if err != nil {
		return filter.Windowing{}, "", fmt.Errorf("filter windows: %w", err)
	}
	var w filter.Windowing
	if err := json.Unmarshal(b, &w); err != nil {
		return w, "", fmt.Errorf("filter windows: read %s: %w", path, err)
	}
	if err := w.Check(); err != nil {
		return w, "", fmt.Errorf("filter windows: read %s: %w", path, err)
	}
	// The checkpoint records where it cuts windows; the aggregate rule the
	// run validated with stays the reader's choice (as in filter.WindowsKey).
	w.Aggregate = ""
	return w, WindowsFromTraining, nil
}
