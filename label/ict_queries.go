package label

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ragforge/ragforge/data"
)

// ICTQuerySet is a retrieval evaluation set made from a corpus alone by the
// inverse cloze task (Lee et al., 2019): each query is a sentence of a
// chunk, and its relevant chunks are every chunk whose text contains the
// sentence (the one it was drawn from and, with overlapping chunks, any
// neighbour holding it whole), as the AP "contains" rule judges real
// questions. No relevance labels are used, so settings chosen on it (the
// BM25 analyzer, k1, b) do not depend on the evaluation questions.
type ICTQuerySet struct {
	Queries []data.Query // ids "ict:<chunk id>:<k>", in chunk order
	Qrels   data.Qrels   // query id → chunk id → 1
	// Chunks are the chunks to index: the input chunks (same ids and
	// order), each with the sentences of the queries that were not kept
	// (ICTOptions.Keep) removed from its whitespace-normalized text, so
	// such a query is found through the rest of its chunk, not by
	// matching itself. Chunks no query touches are unchanged.
	Chunks []data.Chunk
}

// ICTQueries draws ICTQuerySet's pseudo-queries from chunks with
// ICTExamples' sampler and options (PerChunk sentences of MinWords words
// per chunk, at most one per sentence unless QueryWords, DropWords or
// ContentWords vary the words; MaxChunks; Seed; Keep is the fraction of
// queries whose sentence stays in the index; Negatives and NumNegatives
// are not used). Errors: invalid options, no chunk with two
// usable sentences, a cancelled ctx.
func ICTQueries(ctx context.Context, chunks []data.Chunk, opt ICTOptions) (*ICTQuerySet, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	// A repeated sentence is a new query only when its words vary.
	cycle := opt.QueryWords > 0 || opt.DropWords > 0 || opt.ContentWords > 0
	norm := make([]string, len(chunks))
	for i, c := range chunks {
		norm[i] = normSpace(c.Text)
	}
	set := &ICTQuerySet{Qrels: data.Qrels{}}
	cuts := map[int][]string{} // chunk index → sentences to remove from it
	err := ictDraws(ctx, chunks, opt, cycle, func(c data.Chunk, d ictDraw, _ *rand.Rand) error {
		id := fmt.Sprintf("ict:%s:%d", c.ID, d.k)
		sent := d.sents[d.si]
		rel := map[string]int{c.ID: 1}
		for i, t := range norm {
			if strings.Contains(t, sent) {
				rel[chunks[i].ID] = 1
				if !d.keep {
					cuts[i] = append(cuts[i], sent)
				}
			}
		}
		set.Queries = append(set.Queries, data.Query{ID: id, Text: d.query})
		set.Qrels[id] = rel
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(set.Queries) == 0 {
		return nil, errors.New("ict queries: no chunk has two sentences of MinWords words")
	}
	set.Chunks = make([]data.Chunk, len(chunks))
	copy(set.Chunks, chunks)
	for i, ss := range cuts {
		t := norm[i]
		for _, s := range ss {
			t = normSpace(strings.ReplaceAll(t, s, " "))
		}
		set.Chunks[i].Text = t
	}
	return set, nil
}
