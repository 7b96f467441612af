package learn

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// eStep returns the expected count of every piece over words (each weighted
// by its count), the objective −Σ count·log Z / Σ count, and the number of
// Viterbi tokens (sentencepiece Trainer::RunEStep).
func (m *latticeModel) eStep(words []count) ([]float64, float64, int64) {
	expected := make([]float64, len(m.pieces))
	var all float64
	for _, w := range words {
		all += float64(w.n)
	}
	var obj float64
	var ntok int64
	var buf []node
	for _, w := range words {
		var z float64
		z, buf = m.marginal(w.s, float64(w.n), expected, buf)
		var ids []int
		ids, _, buf = m.viterbi(w.s, -1, buf)
		ntok += int64(len(ids))
		obj -= z / all
	}
	return expected, obj, ntok
}

// expectedFreqThreshold: pieces expected fewer times are dropped by the M step.
const expectedFreqThreshold = 0.5

// mStep keeps the pieces expected at least 0.5 times and scores them
// ψ(expected) − ψ(Σ expected) (sentencepiece Trainer::RunMStep).
func mStep(pieces []scored, expected []float64) []scored {
	var out []scored
	var sum float64
	for i, p := range pieces {
		if expected[i] < expectedFreqThreshold {
			continue
		}
		out = append(out, scored{p.piece, expected[i]})
		sum += expected[i]
	}
	logSum := digamma(sum)
	for i := range out {
		out[i].score = digamma(out[i].score) - logSum
	}
	return out
}

// digamma is ψ(x), computed as sentencepiece does: the recurrence
// ψ(x) = ψ(x+1) − 1/x up to x ≥ 7, then the asymptotic series at x − 1/2.
func digamma(x float64) float64 {
	var r float64
	for ; x < 7; x++ {
		r -= 1 / x
	}
	x -= 0.5
	xx := 1 / x
	xx2 := xx * xx
	xx4 := xx2 * xx2
	return r + math.Log(x) + xx2/24 - 7.0/960*xx4 + 31.0/8064*xx4*xx2 - 127.0/30720*xx4*xx4
}

// prune is sentencepiece Trainer::PruneSentencePieces (see TrainUnigram,
// step 2).
func (m *latticeModel) prune(words []count, desired int, shrink float64, legacySum bool) []scored {
	n := len(m.pieces)
	keep := make([]bool, n)
	alts := make([][]int, n)
	var buf []node
	for i, p := range m.pieces {
		keep[i] = true
		if utf8.RuneCountInString(p.piece) == 1 {
			continue // a single character has no second-best segmentation
		}
		var alt []int
		var altScore float64
		alt, altScore, buf = m.viterbi(p.piece, i, buf)
		if altScore > p.score {
			keep[i] = false // its own Viterbi path is split: safe to remove
			continue
		}
		alts[i] = alt
	}
	freq := make([]float64, n)
	var vsum float64
	for _, w := range words {
		var ids []int
		ids, _, buf = m.viterbi(w.s, -1, buf)
		vsum += float64(w.n)
		for _, id := range ids {
			freq[id] += float64(w.n)
		}
	}
	var sum float64
	for _, f := range freq {
		sum += f
	}
	logSum := math.Log(sum)
	type cand struct {
		i    int
		loss float64
	}
	var cands []cand
	var out []scored
	for i := range m.pieces {
		switch {
		case freq[i] == 0 || !keep[i]:
		case len(alts[i]) == 0:
			out = append(out, m.pieces[i])
		default:
			// The piece's Viterbi count freq[i] moves to each piece of its
			// alternative; F is the share of words that lose it (spm counts
			// one per occurrence, which equals freq[i]).
			f := freq[i] / vsum
			logProbSp := math.Log(freq[i]) - logSum
			nAlt := len(alts[i])
			if legacySum {
				nAlt = n
			}
			logSumAlt := math.Log(sum + freq[i]*float64(nAlt-1))
			var logProbAlt float64
			for _, a := range alts[i] {
				logProbAlt += math.Log(freq[a]+freq[i]) - logSumAlt
			}
			cands = append(cands, cand{i, f * (logProbSp - logProbAlt)})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if a.loss != b.loss {
			return cmp.Compare(b.loss, a.loss)
		}
		return cmp.Compare(a.i, b.i)
	})
	size := max(desired, int(shrink*float64(n)))
	for _, c := range cands {
		if len(out) >= size {
			break
		}
		out = append(out, m.pieces[c.i])
	}
	return out
}

// minScorePenaltyDelta spaces the scores of characters re-added at the end.
const minScorePenaltyDelta = 0.0001

// finalize is sentencepiece Trainer::FinalizeSentencePieces: every character,
// then the best pieces up to size, sorted by score descending then text.
func finalize(m *latticeModel, chars []count, size int) []scored {
	final := map[string]float64{}
	penalty := 0.0
	for _, c := range chars {
		if id, ok := m.index[c.s]; ok {
			final[c.s] = m.pieces[id].score
		} else {
			final[c.s] = m.minScore + penalty
			penalty += minScorePenaltyDelta
		}
	}
	sorted := slices.Clone(m.pieces)
	sortScored(sorted)
	for _, p := range sorted {
		if _, ok := final[p.piece]; ok {
			continue
		}
		if len(final) >= size {
			break
		}
		final[p.piece] = p.score
	}
	out := make([]scored, 0, len(final))
	for p, s := range final {
		out = append(out, scored{p, s})
	}
	sortScored(out)
	return out
}

// sortScored orders pieces by score descending, then by text. Scores are
// compared as the float32 the model stores, so pieces whose scores differ
// only by float64 rounding noise (equal expected counts) tie and are
// ordered by text.
func sortScored(s []scored) {
	slices.SortFunc(s, func(a, b scored) int {
		if sa, sb := float32(a.score), float32(b.score); sa != sb {
			return cmp.Compare(sb, sa)
		}
		return strings.Compare(a.piece, b.piece)
	})
}
