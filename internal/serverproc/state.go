package serverproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ReadState decodes the JSON state file a launcher wrote at path (what it started, so another
// process can stop it) into v. A missing file is an error wrapping os.ErrNotExist; what names
// the launcher's server in the others ("open what: …").
func ReadState(path, what string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return err
		}
		return fmt.Errorf("open %s: %w", what, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("open %s %s: %w", what, path, err)
	}
	return nil
}

// WriteState writes v as indented JSON to the state file at path, atomically (a new file
// renamed over the old), so a process reading it never sees half of it.
func WriteState(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
