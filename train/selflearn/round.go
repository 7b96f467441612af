package selflearn

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/retrieval/fusion"
)

// roundData is what one round's steps hand on: the pseudo-query, candidate,
// selection and hypothetical-document items by key "r<t>/<chunk id>".
type roundData struct {
	t      int
	idx    []int    // sampled chunk indices
	keys   []string // one per sampled chunk
	qs     map[string][]string
	qkeys  []string // keys with a query
	cands  map[string][]string
	ckeys  []string // keys with candidates
	sels   map[string]selItem
	pairs  []SFTPair // (q, d*) per ckey
	hypos  map[string][]string
	tkeys  []string // keys with a training triplet
	held   []string // keys held out to choose the hybrid's weights
	gPrev  lm.Generator
	gNow   lm.Generator
	result *Round
}

// round runs steps 1–8 of round t (see Run) and appends its Round to the
// report.
func (s *state) round(ctx context.Context, t int) error {
	rd := Round{Round: t, RetrieverDir: s.retrieverDir(t)}
	defer func() { s.rep.Rounds = append(s.rep.Rounds, rd) }()
	r := &roundData{t: t, result: &rd}
	var err error
	if r.gPrev, err = s.generator(s.genTag(t - 1)); err != nil {
		return err
	}
	r.idx = s.sample(t)
	rd.Counts.Sampled = len(r.idx)
	r.keys = s.queryKeys(t, r.idx)
	if err := s.generateRound(ctx, r); err != nil {
		return err
	}
	if err := s.selectRound(ctx, r); err != nil {
		return err
	}
	if err := s.tripletHypos(ctx, r); err != nil {
		return err
	}
	for _, k := range r.ckeys {
		if _, ok := r.hypos[k]; ok {
			r.tkeys = append(r.tkeys, k)
		}
	}
	// Pseudo-queries held out of training choose the hybrid's weights (9.).
	r.tkeys, r.held = s.splitHoldout(t, r.tkeys)
	rd.Counts.Triplets, rd.Counts.HeldOut = len(r.tkeys), len(r.held)
	if len(r.tkeys) == 0 {
		rd.Errors = append(rd.Errors, "no training triplets: retriever not trained this round")
		return s.copyRetriever(t)
	}

	// 6. Hard negatives (Eq. 7) and FlagEmbedding JSONL.
	triplets, short, err := s.mine(ctx, t, r.tkeys, r.qs, r.hypos)
	if err != nil {
		return err
	}
	rd.Counts.NegShortfall = short

	// 7. Retriever training (Eq. 8).
	if err := s.trainRetriever(ctx, t, triplets); err != nil {
		return err
	}

	// 9. Hybrid weights on the held-out pseudo-queries (no relevance labels).
	return s.fusionStep(ctx, r)
}

// chunkOf is the chunk of a round key (queryKeys).
func (s *state) chunkOf(t int, key string) data.Chunk {
	return s.corpus[s.byID[s.chunkOfKey(key)]]
}

// generateRound generates a pseudo-query per sampled chunk (1., Eq. 2) and
// L candidate documents per query (2., Eq. 3) with G_{t−1}.
func (s *state) generateRound(ctx context.Context, r *roundData) error {
	cfg, t, rd := s.cfg, r.t, r.result
	qs, nErr, err := s.genItems(ctx, roundKey(t, "queries"), KindQuery, r.keys, func(ctx context.Context, sel []int) ([][]string, []error) {
		return s.genQueries(ctx, t, r.gPrev, r.keys, sel)
	}, rd)
	if err != nil {
		return err
	}
	r.qs = qs
	rd.Counts.Queries, rd.Counts.QueryErrors = len(qs), nErr

	for _, k := range r.keys {
		if _, ok := qs[k]; ok {
			r.qkeys = append(r.qkeys, k)
		}
	}
	cands, nErr, err := s.genItems(ctx, roundKey(t, "candidates"), KindCandidates, r.qkeys, func(ctx context.Context, sel []int) ([][]string, []error) {
		q, d := make([]string, len(sel)), make([]string, len(sel))
		for j, i := range sel {
			q[j], d[j] = qs[r.qkeys[i]][0], s.chunkOf(t, r.qkeys[i]).Text
		}
		return generate.HypoDocs(ctx, r.gPrev, cfg.HypoTemplate, q, d, s.genOpt(t, cfg.L, cfg.MaxDocTokens))
	}, rd)
	if err != nil {
		return err
	}
	r.cands = cands
	rd.Counts.Candidates, rd.Counts.CandidateErrors = len(cands), nErr
	return nil
}

