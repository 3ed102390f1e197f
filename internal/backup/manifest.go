// Package backup holds what every store's backup has in common: a directory of files and a
// manifest naming each file with its size and SHA-256, the point in time the copy is
// consistent at, and the counts a restore checks what it loaded against.
//
// The manifest is written last, through a temporary file renamed into place after an fsync,
// so a backup that was interrupted (killed, out of disk) has no manifest.json, and Open refuses
// it: nothing half-written is ever taken for a complete backup.
package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// ManifestName is the manifest's file name inside a backup directory.
const ManifestName = "manifest.json"

// FormatVersion is the manifest layout's version; Open refuses another.
const FormatVersion = 1

// ErrIncomplete is returned (wrapped) for a directory without a manifest: a backup that did
// not finish, or not a backup at all.
var ErrIncomplete = errors.New("backup: no manifest (the backup did not finish, or this is not a backup directory)")

// ErrMismatch is returned (wrapped) when a file or a count differs from the manifest.
var ErrMismatch = errors.New("backup: differs from its manifest")

// File is one file of a backup, its path relative to the backup directory.
type File struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Manifest describes a complete backup.
type Manifest struct {
	Format int `json:"format"`
	// Store is the engine the backup was taken of: "sqlite", "mongo" or "cassandra".
	Store string `json:"store"`
	// ConsistentAt is the moment the copy holds the store as it was: every write acknowledged
	// before it is in the backup, none after it.
	ConsistentAt time.Time `json:"consistent_at"`
	// Started and Finished bound the backup's own run.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Source names what was backed up (a path, a database, a keyspace), for the operator.
	Source string `json:"source"`
	// Counts holds the rows or documents per table or collection that a restore must load.
	Counts map[string]int64 `json:"counts"`
	// Meta holds store-specific facts (a cluster time, the nodes, a schema version).
	Meta map[string]string `json:"meta,omitempty"`
	// Files lists every file of the backup except the manifest, sorted by path.
	Files []File `json:"files"`
}

// Seal hashes every file under dir (except a manifest), fills m.Files and writes the manifest
// atomically. Call it once, after every data file is written and closed.
func Seal(dir string, m Manifest) (Manifest, error) {
	m.Format = FormatVersion
	if m.Finished.IsZero() {
		m.Finished = time.Now().UTC()
	}
	files, err := hashTree(dir)
	if err != nil {
		return Manifest{}, err
	}
	m.Files = files
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: encode manifest: %w", err)
	}
	tmp := filepath.Join(dir, ManifestName+".tmp")
	if err := writeSynced(tmp, append(b, '\n')); err != nil {
		return Manifest{}, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, ManifestName)); err != nil {
		return Manifest{}, fmt.Errorf("backup: seal manifest: %w", err)
	}
	return m, syncDir(dir)
}

// Open reads dir's manifest, refusing a directory without one (ErrIncomplete).
func Open(dir string) (Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, fmt.Errorf("%s: %w", dir, ErrIncomplete)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("backup: read manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("backup: %s: manifest is not valid JSON: %w", dir, err)
	}
	if m.Format != FormatVersion {
		return Manifest{}, fmt.Errorf("backup: %s: manifest format %d, this shardmart reads %d", dir, m.Format, FormatVersion)
	}
	return m, nil
}

// Verify opens dir's manifest and checks that every file it lists is there with its size and
// hash, and that no other file is: the backup is exactly what was sealed.
func Verify(dir string) (Manifest, error) {
	m, err := Open(dir)
	if err != nil {
		return Manifest{}, err
	}
	got, err := hashTree(dir)
	if err != nil {
		return Manifest{}, err
	}
	want := map[string]File{}
	for _, f := range m.Files {
		want[f.Path] = f
	}
	var diffs []string
	for _, f := range got {
		w, ok := want[f.Path]
		switch {
		case !ok:
			diffs = append(diffs, f.Path+": not in the manifest")
		case w != f:
			diffs = append(diffs, fmt.Sprintf("%s: %d bytes sha256 %s, manifest says %d bytes sha256 %s", f.Path, f.Bytes, f.SHA256[:12], w.Bytes, w.SHA256[:min(12, len(w.SHA256))]))
		}
		delete(want, f.Path)
	}
	for p := range want {
		diffs = append(diffs, p+": missing")
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		return m, fmt.Errorf("%w: %s: %v", ErrMismatch, dir, diffs)
	}
	return m, nil
}

// CheckCounts compares what a restore loaded with the manifest's counts and lists every
// difference; a table or collection on one side only is a difference too.
func CheckCounts(m Manifest, loaded map[string]int64) error {
	var diffs []string
	for k, n := range m.Counts {
		if got, ok := loaded[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: not loaded (manifest: %d)", k, n))
		} else if got != n {
			diffs = append(diffs, fmt.Sprintf("%s: loaded %d, manifest %d", k, got, n))
		}
	}
	for k, n := range loaded {
		if _, ok := m.Counts[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: loaded %d, not in the manifest", k, n))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		return fmt.Errorf("%w: %v", ErrMismatch, diffs)
	}
	return nil
}

// EmptyDir makes dir if it does not exist and refuses one that holds anything: a restore or
// a backup never mixes its files with others.
func EmptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("backup: %s is not empty (%d entries, first %q): choose an empty directory", dir, len(ents), ents[0].Name())
	}
	return nil
}

func hashTree(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == ManifestName || rel == ManifestName+".tmp" {
			return nil
		}
		f, err := hashFile(p)
		if err != nil {
			return err
		}
		f.Path = rel
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("backup: hash %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

func hashFile(p string) (File, error) {
	f, err := os.Open(p)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, err
	}
	return File{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("backup: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("backup: %w", err)
	}
	return f.Close()
}

// SyncTree fsyncs every file and directory under dir, so a sealed backup survives a crash of
// the machine, not only of the process.
func SyncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("backup: sync %s: %w", dir, err)
	}
	return nil
}
