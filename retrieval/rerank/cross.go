package rerank

import (
	"fmt"
	"sort"

	"github.com/ragforge/ragforge/retrieval"
)

// PairScorer scores token-id rows with a cross-encoder head: ids, mask,
// typeIDs [B][L_b] → one logit per row [B]. *bert.Model implements it
// (Model.Score: logits[:, 0] of the sequence-classification head).
type PairScorer interface {
	Score(ids, mask, typeIDs [][]int) ([]float32, error)
}

// PairTokenizer is the part of a BERT tokenizer the cross-encoder needs;
// *wordpiece.Tokenizer (and tokenizer.Tokenizer) implement it. Encode with
// addSpecial wraps a text as [CLS] text [SEP].
type PairTokenizer interface {
	Encode(text string, addSpecial bool) []int
}

// Defaults of CrossEncoder (breast-lesion study: rerank the top 20 fused
// candidates, keep 3; BERT's 512-token limit).
const (
	DefaultTopN      = 20
	DefaultK         = 3
	DefaultBatchSize = 16
	DefaultMaxLength = 512
)

// CrossEncoder reranks candidates with a cross-encoder: each (query,
// candidate text) pair is fed as "[CLS] query [SEP] text [SEP]" with token
// types 0 / 1 (HF tokenizer(query, text), as MedCPT-Cross-Encoder and
// bge-reranker), truncated to MaxLength tokens with HF's "longest_first"
// strategy (remove one token at a time from the end of the longer of the two
// texts, the second on ties), and scored by Model. Zero fields take the
// Default* values.
type CrossEncoder struct {
	Model     PairScorer
	Tokenizer PairTokenizer
	TopN      int // candidates rescored: the first TopN hits (default 20)
	K         int // hits kept (default 3)
	BatchSize int // pairs per Model.Score call (default 16)
	MaxLength int // tokens per pair, specials included (default 512)
}

func (c *CrossEncoder) params() (topN, k, batch, maxLen int) {
	topN, k, batch, maxLen = c.TopN, c.K, c.BatchSize, c.MaxLength
	if topN <= 0 {
		topN = DefaultTopN
	}
	if k <= 0 {
		k = DefaultK
	}
	if batch <= 0 {
		batch = DefaultBatchSize
	}
	if maxLen <= 0 {
		maxLen = DefaultMaxLength
	}
	return
}

// Pair returns the ids and token types of "[CLS] a [SEP] b [SEP]" truncated
// longest-first to maxLen tokens (maxLen < 3 keeps only the specials).
func Pair(tok PairTokenizer, a, b string, maxLen int) (ids, types []int) {
	wa, wb := tok.Encode(a, true), tok.Encode(b, true) // [CLS] a [SEP], [CLS] b [SEP]
	cls, sep := wa[0], wa[len(wa)-1]
	ta, tb := wa[1:len(wa)-1], wb[1:len(wb)-1]
	for budget := maxLen - 3; len(ta)+len(tb) > max(budget, 0); {
		if len(ta) >= len(tb) {
			ta = ta[:len(ta)-1]
		} else {
			tb = tb[:len(tb)-1]
		}
	}
	ids = make([]int, 0, len(ta)+len(tb)+3)
	ids = append(append(append(append(append(ids, cls), ta...), sep), tb...), sep)
	types = make([]int, len(ids))
	for i := len(ta) + 2; i < len(ids); i++ {
		types[i] = 1
	}
	return ids, types
}

// Rerank scores the first TopN hits against query and returns the K best,
// highest cross-encoder logit first (ties keep the input order), with Score
// set to the logit. Fewer hits than K return them all, reranked. textOf
// gives a hit's text. Errors: a hit without text (naming it), the model's
// error (naming the batch), a wrong number of scores.
func (c *CrossEncoder) Rerank(query string, hits []retrieval.Hit, textOf func(id string) (string, bool)) ([]retrieval.Hit, error) {
	topN, k, batch, maxLen := c.params()
	cand := hits[:min(topN, len(hits))]
	ids := make([][]int, len(cand))
	types := make([][]int, len(cand))
	for i, h := range cand {
		text, ok := textOf(h.ID)
		if !ok {
			return nil, fmt.Errorf("cross-encoder rerank: hit %d %q: no text", i, h.ID)
		}
		ids[i], types[i] = Pair(c.Tokenizer, query, text, maxLen)
	}
	out := make([]retrieval.Hit, len(cand))
	for lo := 0; lo < len(cand); lo += batch {
		hi := min(lo+batch, len(cand))
		mask := make([][]int, hi-lo)
		for i := range mask {
			mask[i] = make([]int, len(ids[lo+i]))
			for j := range mask[i] {
				mask[i][j] = 1
			}
		}
		s, err := c.Model.Score(ids[lo:hi], mask, types[lo:hi])
		if err != nil {
			return nil, fmt.Errorf("cross-encoder rerank: batch [%d,%d): %w", lo, hi, err)
		}
		if len(s) != hi-lo {
			return nil, fmt.Errorf("cross-encoder rerank: batch [%d,%d): model returned %d scores", lo, hi, len(s))
		}
		for i, v := range s {
			out[lo+i] = retrieval.Hit{ID: cand[lo+i].ID, Score: float64(v)}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out[:min(k, len(out))], nil
}
