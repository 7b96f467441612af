package encode

import (
	"github.com/ragforge/ragforge/models/bert"
)

// DirPooling is the pooling a BERT retriever directory declares
// (DirSettings: its sentence-transformers 1_Pooling/config.json, written by
// `models init --pooling`, by retriever training and by `export
// retriever`), else bert.PoolCLS (the BGE / MedCPT convention of a bare HF
// checkpoint). Errors: malformed sentence-transformers files, naming the
// file.
func DirPooling(dir string) (bert.Pooling, error) {
	s, _, err := DirSettings(dir)
	return s.Pooling, err
}