// selectRound selects d* per query with R_{t−1} (3., Eq. 4–5), writes the
// SFT files and fine-tunes the generator on them (4., Eq. 6) when it can be
// tuned; r.gNow is G_t.
func (s *state) selectRound(ctx context.Context, r *roundData) error {
	cfg, t, rd := s.cfg, r.t, r.result
	for _, k := range r.qkeys {
		if _, ok := r.cands[k]; ok {
			r.ckeys = append(r.ckeys, k)
		}
	}
	sels, err := s.selectAll(ctx, t, r.ckeys, r.qs, r.cands)
	if err != nil {
		return err
	}
	r.sels = sels
	rd.Counts.Selected = len(sels)
	r.pairs = make([]SFTPair, len(r.ckeys))
	for i, k := range r.ckeys {
		r.pairs[i] = SFTPair{Query: sels[k].Query, Output: sels[k].Cands[sels[k].Best]}
	}

	dir := s.roundDir(t)
	for _, f := range []struct {
		name string
		fill func(io.Writer) error
	}{
		{"sft_alpaca.jsonl", func(w io.Writer) error { return WriteSFTAlpaca(w, r.pairs) }},
		{"sft_messages.jsonl", func(w io.Writer) error { return WriteSFTMessages(w, r.pairs, cfg.HypoTemplate) }},
	} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.fill); err != nil {
			return err
		}
	}
	r.gNow = r.gPrev
	if s.tunable() && len(r.pairs) > 0 {
		if err := s.tuneGenerator(ctx, t, r.pairs); err != nil {
			return err
		}
		if r.gNow, err = s.generator(t); err != nil {
			return err
		}
		rd.GeneratorDir = filepath.Join(dir, "generator")
	}
	return nil
}

// tripletHypos sets the N hypothetical documents of every training triplet
// (5.): regenerated by the tuned G_t, or, when the generator is not tuned,
// the candidates in rank order (d* first).
func (s *state) tripletHypos(ctx context.Context, r *roundData) error {
	cfg, t, rd := s.cfg, r.t, r.result
	r.hypos = map[string][]string{}
	nh := max(cfg.N, 1)
	if s.tunable() && len(r.pairs) > 0 {
		hypos, nErr, err := s.genItems(ctx, roundKey(t, "triplets"), KindTriplet, r.ckeys, func(ctx context.Context, sel []int) ([][]string, []error) {
			q, d := make([]string, len(sel)), make([]string, len(sel))
			for j, i := range sel {
				q[j], d[j] = r.qs[r.ckeys[i]][0], s.chunkOf(t, r.ckeys[i]).Text
			}
			return generate.HypoDocs(ctx, r.gNow, cfg.HypoTemplate, q, d, s.genOpt(t+1000, nh, cfg.MaxDocTokens))
		}, rd)
		if err != nil {
			return err
		}
		r.hypos = hypos
		rd.Counts.TripletErrors = nErr
		return nil
	}
	for _, k := range r.ckeys {
		sl := r.sels[k]
		order := make([]int, len(sl.Ranks))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return sl.Ranks[order[a]] < sl.Ranks[order[b]] })
		for _, o := range order[:min(nh, len(order))] {
			r.hypos[k] = append(r.hypos[k], sl.Cands[o])
		}
	}
	return nil
}

// fusionStep chooses the hybrid's weights on the held-out pseudo-queries
// (8. in Run's list; stored, so a resumed round does not choose again) and
// writes them beside R_t.
func (s *state) fusionStep(ctx context.Context, r *roundData) error {
	t := r.t
	if len(r.held) == 0 {
		return nil
	}
	var ch FusionChoice
	found, err := s.run.GetItem(KindFusion, roundKey(t, "fusion"), &ch)
	if err != nil {
		return err
	}
	if !found {
		c, err := s.chooseFusion(ctx, t, r.held, r.qs)
		if err != nil {
			return err
		}
		if err := s.run.PutItem(KindFusion, roundKey(t, "fusion"), c); err != nil {
			return err
		}
		ch = *c
	}
	if err := fusion.WriteWeights(s.retrieverDir(t), fusion.Weights{Dense: ch.DenseWeight, BM25: ch.BM25Weight,
		ChosenBy: fmt.Sprintf("selflearn round %d: best nDCG@10 of the hybrid on %d held-out pseudo-queries", t, ch.HeldOut)}); err != nil {
		return err
	}
	r.result.Fusion = &ch
	s.fusion[t] = &ch
	return nil
}
