package selflearn

import (
	"context"
	"fmt"

	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/retrieval/hyde"
	"github.com/ragforge/ragforge/retrieval/search"
)

type variantSpec struct {
	name string
	kind search.Mode
	gen  int
	ret  int
}

func (s *state) evaluate(ctx context.Context, t int) error {
	if t == 0 {
		s.rep.Rounds = append(s.rep.Rounds, Round{Round: 0, RetrieverDir: s.cfg.RetrieverDir})
	}
	rd := &s.rep.Rounds[len(s.rep.Rounds)-1]
	if len(s.queries) == 0 {
		return nil
	}
	var specs []variantSpec
	if t == 0 {
		specs = []variantSpec{{VariantBM25, search.BM25, 0, 0}, {VariantHybrid, search.Hybrid, 0, 0},
			{VariantDense, search.Dense, 0, 0}, {VariantHyDE, search.HyDE, 0, 0}}
	} else {
		g := s.genTag(t)
		specs = []variantSpec{{VariantHybrid, search.Hybrid, 0, t}, {VariantDense, search.Dense, 0, t},
			{VariantSLHyDE, search.HyDE, g, t}, {VariantNoGenTuning, search.HyDE, 0, t}, {VariantNoRetTuning, search.HyDE, g, 0}}
	}
	stage := roundKey(t, "eval")
	for i, sp := range specs {
		s.report(stage, i, len(specs))
		var m map[string]float64
		key := roundKey(t, sp.name)
		found, err := s.run.GetItem(KindEval, key, &m)
		if err != nil {
			return err
		}
		if !found {
			runRes, err := s.retrieve(ctx, sp, rd)
			if err != nil {
				return fmt.Errorf("selflearn: evaluate round %d %s: %w", t, sp.name, err)
			}
			rep, err := eval.Evaluate(runRes, s.qrels, s.cfg.EvalKs)
			if err != nil {
				return fmt.Errorf("selflearn: evaluate round %d %s: %w", t, sp.name, err)
			}
			m = map[string]float64{}
			logged := map[string]float64{}
			for _, name := range ReportMetrics {
				m[name] = rep.Mean[name]
				logged[sp.name+"/"+name] = rep.Mean[name]
			}
			if err := s.run.LogMetrics(logged, t); err != nil {
				return err
			}
			if err := s.run.PutItem(KindEval, key, m); err != nil {
				return err
			}
		}
		rd.Variants = append(rd.Variants, Variant{Name: sp.name, Metrics: m})
	}
	s.report(stage, len(specs), len(specs))
	return nil
}

// retrieve runs the evaluation queries through the shared retrieval
// pipeline for one variant: BM25 over the corpus, or R_<ret>'s Flat index
// (dense; hybrid with the round's chosen weights, else the AP paper's
// 0.3 / 0.7, each side's top EvalDepth; HyDE with G_<gen>'s documents).
func (s *state) retrieve(ctx context.Context, sp variantSpec, rd *Round) (eval.Run, error) {
	k := s.cfg.EvalDepth
	p := &search.Pipeline{Config: search.Config{Mode: sp.kind,
		DenseWeight: fusion.DenseWeight, BM25Weight: fusion.BM25Weight, HyDE: s.hydeConfig()}}
	if ch := s.fusion[sp.ret]; ch != nil {
		p.DenseWeight, p.BM25Weight = ch.DenseWeight, ch.BM25Weight
	}
	if sp.kind.Lexical() {
		bm, err := s.bm25()
		if err != nil {
			return nil, err
		}
		p.BM25 = bm
	}
	if sp.kind.Dense() {
		ix, enc, err := s.index(sp.ret)
		if err != nil {
			return nil, err
		}
		p.Encoder, p.Index = enc, ix
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	qs := make([]search.Query, len(s.queries))
	for i, q := range s.queries {
		qs[i] = search.Query{Text: q.Text}
	}
	if sp.kind == search.HyDE {
		hypos, err := s.evalHypos(ctx, sp.gen, rd)
		if err != nil {
			return nil, err
		}
		for i, q := range s.queries {
			qs[i].Hypos = hypos[q.ID]
		}
	}
	// Query vectors are computed once per retriever (plain queries) or per
	// (generator, retriever) (HyDE), for all queries in one encoder call,
	// and shared by the variants that use them.
	key := fmt.Sprintf("r%d", sp.ret)
	if sp.kind == search.HyDE {
		key = fmt.Sprintf("g%d/r%d", sp.gen, sp.ret)
	}
	vecs, ok := s.qvecs[key]
	if !ok && sp.kind.Dense() {
		var err error
		if vecs, err = p.Encode(qs); err != nil {
			return nil, fmt.Errorf("encode %d queries (%s): %w", len(qs), key, err)
		}
		s.qvecs[key] = vecs
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hits, err := p.SearchVectors(qs, vecs, k)
	if err != nil {
		return nil, fmt.Errorf("search %d queries (%s): %w", len(qs), key, err)
	}
	out := eval.Run{}
	for i, q := range s.queries {
		out[q.ID] = hits[i]
	}
	return out, nil
}

// hydeConfig is the query fusion of mining and evaluation: Eq. 10
// (hyde.ModeFusion), normalised, the first max(N, 1) hypothetical documents
// of each query; none = the plain query.
func (s *state) hydeConfig() hyde.Config {
	return hyde.Config{Mode: hyde.ModeFusion, N: max(s.cfg.N, 1), Normalize: !s.cfg.Unnormalized}
}

// bm25 returns the in-memory BM25 index of the corpus (cfg.BM25, else the
// default parameters), built on first use and closed by Run.
func (s *state) bm25() (*bm25.Index, error) {
	if s.bm == nil {
		cfg := s.cfg.BM25
		if cfg.IsZero() {
			cfg = bm25.DefaultConfig()
		}
		ix, err := bm25.NewMemory(s.corpus, cfg)
		if err != nil {
			return nil, err
		}
		s.bm = ix
	}
	return s.bm, nil
}
