package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/train/retriever"
)

// retrieverExportFlags are `export --retriever`'s flags: how the exported
// sentence-transformers directory encodes. Unset ones come from the source
// directory's sentence-transformers files (a selflearn retriever has them),
// else from ragforge's defaults (CLS, normalized, 512 tokens, no prompts).
type retrieverExportFlags struct {
	Dir           string
	Pooling       string
	Normalize     bool
	MaxLength     int
	QueryPrefix   string
	PassagePrefix string
	changed       func(string) bool
}

func (r *retrieverExportFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.Dir, "retriever", "", "BERT bi-encoder directory to export as a sentence-transformers model (a selflearn round-<t>/retriever, or any HF BERT directory)")
	f.StringVar(&r.Pooling, "pooling", "cls", "retriever pooling: cls | mean (default: the source's 1_Pooling, else cls)")
	f.BoolVar(&r.Normalize, "normalize", true, "retriever: add a Normalize module (default: the source's, else true)")
	f.IntVar(&r.MaxLength, "max-length", encode.DefaultMaxLength, "retriever max_seq_length in tokens, clamped to max_position_embeddings (default: the source's, else 512)")
	f.StringVar(&r.QueryPrefix, "query-prefix", "", "retriever: the \"query\" prompt (default: the source's)")
	f.StringVar(&r.PassagePrefix, "passage-prefix", "", "retriever: the \"document\" prompt (default: the source's)")
	r.changed = f.Changed
}

// stray reports a retriever flag given without --retriever.
func (r *retrieverExportFlags) stray() error {
	for _, f := range []string{"pooling", "normalize", "max-length", "query-prefix", "passage-prefix"} {
		if r.changed(f) {
			return fmt.Errorf("--%s applies to --retriever exports only", f)
		}
	}
	return nil
}

// export writes r.Dir to out as a sentence-transformers directory and
// returns the summary line.
func (r *retrieverExportFlags) export(g *globals, out string) (string, error) {
	st := hf.SentenceTransformer{Pooling: "cls", Normalize: true, MaxSeqLength: encode.DefaultMaxLength}
	if have, ok, err := hf.ReadSentenceTransformer(r.Dir); err != nil {
		return "", err
	} else if ok {
		st = have
	}
	if r.changed("pooling") {
		st.Pooling = r.Pooling
	}
	if r.changed("normalize") {
		st.Normalize = r.Normalize
	}
	if r.changed("max-length") {
		st.MaxSeqLength = r.MaxLength
	}
	if r.changed("query-prefix") {
		st.QueryPrompt = r.QueryPrefix
	}
	if r.changed("passage-prefix") {
		st.DocumentPrompt = r.PassagePrefix
	}
	if st.Pooling != "cls" && st.Pooling != "mean" {
		return "", fmt.Errorf("--pooling %q: want cls or mean", st.Pooling)
	}
	if st.MaxSeqLength < 2 {
		return "", fmt.Errorf("--max-length %d: want >= 2", st.MaxSeqLength)
	}
	if err := retriever.Export(r.Dir, out, g.Backend, st); err != nil {
		return "", err
	}
	return fmt.Sprintf("exported %s to %s (sentence-transformers: %s pooling, normalize %v)", r.Dir, out, st.Pooling, st.Normalize), nil
}
