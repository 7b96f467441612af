package selflearn

import (
	"context"
	"fmt"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// queryKeys returns the item keys of round t's pseudo-queries for the
// sampled chunks idx (corpus indexes): cfg.QueriesPerChunk keys per chunk,
// chunk-major, query j of chunk c being roundKey(t, c.ID) for j = 0 (the
// SL-HyDE key, so runs with one query per chunk keep their stored items)
// and roundKey(t, c.ID+"#q<j>") after. It records each key's chunk id for
// chunkOfKey.
func (s *state) queryKeys(t int, idx []int) []string {
	q := max(s.cfg.QueriesPerChunk, 1)
	keys := make([]string, 0, len(idx)*q)
	if s.keyChunk == nil {
		s.keyChunk = map[string]string{}
	}
	for _, ci := range idx {
		id := s.corpus[ci].ID
		for j := range q {
			k := roundKey(t, id)
			if j > 0 {
				k = roundKey(t, fmt.Sprintf("%s#q%d", id, j))
			}
			s.keyChunk[k] = id
			keys = append(keys, k)
		}
	}
	return keys
}

// chunkOfKey is the chunk id of a pseudo-query key made by queryKeys.
func (s *state) chunkOfKey(key string) string { return s.keyChunk[key] }

// queryIndex is j of a key made by queryKeys (0 for the first query of a
// chunk).
func (s *state) queryIndex(t int, key string) int {
	var j int
	if _, err := fmt.Sscanf(key[len(roundKey(t, s.chunkOfKey(key))):], "#q%d", &j); err != nil {
		return 0
	}
	return j
}

// genQueries generates the pseudo-queries of keys[sel] with g (Eq. 2):
// every chunk among them gets cfg.QueriesPerChunk queries from one
// generate.Queries call (Options.N = QueriesPerChunk, the generator's own
// per-document seed; ICT draws that many distinct sentences) and key j of
// the chunk gets the j-th. A query equal to an earlier one of its chunk
// (a chunk with fewer usable sentences than QueriesPerChunk) is an item
// error, so no pair is trained twice.
func (s *state) genQueries(ctx context.Context, t int, g lm.Generator, keys []string, sel []int) ([][]string, []error) {
	q := max(s.cfg.QueriesPerChunk, 1)
	var docs []string
	slot := map[string]int{} // chunk id → index in docs
	for _, i := range sel {
		id := s.chunkOfKey(keys[i])
		if _, ok := slot[id]; !ok {
			slot[id] = len(docs)
			docs = append(docs, s.corpus[s.byID[id]].Text)
		}
	}
	outs, errs := generate.Queries(ctx, g, s.cfg.QueryTemplate, docs, s.genOpt(t, q, s.cfg.MaxQueryTokens))
	res, rerr := make([][]string, len(sel)), make([]error, len(sel))
	for n, i := range sel {
		d, j := slot[s.chunkOfKey(keys[i])], s.queryIndex(t, keys[i])
		switch {
		case errs[d] != nil:
			rerr[n] = errs[d]
		case j >= len(outs[d]):
			rerr[n] = fmt.Errorf("query %d of %d: generator returned %d", j+1, q, len(outs[d]))
		default:
			for _, prev := range outs[d][:j] {
				if prev == outs[d][j] {
					rerr[n] = fmt.Errorf("query %d of %d: same text as an earlier query of the chunk: %w", j+1, q, ErrDuplicateQuery)
					break
				}
			}
			if rerr[n] == nil {
				res[n] = []string{outs[d][j]}
			}
		}
	}
	return res, rerr
}

// ErrDuplicateQuery marks a pseudo-query that repeats an earlier one of its
// chunk (counted in Counts.QueryErrors, not trained on).
var ErrDuplicateQuery = fmt.Errorf("duplicate pseudo-query")

// pooling is cfg.Pooling, else what the initial retriever declares
// (encode.DirPooling); every round encodes and trains with it, and the
// trained retriever records it in its sentence-transformers files.
func (s *state) pooling() (bert.Pooling, error) {
	if s.cfg.Pooling != "" {
		return bert.Pooling(s.cfg.Pooling), nil
	}
	return encode.DirPooling(s.cfg.RetrieverDir)
}
