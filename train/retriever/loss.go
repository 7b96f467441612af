// Package retriever fine-tunes a BERT bi-encoder for SL-HyDE (Li et al.,
// "AutoMIR: Effective Zero-Shot Medical Information Retrieval without
// Relevance Labels"; equation numbers are the paper's): hard negatives mined
// from the ranks [10, 100) of the fused-query search (Eq. 7), FlagEmbedding
// JSONL triplets, and contrastive training with the InfoNCE loss (Eq. 8)
// over the positive, the hard negatives and in-batch negatives, where the
// query side is the fused representation of Eq. 10 (query and hypothetical
// documents encoded by the trainable encoder and averaged inside the graph).
//
// The optimiser, schedule, accumulation and checkpoint layout are those of
// train/trainer (AdamW, linear decay with warmup, HF checkpoint-<step>
// directories); the model is written with bert.Model.Save (HF layout).
package retriever

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// DefaultTemperature is τ of Eq. 8 (SL-HyDE, as BGE fine-tuning uses).
const DefaultTemperature = 0.02

// maskBias is added to the logits (already divided by τ) of masked
// candidates: exp(-1e9) is 0 in float32, and the value stays finite so no
// NaN enters the gradient.
const maskBias = -1e9

// CandidateMask returns valid[i][c] for the InfoNCE candidates of query i,
// laid out as in InfoNCEGraph: columns 0..B-1 are the positives of the batch
// (query j's positive at column j), then the hard negatives, negIDs[j][k] at
// column B + j·n + k where n = max_j len(negIDs[j]).
//
// A candidate is masked (false) for query i when it is not query i's own
// positive column but carries query i's positive id (posIDs[i]): two
// queries sharing a positive, or a hard negative equal to the positive, must
// not push the query away from its own positive. An empty id ("") marks a
// padding slot, masked for every query. negIDs may be nil (no hard
// negatives).
func CandidateMask(posIDs []string, negIDs [][]string) [][]bool {
	b := len(posIDs)
	n := 0
	for _, row := range negIDs {
		n = max(n, len(row))
	}
	cols := make([]string, b+b*n)
	copy(cols, posIDs)
	for j, row := range negIDs {
		copy(cols[b+j*n:], row)
	}
	valid := make([][]bool, b)
	for i := range valid {
		valid[i] = make([]bool, len(cols))
		for c, id := range cols {
			valid[i][c] = c == i || (id != "" && id != posIDs[i])
		}
	}
	return valid
}

// InfoNCE is the pure-Go reference of Eq. 8, in float64:
//
//	L = −1/B Σ_i log( exp(s(q_i, p_i)/τ) / Σ_{c valid for i} exp(s(q_i, c)/τ) )
//
// with s the inner product (cosine for unit vectors), q [B][d] the query
// vectors, p [B][d] their positives, negs[i] [n_i][d] the hard negatives of
// query i (may be ragged or nil), candidates and masking as CandidateMask
// with posIDs [B] (negatives carry no id, so only duplicate positives are
// masked). It panics on inconsistent dimensions (test helper semantics).
func InfoNCE(q, p [][]float32, negs [][][]float32, temp float64, posIDs []string) float64 {
	b := len(q)
	if len(p) != b || len(posIDs) != b {
		panic(fmt.Sprintf("InfoNCE: %d queries, %d positives, %d ids", b, len(p), len(posIDs)))
	}
	var negIDs [][]string
	cands := append([][]float32(nil), p...)
	n := 0
	for _, row := range negs {
		n = max(n, len(row))
	}
	if n > 0 {
		negIDs = make([][]string, b)
		for j := 0; j < b; j++ {
			negIDs[j] = make([]string, n)
			for k := 0; k < n; k++ {
				if j < len(negs) && k < len(negs[j]) {
					negIDs[j][k] = fmt.Sprintf("\x00neg %d %d", j, k) // unique, never a positive id
					cands = append(cands, negs[j][k])
				} else {
					cands = append(cands, nil)
				}
			}
		}
	}
	valid := CandidateMask(posIDs, negIDs)
	dot := func(a, c []float32) float64 {
		if len(a) != len(c) {
			panic(fmt.Sprintf("InfoNCE: vector lengths %d and %d", len(a), len(c)))
		}
		var s float64
		for i := range a {
			s += float64(a[i]) * float64(c[i])
		}
		return s
	}
	var loss float64
	for i := 0; i < b; i++ {
		logits := make([]float64, 0, len(cands))
		for c, v := range cands {
			if valid[i][c] {
				logits = append(logits, dot(q[i], v)/temp)
			}
		}
		m := math.Inf(-1)
		for _, l := range logits {
			m = math.Max(m, l)
		}
		var z float64
		for _, l := range logits {
			z += math.Exp(l - m)
		}
		loss -= dot(q[i], p[i])/temp - m - math.Log(z)
	}
	return loss / float64(b)
}

// InfoNCEGraph is Eq. 8 as a GoMLX graph:
//
//	q     [B, d]  query vectors (fused, Eq. 10);
//	cands [C, d]  candidate vectors, C = B + B·n: the B positives (query i's
//	              at row i) then the hard negatives (see CandidateMask);
//	valid [B, C]  float32, 1 = candidate counts for query i, 0 = masked;
//
// returns the scalar mean over queries of −log softmax_c(⟨q_i, c⟩/τ)[i]
// (masked logits get −1e9, so they contribute exp(·) = 0). The positive's
// logit is read with a diagonal mask and a sum rather than a Gather/Slice so
// that the gradient needs no Pad (absent from the simplego backend).
func InfoNCEGraph(q, cands, valid *graph.Node, temp float64) *graph.Node {
	b := q.Shape().Dimensions[0]
	logits := graph.MulScalar(graph.DotGeneral(q, []int{1}, nil, cands, []int{1}, nil), 1/temp) // [B, C]
	logits = graph.Add(logits, graph.MulScalar(graph.OneMinus(valid), maskBias))
	logp := graph.LogSoftmax(logits, -1)
	c := cands.Shape().Dimensions[0]
	// diag[i, c] = 1 iff c == i.
	rowIdx := graph.Iota(q.Graph(), logits.Shape(), 0)
	colIdx := graph.Iota(q.Graph(), logits.Shape(), 1)
	diag := graph.ConvertDType(graph.Equal(rowIdx, colIdx), logits.DType())
	if c < b {
		panic(fmt.Errorf("InfoNCEGraph: %d candidates for %d queries (want C ≥ B)", c, b))
	}
	pos := graph.ReduceSum(graph.Mul(logp, diag), 1) // [B]
	return graph.Neg(graph.ReduceAllMean(pos))
}
