package serve

import (
	"context"
	"fmt"
	"math"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/retrieval"
)

// probeQuestion and probePassage are the tiny inputs each part runs once
// at start-up.
const (
	probeQuestion = "What causes gout?"
	probePassage  = "Gout is caused by uric acid crystals in the joints."
)

// probe runs every loaded part once, as its routes would, so that a part
// that loads but cannot answer (a dense index the encoder cannot search, a
// filter or reranker whose tokenizer and weights disagree, a generator that
// cannot decode) stops the start naming the part rather than answering
// every request 500 behind a /healthz "ok". It returns the parts checked,
// in the order /healthz lists them. A remote LLM (openai:) is not probed:
// it may start after this server.
func (c *Components) probe(ctx context.Context) ([]string, error) {
	p := c.Pipeline
	var checked []string
	fail := func(part string, err error) ([]string, error) {
		return nil, fmt.Errorf("pipeline %s: part %q fails its start-up check: %w", p.Dir, part, err)
	}
	for _, co := range p.Corpora {
		if _, err := co.BM25.Search(probeQuestion, 1); err != nil {
			return fail("corpora/"+co.Name+"/"+pipeline.BM25Dir, err)
		}
	}
	checked = append(checked, "bm25")
	if c.Encoder != nil {
		vecs, err := c.Encoder.EncodeQueries([]string{probeQuestion})
		if err == nil && (len(vecs) != 1 || len(vecs[0]) != c.Encoder.Dim()) {
			err = fmt.Errorf("encoded 1 query to %d vectors of %d values, want 1 of %d", len(vecs), len(firstRow(vecs)), c.Encoder.Dim())
		}
		if err == nil {
			err = finite(vecs[0])
		}
		if err != nil {
			return fail(pipeline.RetrieverDir, err)
		}
		for _, co := range p.Corpora {
			if co.Dense == nil {
				continue
			}
			if _, err := co.Dense.Search(vecs[0], 1); err != nil {
				return fail("corpora/"+co.Name+"/"+pipeline.DenseDir, err)
			}
		}
		checked = append(checked, "retriever")
	}
	if c.Filter != nil {
		scores, err := c.Filter.Predict(ctx, probeQuestion, []string{probePassage})
		if err == nil && (len(scores) != 1 || !(scores[0] >= 0 && scores[0] <= 1)) {
			err = fmt.Errorf("scored 1 snippet as %v, want one probability", scores)
		}
		if err != nil {
			return fail(pipeline.FilterDir, err)
		}
		checked = append(checked, "filter")
	}
	if c.Reranker != nil {
		hits := []retrieval.Hit{{ID: "probe"}}
		if _, err := c.Reranker.Rerank(probeQuestion, hits, func(string) (string, bool) { return probePassage, true }); err != nil {
			return fail(pipeline.RerankerDir, err)
		}
		checked = append(checked, "reranker")
	}
	if c.Local != nil {
		ids, err := c.Local.UserIDs(probeQuestion)
		if err == nil {
			_, err = c.Local.GenerateIDs(ctx, ids, lm.GenOptions{MaxTokens: 1, Logprobs: -1})
		}
		if err != nil {
			return fail(pipeline.GeneratorDir, err)
		}
		checked = append(checked, "generator")
	}
	return checked, nil
}

func firstRow(v [][]float32) []float32 {
	if len(v) == 0 {
		return nil
	}
	return v[0]
}

// finite refuses a NaN or infinite value (a query embedding that would
// score every chunk NaN).
func finite(v []float32) error {
	for j, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("query embedding value %d is %v", j, x)
		}
	}
	return nil
}
