package selflearn

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/retrieval/fusion"
)

func (s *state) round(ctx context.Context, t int) error {
	cfg := s.cfg
	rd := Round{Round: t, RetrieverDir: s.retrieverDir(t)}
	defer func() { s.rep.Rounds = append(s.rep.Rounds, rd) }()
	gPrev, err := s.generator(s.genTag(t - 1))
	if err != nil {
		return err
	}
	idx := s.sample(t)
	rd.Counts.Sampled = len(idx)
	keys := make([]string, len(idx))
	for i, ci := range idx {
		keys[i] = roundKey(t, s.corpus[ci].ID)
	}
	chunkOf := func(key string) data.Chunk { return s.corpus[s.byID[key[len(roundKey(t, "")):]]] }

	// 1. Queries (Eq. 2).
	qs, nErr, err := s.genItems(ctx, roundKey(t, "queries"), KindQuery, keys, func(ctx context.Context, sel []int) ([][]string, []error) {
		docs := make([]string, len(sel))
		for j, i := range sel {
			docs[j] = s.corpus[idx[i]].Text
		}
		return generate.Queries(ctx, gPrev, cfg.QueryTemplate, docs, s.genOpt(t, 1, cfg.MaxQueryTokens))
	}, &rd)
	if err != nil {
		return err
	}
	rd.Counts.Queries, rd.Counts.QueryErrors = len(qs), nErr

	// 2. Candidates (Eq. 3).
	var qkeys []string
	for _, k := range keys {
		if _, ok := qs[k]; ok {
			qkeys = append(qkeys, k)
		}
	}
	cands, nErr, err := s.genItems(ctx, roundKey(t, "candidates"), KindCandidates, qkeys, func(ctx context.Context, sel []int) ([][]string, []error) {
		q, d := make([]string, len(sel)), make([]string, len(sel))
		for j, i := range sel {
			q[j], d[j] = qs[qkeys[i]][0], chunkOf(qkeys[i]).Text
		}
		return generate.HypoDocs(ctx, gPrev, cfg.HypoTemplate, q, d, s.genOpt(t, cfg.L, cfg.MaxDocTokens))
	}, &rd)
	if err != nil {
		return err
	}
	rd.Counts.Candidates, rd.Counts.CandidateErrors = len(cands), nErr

	// 3. Selection (Eq. 4–5) with R_{t-1}.
	var ckeys []string
	for _, k := range qkeys {
		if _, ok := cands[k]; ok {
			ckeys = append(ckeys, k)
		}
	}
	sels, err := s.selectAll(ctx, t, ckeys, qs, cands)
	if err != nil {
		return err
	}
	rd.Counts.Selected = len(sels)
	pairs := make([]SFTPair, len(ckeys))
	for i, k := range ckeys {
		pairs[i] = SFTPair{Query: sels[k].Query, Output: sels[k].Cands[sels[k].Best]}
	}

	// 4. SFT export and generator fine-tuning (Eq. 6).
	dir := s.roundDir(t)
	for _, f := range []struct {
		name string
		fill func(io.Writer) error
	}{
		{"sft_alpaca.jsonl", func(w io.Writer) error { return WriteSFTAlpaca(w, pairs) }},
		{"sft_messages.jsonl", func(w io.Writer) error { return WriteSFTMessages(w, pairs, cfg.HypoTemplate) }},
	} {
		if err := writeFileAtomic(filepath.Join(dir, f.name), f.fill); err != nil {
			return err
		}
	}
	gNow := gPrev
	if s.tunable() && len(pairs) > 0 {
		if err := s.tuneGenerator(ctx, t, pairs); err != nil {
			return err
		}
		if gNow, err = s.generator(t); err != nil {
			return err
		}
		rd.GeneratorDir = filepath.Join(dir, "generator")
	}

	// 5. Triplet hypothetical documents.
	hypos := map[string][]string{}
	nh := max(cfg.N, 1)
	if s.tunable() && len(pairs) > 0 {
		hypos, nErr, err = s.genItems(ctx, roundKey(t, "triplets"), KindTriplet, ckeys, func(ctx context.Context, sel []int) ([][]string, []error) {
			q, d := make([]string, len(sel)), make([]string, len(sel))
			for j, i := range sel {
				q[j], d[j] = qs[ckeys[i]][0], chunkOf(ckeys[i]).Text
			}
			return generate.HypoDocs(ctx, gNow, cfg.HypoTemplate, q, d, s.genOpt(t+1000, nh, cfg.MaxDocTokens))
		}, &rd)
		if err != nil {
			return err
		}
		rd.Counts.TripletErrors = nErr
	} else {
		for _, k := range ckeys {
			sl := sels[k]
			order := make([]int, len(sl.Ranks))
			for i := range order {
				order[i] = i
			}
			sort.SliceStable(order, func(a, b int) bool { return sl.Ranks[order[a]] < sl.Ranks[order[b]] })
			for _, o := range order[:min(nh, len(order))] {
				hypos[k] = append(hypos[k], sl.Cands[o])
			}
		}
	}
	var tkeys []string
	for _, k := range ckeys {
		if _, ok := hypos[k]; ok {
			tkeys = append(tkeys, k)
		}
	}
	// Pseudo-queries held out of training choose the hybrid's weights (9.).
	tkeys, held := s.splitHoldout(t, tkeys)
	rd.Counts.Triplets, rd.Counts.HeldOut = len(tkeys), len(held)
	if len(tkeys) == 0 {
		rd.Errors = append(rd.Errors, "no training triplets: retriever not trained this round")
		return s.copyRetriever(t)
	}

	// 6. Hard negatives (Eq. 7) and FlagEmbedding JSONL.
	triplets, short, err := s.mine(ctx, t, tkeys, qs, hypos)
	if err != nil {
		return err
	}
	rd.Counts.NegShortfall = short

	// 7. Retriever training (Eq. 8).
	if err := s.trainRetriever(ctx, t, triplets); err != nil {
		return err
	}

	// 9. Hybrid weights on the held-out pseudo-queries (no relevance labels).
	if len(held) == 0 {
		return nil
	}
	var ch FusionChoice
	found, err := s.run.GetItem(KindFusion, roundKey(t, "fusion"), &ch)
	if err != nil {
		return err
	}
	if !found {
		c, err := s.chooseFusion(ctx, t, held, qs)
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
	rd.Fusion = &ch
	s.fusion[t] = &ch
	return nil
}
