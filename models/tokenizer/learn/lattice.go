package learn

import (
	"math"
	"unicode/utf8"
)

// unkPenalty is subtracted from the lowest piece score to score a character no
// piece covers (sentencepiece kUnkPenalty).
const unkPenalty = 10.0

// scored is a candidate piece and its score (a log probability).
type scored struct {
	piece string
	score float64
}

// latticeModel is the trainer-side Unigram model (sentencepiece
// unigram::TrainerModel): the current pieces, indexed for lattice building.
type latticeModel struct {
	pieces   []scored
	index    map[string]int
	minScore float64
	maxRunes int
}

func newLatticeModel(pieces []scored) *latticeModel {
	m := &latticeModel{pieces: pieces, index: make(map[string]int, len(pieces)), minScore: math.Inf(1)}
	for i, p := range pieces {
		m.index[p.piece] = i
		m.minScore = min(m.minScore, p.score)
		m.maxRunes = max(m.maxRunes, utf8.RuneCountInString(p.piece))
	}
	return m
}

// trainerUnkID is the id an unknown-character node carries during training.
// sentencepiece's TrainerModel never sets ModelInterface::unk_id_, whose
// default is 0, so spm_train credits the expected and Viterbi counts of
// unknown characters (characters whose piece the M step dropped) to piece 0
// of the current trainer vocabulary; ragforge does the same, to train what
// spm_train trains.
const trainerUnkID = 0

// node is one lattice edge over runes [begin, end) of a word.
type node struct {
	begin, end int
	id         int
	score      float64
}

// nodes builds the lattice of w (sentencepiece Model::PopulateNodes): every
// piece that matches at each rune position, plus an unknown node scored
// minScore-unkPenalty where no single-character piece matches. Nodes are
// ordered by begin, then by length. It returns the nodes and the number of
// runes.
func (m *latticeModel) nodes(w string, buf []node) ([]node, int) {
	offs := make([]int, 0, len(w)+1)
	for i := range w {
		offs = append(offs, i)
	}
	offs = append(offs, len(w))
	n := len(offs) - 1
	out := buf[:0]
	for i := 0; i < n; i++ {
		single := false
		for l := 1; l <= m.maxRunes && i+l <= n; l++ {
			id, ok := m.index[w[offs[i]:offs[i+l]]]
			if !ok {
				continue
			}
			out = append(out, node{begin: i, end: i + l, id: id, score: m.pieces[id].score})
			if l == 1 {
				single = true
			}
		}
		if !single {
			// Keep the begin/length order: the unknown node is the shortest.
			out = append(out, node{})
			k := len(out) - 1
			for k > 0 && out[k-1].begin == i {
				out[k] = out[k-1]
				k--
			}
			out[k] = node{begin: i, end: i + 1, id: trainerUnkID, score: m.minScore - unkPenalty}
		}
	}
	return out, n
}

// logAddExp returns log(exp(a)+exp(b)).
func logAddExp(a, b float64) float64 {
	if math.IsInf(a, -1) {
		return b
	}
	if math.IsInf(b, -1) {
		return a
	}
	if a < b {
		a, b = b, a
	}
	return a + math.Log1p(math.Exp(b-a))
}

// marginal runs forward-backward over the lattice of w (sentencepiece
// Lattice::PopulateMarginal), adds freq·P(node on the path | w) to
// expected[node id] for every node, and returns freq·log Z(w).
func (m *latticeModel) marginal(w string, freq float64, expected []float64, buf []node) (float64, []node) {
	nodes, n := m.nodes(w, buf)
	fwd := make([]float64, n+1)
	bwd := make([]float64, n+1)
	for i := range fwd {
		fwd[i], bwd[i] = math.Inf(-1), math.Inf(-1)
	}
	fwd[0], bwd[n] = 0, 0
	for _, nd := range nodes {
		fwd[nd.end] = logAddExp(fwd[nd.end], fwd[nd.begin]+nd.score)
	}
	for k := len(nodes) - 1; k >= 0; k-- {
		nd := nodes[k]
		bwd[nd.begin] = logAddExp(bwd[nd.begin], nd.score+bwd[nd.end])
	}
	z := fwd[n]
	for _, nd := range nodes {
		expected[nd.id] += freq * math.Exp(fwd[nd.begin]+nd.score+bwd[nd.end]-z)
	}
	return freq * z, nodes
}

// viterbi returns the best segmentation of w as piece ids (trainerUnkID for
// an unknown character) and its score. A node spanning all of w with id skip is left
// out of the lattice (skip -1 leaves nothing out): this gives the second-best
// segmentation of a piece, its "alternative". On equal scores the path found
// first (shorter last piece) wins.
func (m *latticeModel) viterbi(w string, skip int, buf []node) ([]int, float64, []node) {
	nodes, n := m.nodes(w, buf)
	best := make([]float64, n+1)
	back := make([]int, n+1) // index into nodes of the best node ending here
	for i := range best {
		best[i], back[i] = math.Inf(-1), -1
	}
	best[0] = 0
	for k, nd := range nodes {
		if nd.id == skip && nd.begin == 0 && nd.end == n {
			continue
		}
		if s := best[nd.begin] + nd.score; s > best[nd.end] {
			best[nd.end], back[nd.end] = s, k
		}
	}
	var rev []int
	for pos := n; pos > 0; pos = nodes[back[pos]].begin {
		rev = append(rev, nodes[back[pos]].id)
	}
	ids := make([]int, len(rev))
	for i, id := range rev {
		ids[len(rev)-1-i] = id
	}
	return ids, best[n], nodes
}
