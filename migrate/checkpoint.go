package migrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

const checkpointFormat = 1

// errUnreadableCheckpoint marks a checkpoint file that exists but could not be read; one that
// was read but makes no sense is ignored instead.
var errUnreadableCheckpoint = errors.New("checkpoint unreadable")

// checkpoint is the resume state of an interrupted run. It is written after each fully
// processed page and names the continue token of the next page; every Task before that token
// has been rewritten.
type checkpoint struct {
	Format int `json:"format"`
	// CRD, CRDUID and Generation identify the CRD the run started on; a checkpoint of another
	// CRD, or of the same CRD after its spec changed, is not resumed.
	CRD        string `json:"crd"`
	CRDUID     string `json:"crdUID"`
	Generation int64  `json:"generation"`
	Namespace  string `json:"namespace"`
	// Continue is the token of the next page to process. Empty with ListDone false means the
	// listing has to start from the beginning.
	Continue string `json:"continue,omitempty"`
	// ListDone is true once every page was processed; only the trim is left.
	ListDone bool `json:"listDone,omitempty"`

	Pages     int `json:"pages"`
	Total     int `json:"total"`
	Rewritten int `json:"rewritten"`
	Skipped   int `json:"skipped"`
	Conflicts int `json:"conflicts"`
	// ManagedFieldsMoved and ManagedFieldsKept are Summary's counts so far.
	ManagedFieldsMoved int `json:"managedFieldsMoved,omitempty"`
	ManagedFieldsKept  int `json:"managedFieldsKept,omitempty"`

	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
}

// loadCheckpoint reads path. A missing file is (nil, nil).
func loadCheckpoint(path string) (*checkpoint, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreadableCheckpoint, err)
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s is not valid JSON: %w", path, err)
	}
	if cp.Format != checkpointFormat {
		return nil, fmt.Errorf("checkpoint %s has format %d, want %d", path, cp.Format, checkpointFormat)
	}
	return &cp, nil
}

// save writes the checkpoint atomically: a temporary file beside path, synced, then renamed
// over path, so that a crash leaves either the old or the new checkpoint, never a torn one.
func (cp *checkpoint) save(path string) error {
	cp.Format = checkpointFormat
	cp.Updated = time.Now().UTC()
	data, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // no-op after the rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	// Make the rename itself durable; not every platform can sync a directory.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func removeCheckpoint(path string) error {
	if path == "" {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove checkpoint: %w", err)
	}
	return nil
}

func isUnreadable(err error) bool {
	return errors.Is(err, errUnreadableCheckpoint)
}
