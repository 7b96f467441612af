package chunk

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
)

// Walk chunks the corpus at path as Corpus chunks an opened one (cfg.Size 0:
// one chunk per document; otherwise Split), but streams: each document is
// read (data.Walk), split and its chunks passed to fn before the next is
// read, so memory does not grow with the corpus beyond data.Walk's id set.
// Chunks come in the order Corpus returns them. fn's error stops the walk
// and is returned (data.ErrStop stops it without error). The Stats count
// what was passed to fn. Errors: an invalid cfg (Size > 0) before any
// reading, data.Walk's, and Split's naming the document.
func Walk(path string, fields data.FieldOptions, cfg Config, fn func(data.Chunk) error) (Stats, error) {
	var st Stats
	if cfg.Size != 0 {
		if err := cfg.Validate(); err != nil {
			return st, fmt.Errorf("chunk %s: %w", path, err)
		}
	}
	err := data.Walk(path, fields, func(d data.Document) error {
		var chunks []data.Chunk
		if cfg.Size == 0 {
			chunks = []data.Chunk{whole(d)}
		} else {
			var over int
			var err error
			if chunks, over, err = split(d, cfg); err != nil {
				return fmt.Errorf("chunk %s: document %d: %w", path, st.Docs, err)
			}
			st.Oversize += over
		}
		st.Docs++
		if len(chunks) == 0 {
			st.Empty++
		}
		for _, c := range chunks {
			if err := fn(c); err != nil {
				return err
			}
			st.Chunks++
		}
		return nil
	})
	return st, err
}
