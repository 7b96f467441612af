package data

import (
	"path/filepath"
	"strings"
)

// CorpusName is the default name of a corpus path: its base name without
// extension ("../data/ap_protocols" → "ap_protocols", "x/corpus.jsonl" →
// "corpus"), or the corpus name of a rag2: spec.
func CorpusName(path string) string {
	if rest, ok := strings.CutPrefix(path, EncodedScheme); ok {
		if _, name, ok := strings.Cut(rest, "#"); ok && name != "" {
			return name
		}
		path = rest
	}
	base := filepath.Base(strings.TrimRight(path, "/"))
	return strings.TrimSuffix(base, filepath.Ext(base))
}
