// Package atomicfile writes files so that a reader, or a run killed at any
// instant, never sees a partial one: the content goes to a temporary file in
// the destination's directory, which is flushed, fsync'd, given its mode and
// renamed over the destination. On any error the temporary file is removed
// and the destination is left as it was.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write creates or replaces path with what fill writes, with mode perm.
func Write(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, noTempName(err))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = fill(bw); err != nil {
		return fmt.Errorf("writing %s: %w", path, noTempName(err))
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, noTempName(err))
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, noTempName(err))
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, noTempName(err))
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, noTempName(err))
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, noTempName(err))
	}
	// Make the rename itself durable; a directory that cannot be synced
	// (some file systems) does not make the write fail.
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// noTempName drops the temporary file's name from a file system error: the
// message names the destination only (the temporary file is gone).
func noTempName(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s: %w", le.Op, le.Err)
	}
	return err
}

// WriteBytes creates or replaces path with data, with mode perm.
func WriteBytes(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
