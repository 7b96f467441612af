package filtertrain

import (
	"fmt"
	"io"

	"github.com/ragforge/ragforge/models/filter"
)

// ReadWindows are the windows a command reads a filter at (eval filter, train
// calibration, export) and where each value came from (WindowsFrom*).
type ReadWindows struct {
	MaxSeqLength int `json:"max_seq_length"`
	DocStride    int `json:"doc_stride"`
	Sources      struct {
		MaxSeqLength string `json:"max_seq_length"`
		DocStride    string `json:"doc_stride"`
	} `json:"sources"`
}

// Windowing is w as filter.Windowing (the aggregate left to the reader).
func (w ReadWindows) Windowing() filter.Windowing {
	return filter.Windowing{MaxSeqLength: w.MaxSeqLength, DocStride: w.DocStride}
}

// WindowsRequest is what a caller asks of the windows: a value set
// explicitly (SetMaxSeqLength, SetDocStride) overrides the filter's own;
// the others are the filter's (CheckpointWindows).
type WindowsRequest struct {
	MaxSeqLength, DocStride       int
	SetMaxSeqLength, SetDocStride bool
}

// ResolveWindows returns the windows to read the filter directories dirs at
// (an ensemble's members must agree unless both values are set), writing to
// note each set value that overrides the filter's. Errors: members read at
// different windows, malformed files, invalid windows.
func ResolveWindows(dirs []string, req WindowsRequest, note io.Writer) (ReadWindows, error) {
	var own filter.Windowing
	var from string
	for i, d := range dirs {
		cw, src, err := CheckpointWindows(d)
		if err != nil {
			return ReadWindows{}, err
		}
		if i > 0 && cw != own && !(req.SetMaxSeqLength && req.SetDocStride) {
			return ReadWindows{}, fmt.Errorf("--model %s reads windows %+v, --model %s %+v: give --max-seq-length and --doc-stride", dirs[0], own, d, cw)
		}
		if i == 0 {
			own, from = cw, src
		}
	}
	w := ReadWindows{MaxSeqLength: req.MaxSeqLength, DocStride: req.DocStride}
	for _, v := range []struct {
		flag      string
		set       bool
		val       *int
		model     int
		recordsIn *string
	}{
		{"max-seq-length", req.SetMaxSeqLength, &w.MaxSeqLength, own.MaxSeqLength, &w.Sources.MaxSeqLength},
		{"doc-stride", req.SetDocStride, &w.DocStride, own.DocStride, &w.Sources.DocStride},
	} {
		if !v.set {
			*v.val, *v.recordsIn = v.model, from
			continue
		}
		*v.recordsIn = WindowsFromFlag
		fmt.Fprintf(note, "filter %s: --%s %d overrides the %s value %d\n", dirs[0], v.flag, *v.val, from, v.model)
	}
	if err := w.Windowing().Check(); err != nil {
		return w, fmt.Errorf("--max-seq-length %d --doc-stride %d: %w", w.MaxSeqLength, w.DocStride, err)
	}
	return w, nil
}
