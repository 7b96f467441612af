package selflearn

import (
	"context"
	"fmt"

	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/retrieval/hyde"
)

type variantSpec struct {
	name string
	kind string // "bm25", "hybrid", "dense", "hyde"
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
		specs = []variantSpec{{VariantBM25, "bm25", 0, 0}, {VariantHybrid, "hybrid", 0, 0},
			{VariantDense, "dense", 0, 0}, {VariantHyDE, "hyde", 0, 0}}
	} else {
		g := s.genTag(t)
		specs = []variantSpec{{VariantHybrid, "hybrid", 0, t}, {VariantDense, "dense", 0, t},
			{VariantSLHyDE, "hyde", g, t}, {VariantNoGenTuning, "hyde", 0, t}, {VariantNoRetTuning, "hyde", g, 0}}
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

func (s *state) retrieve(ctx context.Context, sp variantSpec, rd *Round) (eval.Run, error) {
	k := s.cfg.EvalDepth
	if sp.kind == "bm25" || sp.kind == "hybrid" {
		if s.bmRun == nil {
			ix, err := bm25.NewMemory(s.corpus, bm25.DefaultConfig())
			if err != nil {
				return nil, err
			}
			bm := eval.Run{}
			for _, q := range s.queries {
				h, err := ix.Search(q.Text, k)
				if err != nil {
					return nil, fmt.Errorf("bm25: query %s: %w", q.ID, err)
				}
				bm[q.ID] = h
			}
			s.bmRun = bm
		}
		if sp.kind == "bm25" {
			return s.bmRun, nil
		}
	}
	ix, enc, err := s.index(sp.ret)
	if err != nil {
		return nil, err
	}
	// Query vectors are computed once per retriever (plain queries) or per
	// (generator, retriever) (HyDE), for all queries in one encoder call,
	// and shared by the variants that use them.
	key := fmt.Sprintf("r%d", sp.ret)
	if sp.kind == "hyde" {
		key = fmt.Sprintf("g%d/r%d", sp.gen, sp.ret)
	}
	vecs, ok := s.qvecs[key]
	if !ok {
		texts := make([]string, len(s.queries))
		for i, q := range s.queries {
			texts[i] = q.Text
		}
		if sp.kind == "hyde" {
			hypos, err := s.evalHypos(ctx, sp.gen, rd)
			if err != nil {
				return nil, err
			}
			hs := make([][]string, len(s.queries))
			for i, q := range s.queries {
				hs[i] = hypos[q.ID]
			}
			vecs, err = s.fuse(enc, texts, hs)
		} else {
			vecs, err = enc.EncodeQueries(texts)
		}
		if err != nil {
			return nil, fmt.Errorf("encode %d queries (%s): %w", len(texts), key, err)
		}
		s.qvecs[key] = vecs
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	flat := make([]float32, 0, len(vecs)*enc.Dim())
	for _, v := range vecs {
		flat = append(flat, v...)
	}
	hits, err := ix.Search(flat, k)
	if err != nil {
		return nil, fmt.Errorf("search %d queries (%s): %w", len(vecs), key, err)
	}
	out := eval.Run{}
	for i, q := range s.queries {
		out[q.ID] = hits[i]
		if sp.kind == "hybrid" {
			w := []float64{fusion.DenseWeight, fusion.BM25Weight}
			if ch := s.fusion[sp.ret]; ch != nil {
				w = []float64{ch.DenseWeight, ch.BM25Weight}
			}
			if out[q.ID], err = fusion.RRF([][]retrieval.Hit{hits[i], s.bmRun[q.ID]}, w, k, fusion.Options{}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// fuse returns the Eq. 10 query vectors (hyde.ModeFusion, normalised, the
// first max(N, 1) hypothetical documents of each query; none = the plain
// query), as hyde.Encode computes them one query at a time, with all
// queries in one EncodeQueries call and all documents in one EncodeDocs
// call.
func (s *state) fuse(enc encode.Encoder, queries []string, hypos [][]string) ([][]float32, error) {
	n := max(s.cfg.N, 1)
	qv, err := enc.EncodeQueries(queries)
	if err != nil {
		return nil, fmt.Errorf("hyde: encode queries: %w", err)
	}
	var docs []string
	for _, h := range hypos {
		docs = append(docs, h[:min(n, len(h))]...)
	}
	var dv [][]float32
	if len(docs) > 0 {
		if dv, err = enc.EncodeDocs(docs); err != nil {
			return nil, fmt.Errorf("hyde: encode %d hypothetical documents: %w", len(docs), err)
		}
	}
	out := make([][]float32, len(queries))
	at := 0
	for i, h := range hypos {
		m := min(n, len(h))
		if out[i], err = hyde.Fuse(qv[i], dv[at:at+m], hyde.ModeFusion, true); err != nil {
			return nil, err
		}
		at += m
	}
	return out, nil
}
