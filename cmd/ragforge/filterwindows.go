package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// filterWindows are --max-seq-length and --doc-stride of a command that
// reads a filter (eval filter, train calibration, export). They default to
// the filter's own (filtertrain.CheckpointWindows: its config.json's, else its
// training run's, else RAG²'s 512 / 128); a flag overrides one value, says
// so on stderr, and Sources records where each came from.
type filterWindows struct {
	MaxSeqLength int `json:"max_seq_length"`
	DocStride    int `json:"doc_stride"`
	Sources      struct {
		MaxSeqLength string `json:"max_seq_length"`
		DocStride    string `json:"doc_stride"`
	} `json:"sources"`

	changed func(string) bool
}

func (w *filterWindows) add(cmd *cobra.Command) {
	d := filter.DefaultWindows()
	f := cmd.Flags()
	f.IntVar(&w.MaxSeqLength, "max-seq-length", d.MaxSeqLength, "tokens per window, </s> included (default: the filter's config.json ragforge_filter_windows, else its training_args.json, else 512)")
	f.IntVar(&w.DocStride, "doc-stride", d.DocStride, "tokens shared by consecutive windows (default: as --max-seq-length, else 128)")
	w.changed = f.Changed
}

func (w *filterWindows) set() filter.Windowing {
	return filter.Windowing{MaxSeqLength: w.MaxSeqLength, DocStride: w.DocStride}
}

// resolve takes the windows of the filter directories dirs (an ensemble's
// members must agree) for every flag not given, printing to errOut each
// flag that overrides them. Errors: members read at different windows
// with no flags to settle them, malformed files, invalid windows.
func (w *filterWindows) resolve(dirs []string, errOut io.Writer) error {
	var own filter.Windowing
	var from string
	for i, d := range dirs {
		cw, src, err := filtertrain.CheckpointWindows(d)
		if err != nil {
			return err
		}
		if i > 0 && cw != own && !(w.changed("max-seq-length") && w.changed("doc-stride")) {
			return fmt.Errorf("--model %s reads windows %+v, --model %s %+v: give --max-seq-length and --doc-stride", dirs[0], own, d, cw)
		}
		if i == 0 {
			own, from = cw, src
		}
	}
	for _, v := range []struct {
		flag      string
		val       *int
		model     int
		recordsIn *string
	}{
		{"max-seq-length", &w.MaxSeqLength, own.MaxSeqLength, &w.Sources.MaxSeqLength},
		{"doc-stride", &w.DocStride, own.DocStride, &w.Sources.DocStride},
	} {
		if !w.changed(v.flag) {
			*v.val, *v.recordsIn = v.model, from
			continue
		}
		*v.recordsIn = filtertrain.WindowsFromFlag
		fmt.Fprintf(errOut, "filter %s: --%s %d overrides the %s value %d\n", dirs[0], v.flag, *v.val, from, v.model)
	}
	if err := w.set().Check(); err != nil {
		return fmt.Errorf("--max-seq-length %d --doc-stride %d: %w", w.MaxSeqLength, w.DocStride, err)
	}
	return nil
}
