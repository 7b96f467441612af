package tracker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

// DirRunFile, in a run's output directory, names the run that writes there
// ({"run_id", "kind"}), so a --resume continues that run instead of
// starting another.
const DirRunFile = "run.json"

// RecordInDir writes dir/DirRunFile naming run (of kind), creating dir.
func RecordInDir(dir string, run *Run, kind string) error {
	b, _ := json.Marshal(map[string]string{"run_id": run.ID, "kind": kind})
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = atomicfile.WriteBytes(filepath.Join(dir, DirRunFile), append(b, '\n'), 0o644)
	}
	if err != nil {
		return fmt.Errorf("record run id in %s: %w", dir, err)
	}
	return nil
}
