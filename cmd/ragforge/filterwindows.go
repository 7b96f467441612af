package main

import (
	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/train/filtertrain"
)

// filterWindows are --max-seq-length and --doc-stride of a command that
// reads a filter (eval filter, train calibration, export). They default to
// the filter's own (filtertrain.ResolveWindows: its config.json's, else its
// training run's, else RAG²'s 512 / 128); a flag overrides one value, says
// so on stderr, and Sources records where each came from.
type filterWindows struct {
	filtertrain.ReadWindows

	changed func(string) bool
}

func (w *filterWindows) add(cmd *cobra.Command) {
	d := filter.DefaultWindows()
	f := cmd.Flags()
	f.IntVar(&w.MaxSeqLength, "max-seq-length", d.MaxSeqLength, "tokens per window, </s> included (default: the filter's config.json ragforge_filter_windows, else its training_args.json, else 512)")
	f.IntVar(&w.DocStride, "doc-stride", d.DocStride, "tokens shared by consecutive windows (default: as --max-seq-length, else 128)")
	w.changed = f.Changed
}

// request is what the flags ask of the windows.
func (w *filterWindows) request() filtertrain.WindowsRequest {
	return filtertrain.WindowsRequest{MaxSeqLength: w.MaxSeqLength, DocStride: w.DocStride,
		SetMaxSeqLength: w.changed("max-seq-length"), SetDocStride: w.changed("doc-stride")}
}
