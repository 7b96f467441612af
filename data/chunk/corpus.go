package chunk

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
)

// Corpus returns the chunks of an opened corpus (data.Open):
//
//   - a pre-encoded corpus: its stored chunks, in row order (its vectors'
//     rows), never split again;
//   - cfg.Size 0: one chunk per document, as BEIR evaluation indexes whole
//     documents: id and doc id the document's, text "title text" (BEIR's
//     convention) with whitespace collapsed, Start 0, End the length of the document text;
//   - otherwise SplitAll with cfg.
//
// progress receives (documents split, total documents). Errors: an invalid
// cfg (Size > 0) and SplitAll's, naming c.Path.
func Corpus(c *data.Corpus, cfg Config, progress func(done, total int)) ([]data.Chunk, error) {
	// The pre-encoded and whole-document paths split nothing, but still
	// report their documents as done: a progress line "done 0" reads as
	// if nothing was chunked.
	done := func(n int) {
		if progress != nil {
			progress(n, n)
		}
	}
	if c.Encoded != nil {
		chunks := c.Encoded.Chunks()
		done(len(chunks))
		return chunks, nil
	}
	if cfg.Size == 0 {
		defer done(len(c.Docs))
		chunks := make([]data.Chunk, len(c.Docs))
		for i, d := range c.Docs {
			chunks[i] = whole(d)
		}
		return chunks, nil
	}
	chunks, _, err := SplitAll(c.Docs, cfg, progress)
	if err != nil {
		return nil, fmt.Errorf("chunk %s: %w", c.Path, err)
	}
	return chunks, nil
}

// whole is document d as one chunk (Corpus with Size 0).
func whole(d data.Document) data.Chunk {
	text := d.Text
	if d.Title != "" {
		text = d.Title + " " + d.Text
	}
	return data.Chunk{ID: d.ID, DocID: d.ID, Text: Collapse(text), Start: 0, End: len(d.Text), Meta: d.Meta}
}
