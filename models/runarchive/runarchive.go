// Package runarchive moves runs between run stores (a SQLite file and a
// PostgreSQL server, either way) through a JSON Lines file: every column of
// the run, its metrics, artifacts and resume items (data/tracker) and its
// labels with their reviews (models/labelstore), verbatim, so an export
// imported elsewhere and exported again is the same file. The scorers'
// log-probability cache is not part of a run and is not moved.
//
// The file's first line is the header {"format":"ragforge-runs","version":1};
// each following line is one Run.
package runarchive

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/labelstore"
)

// Format and Version are the header's values.
const (
	Format  = "ragforge-runs"
	Version = 1
)

type header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// Run is one line of the file: a run as data/tracker dumps it, with the
// labels stored under its id.
type Run struct {
	tracker.RunDump
	Labels []labelstore.LabelDump `json:"labels"`
}

// Export writes the header and the runs ids (ids or unique prefixes, in
// that order) of rs, with their labels from ls, to w.
func Export(w io.Writer, rs *tracker.Store, ls *labelstore.Store, ids []string) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(header{Format, Version}); err != nil {
		return fmt.Errorf("export runs: %w", err)
	}
	for _, id := range ids {
		d, err := rs.Dump(id)
		if err != nil {
			return fmt.Errorf("export runs: %w", err)
		}
		labels, err := ls.Dump(d.Run.ID)
		if err != nil {
			return fmt.Errorf("export run %s: %w", d.Run.ID, err)
		}
		if err := enc.Encode(Run{RunDump: *d, Labels: labels}); err != nil {
			return fmt.Errorf("export run %s: %w", d.Run.ID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export runs: %w", err)
	}
	return nil
}

// Import reads a file written by Export from r (named name in errors) and
// stores every run with its labels into rs and ls (which share one
// database) in one transaction: all runs or none. It returns the run ids in
// file order. Errors: a wrong header, a malformed line (by line number), a
// run already stored (wrapping tracker.ErrExists), a label whose run id
// differs from its run's.
func Import(r io.Reader, name string, rs *tracker.Store, ls *labelstore.Store) ([]string, error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	dec.DisallowUnknownFields()
	var h header
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("import %s: line 1 (header): %w", name, err)
	}
	if h.Format != Format || h.Version != Version {
		return nil, fmt.Errorf("import %s: line 1: header %+v is not {format %q, version %d}", name, h, Format, Version)
	}
	tx, err := rs.DB().Begin()
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", name, err)
	}
	defer tx.Rollback()
	var ids []string
	for line := 2; ; line++ {
		var run Run
		err := dec.Decode(&run)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("import %s: line %d: %w", name, line, err)
		}
		for i, l := range run.Labels {
			if l.RunID != run.Run.ID {
				return nil, fmt.Errorf("import %s: line %d: label %d: field %q: %q is not the run's id %q", name, line, i+1, "run_id", l.RunID, run.Run.ID)
			}
		}
		if err := rs.Restore(tx, &run.RunDump); err != nil {
			return nil, fmt.Errorf("import %s: line %d: %w", name, line, err)
		}
		if err := ls.Restore(tx, run.Labels); err != nil {
			return nil, fmt.Errorf("import %s: line %d: run %s: %w", name, line, run.Run.ID, err)
		}
		ids = append(ids, run.Run.ID)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("import %s: %w", name, err)
	}
	return ids, nil
}
