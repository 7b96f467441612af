package demo

import (
	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/evalrun"
)

// corpus is the demo's corpus chunked at size and overlap (0: whole
// documents), as a command given those flags reads it; it is also what
// the commands record as their corpus settings.
func (st *state) corpusAt(size, overlap int) evalrun.Corpus {
	c := evalrun.DefaultCorpus(st.corpus)
	c.ChunkSize, c.Overlap = size, overlap
	return c
}

// load loads and chunks the demo's corpus at size and overlap.
func (st *state) load(size, overlap int) ([]data.Document, []data.Chunk, error) {
	c := st.corpusAt(size, overlap)
	l, err := c.Load(st.log)
	if err != nil {
		return nil, nil, err
	}
	return l.Docs, l.Chunks, nil
}
