package encode

import (
	"fmt"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
)

// DirPooling is the pooling a BERT retriever directory declares: its
// sentence-transformers 1_Pooling/config.json (hf.ReadSentenceTransformer;
// written by `models init --pooling`, by retriever training and by `export
// retriever`), else bert.PoolCLS (the BGE / MedCPT convention of a bare HF
// checkpoint). It is the one place encode, eval, selflearn, pipeline and
// export read the pooling from when no flag overrides it. Errors: malformed
// sentence-transformers files, naming the file.
func DirPooling(dir string) (bert.Pooling, error) {
	st, ok, err := hf.ReadSentenceTransformer(dir)
	if err != nil {
		return "", fmt.Errorf("retriever %s: pooling: %w", dir, err)
	}
	if !ok {
		return bert.PoolCLS, nil
	}
	return bert.Pooling(st.Pooling), nil
}
