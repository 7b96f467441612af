package selflearn

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ragforge/ragforge/retrieval/hyde"
	"github.com/ragforge/ragforge/train/retriever"
)

func (s *state) mine(ctx context.Context, t int, keys []string, qs, hypos map[string][]string) ([]retriever.Triplet, int, error) {
	path := filepath.Join(s.roundDir(t), "train.jsonl")
	if ok, err := s.stepDone(t, "mine"); err != nil {
		return nil, 0, err
	} else if ok {
		tr, err := retriever.ReadJSONLFile(path)
		return tr, 0, err
	}
	stage := roundKey(t, "mine")
	s.report(stage, 0, len(keys)+1) // +1: the search and the JSONL file
	ix, enc, err := s.index(t - 1)
	if err != nil {
		return nil, 0, err
	}
	vecs := make([][]float32, len(keys))
	pos := make([]string, len(keys))
	for b := 0; b < len(keys); b += encodeBlock {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		blk := keys[b:min(b+encodeBlock, len(keys))]
		q := make([]string, len(blk))
		h := make([][]string, len(blk))
		for i, k := range blk {
			q[i], h[i] = qs[k][0], hypos[k]
		}
		v, err := hyde.EncodeBatch(enc, s.hydeConfig(), q, h)
		if err != nil {
			return nil, 0, fmt.Errorf("mine: %s..%s: %w", blk[0], blk[len(blk)-1], err)
		}
		copy(vecs[b:], v)
		s.report(stage, b+len(blk), len(keys)+1)
	}
	for i, k := range keys {
		pos[i] = s.chunkOfKey(k)
	}
	q := retriever.MineQueries{Vecs: vecs, Positives: pos, Texts: make([]string, len(keys))}
	for i, k := range keys {
		q.Texts[i] = qs[k][0]
	}
	if s.cfg.NegativeMaxScore > 0 {
		// s(q, positive) on the index's scale: the inner product with the
		// positive's corpus vector.
		cv, dim := s.vecs[t-1], ix.Dim()
		q.PosScores = make([]float64, len(keys))
		for i, v := range vecs {
			row := cv[s.byID[pos[i]]*dim:][:dim]
			for j, x := range v {
				q.PosScores[i] += float64(x) * float64(row[j])
			}
		}
	}
	corpus := retriever.MineCorpus{
		DocOf:  func(id string) string { return s.corpus[s.byID[id]].DocID },
		TextOf: func(id string) string { return s.corpus[s.byID[id]].Text },
	}
	negs, st, err := retriever.MineHardNegatives(ix, q, corpus, retriever.MineConfig{
		RankFrom: s.cfg.RankFrom, RankTo: s.cfg.RankTo, N: s.cfg.NumNegatives, Seed: uint64(s.cfg.Seed) + uint64(t),
		MaxScore: s.cfg.NegativeMaxScore})
	if err != nil {
		return nil, 0, err
	}
	triplets := make([]retriever.Triplet, len(keys))
	for i, k := range keys {
		tr := retriever.Triplet{Query: qs[k][0], HypoDocs: hypos[k], Pos: s.corpus[s.byID[pos[i]]].Text}
		for _, n := range negs[i] {
			tr.Negs = append(tr.Negs, s.corpus[s.byID[n]].Text)
		}
		triplets[i] = tr
	}
	if err := writeFileAtomic(path, func(w io.Writer) error { return retriever.WriteJSONL(w, triplets) }); err != nil {
		return nil, 0, err
	}
	if err := s.run.Artifact("triplets", path); err != nil {
		return nil, 0, err
	}
	s.report(stage, len(keys)+1, len(keys)+1)
	return triplets, st.Shortfall, s.markDone(t, "mine", fmt.Sprintf("shortfall %d missing %d same-text %d above-max %d", st.Shortfall, st.Missing, st.SameText, st.AboveMax))
}
