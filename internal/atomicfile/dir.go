package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Dir publishes the directory dir whole or not at all: fill writes the
// content into tmp, a fresh directory beside dir (mode 0755, on the same
// file system so the rename is atomic); every file and directory under tmp
// is then fsynced, tmp is renamed to dir and dir's parent is fsynced, so a
// crash leaves either the old state or the complete directory, never half a
// checkpoint. With replace, an existing dir is removed just before the
// rename; without, an existing dir that is not an empty directory is an
// error (checked before fill runs; an empty one is replaced, as rename(2)
// does).
// On any error tmp is removed and dir is untouched (unless replace had
// removed it at the very end). Parent directories are created.
func Dir(dir string, replace bool, fill func(tmp string) error) (err error) {
	dir = filepath.Clean(dir)
	if !replace {
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 || err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s already exists (not overwritten)", dir)
		}
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err = os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err = fill(tmp); err != nil {
		return err
	}
	if err = syncTree(tmp); err != nil {
		return err
	}
	if replace {
		err = os.RemoveAll(dir)
	} else if err = os.Remove(dir); errors.Is(err, fs.ErrNotExist) { // only an empty dir goes
		err = nil
	}
	if err != nil {
		return err
	}
	if err = os.Rename(tmp, dir); err != nil {
		return err
	}
	return syncPath(parent)
}

// syncTree fsyncs every regular file and directory under root, root last.
func syncTree(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Type().IsRegular() {
			return syncPath(path)
		}
		return nil
	})
}

// syncPath fsyncs one file or directory.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return f.Close()
}
