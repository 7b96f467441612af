// Package atomicfile writes files and directories so that a reader never
// sees a partial one: Write (temp file + fsync + rename) and Dir (temp
// directory + fsync of every entry + rename).
package atomicfile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// Write writes path through a temporary file in the same directory: fill
// gets a buffered writer, then the file is flushed, given mode perm, fsynced,
// closed and renamed over path. On any error the temporary file is removed
// and an existing file at path is left as it was. The directory must exist.
// Errors are returned unwrapped; callers add the context (file, record).
func Write(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err = fill(w); err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteBytes writes b to path atomically with mode perm (Write): the
// drop-in for os.WriteFile of a side file a reader may open at any time.
func WriteBytes(path string, b []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error { _, err := w.Write(b); return err })
}
