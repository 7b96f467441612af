package retriever

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"

	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// MineConfig sets hard-negative mining (Eq. 7). Ranks are 0-based positions
// in the search result, [RankFrom, RankTo): the defaults skip the top 10 and
// sample from the next 90, as SL-HyDE (and FlagEmbedding's
// hn_mine --range_for_sampling 10-100) do, 7 negatives per query
// (train_group_size 8).
type MineConfig struct {
	RankFrom, RankTo int
	N                int
	Seed             uint64
	// MaxScore, when > 0, is a ceiling relative to the positive's score: a
	// candidate scoring above MaxScore × s(q, positive) is dropped as a
	// likely false negative (e.g. 0.95; 0 = no ceiling). It needs
	// MineQueries.PosScores.
	MaxScore float64
}

// DefaultMineConfig is ranks [10, 100), 7 negatives, seed 42, no score
// ceiling.
func DefaultMineConfig() MineConfig { return MineConfig{RankFrom: 10, RankTo: 100, N: 7, Seed: 42} }

// Validate checks the ranks, N and MaxScore; errors name the field.
func (c MineConfig) Validate() error {
	switch {
	case c.RankFrom < 0 || c.RankTo <= c.RankFrom:
		return fmt.Errorf("mine config: fields %q/%q: [%d, %d), want 0 ≤ from < to", "RankFrom", "RankTo", c.RankFrom, c.RankTo)
	case c.N < 1:
		return fmt.Errorf("mine config: field %q: %d, want ≥ 1", "N", c.N)
	case c.MaxScore < 0 || c.MaxScore > 1 || math.IsNaN(c.MaxScore):
		return fmt.Errorf("mine config: field %q: %v, want 0 (off) or in (0, 1]", "MaxScore", c.MaxScore)
	}
	return nil
}

// MineQueries are the queries to mine negatives for, index-aligned.
type MineQueries struct {
	Vecs      [][]float32 // fused query vectors (Eq. 10), [dim] each
	Positives []string    // the positive chunk id of each query
	// Texts, when set, are the query texts: a candidate whose text equals
	// its query's (chunk.TextKey) is excluded.
	Texts []string
	// PosScores, needed with MineConfig.MaxScore, are s(q_i, positive_i),
	// on the index's scale (inner product).
	PosScores []float64
}

// MineCorpus describes the indexed chunks.
type MineCorpus struct {
	DocOf func(chunkID string) string // document of a chunk (required)
	// TextOf, when set, returns a chunk's text: a candidate whose text
	// equals the positive's (chunk.TextKey) is excluded.
	TextOf func(chunkID string) string
}

// MineStats counts what mining could not deliver and what it excluded.
type MineStats struct {
	Queries   int // queries mined
	Shortfall int // queries that got fewer than N negatives
	Missing   int // negatives missing in total (Σ over queries of N − got)
	// SameText counts candidates excluded because their text equals the
	// positive's or the query's; AboveMax those above the score ceiling.
	SameText, AboveMax int
}

// MineHardNegatives searches index with each query vector for the top
// RankTo chunks and samples cfg.N negatives uniformly without replacement
// from the ranks [RankFrom, RankTo), excluding the positive chunk, every
// chunk of the positive's document, repeated ids, chunks whose text equals
// the positive's or the query's after chunk.TextKey normalization (when
// corpus.TextOf / q.Texts are given), and, with cfg.MaxScore, chunks scoring
// above cfg.MaxScore × q.PosScores[i]. When fewer candidates remain, all of
// them are taken and the shortfall is counted. Query i's sample uses its own
// random stream (PCG seeded with cfg.Seed and i), so results do not depend
// on the other queries. Negatives are returned in rank order.
//
// Errors: a bad cfg, q.Positives (or a given q.Texts / q.PosScores) of
// another length than q.Vecs, MaxScore without PosScores, a nil DocOf, or an
// index failure (naming the queries).
func MineHardNegatives(index encode.VectorSearcher, q MineQueries, corpus MineCorpus, cfg MineConfig) ([][]string, MineStats, error) {
	var st MineStats
	n := len(q.Vecs)
	switch {
	case len(q.Positives) != n:
		return nil, st, fmt.Errorf("mine hard negatives: %d query vectors, %d positives", n, len(q.Positives))
	case q.Texts != nil && len(q.Texts) != n:
		return nil, st, fmt.Errorf("mine hard negatives: %d query vectors, %d query texts", n, len(q.Texts))
	case cfg.MaxScore > 0 && len(q.PosScores) != n:
		return nil, st, fmt.Errorf("mine hard negatives: a score ceiling needs the positive scores of all %d queries, got %d", n, len(q.PosScores))
	case corpus.DocOf == nil:
		return nil, st, errors.New("mine hard negatives: no DocOf")
	}
	if err := cfg.Validate(); err != nil {
		return nil, st, fmt.Errorf("mine hard negatives: %w", err)
	}
	docOf := corpus.DocOf
	out := make([][]string, n)
	var block [][]retrieval.Hit // hits of queries from..from+len(block)-1
	from := 0
	for i := range q.Vecs {
		if i >= from+len(block) {
			// One index call per block of queries (a faiss call has a fixed
			// cost: threads start and spin).
			from = i
			end := min(i+mineBlock, n)
			flat := make([]float32, 0, (end-i)*len(q.Vecs[i]))
			for _, qv := range q.Vecs[i:end] {
				flat = append(flat, qv...)
			}
			var err error
			if block, err = index.Search(flat, cfg.RankTo); err != nil {
				return nil, st, fmt.Errorf("mine hard negatives: queries %d..%d: %w", i, end-1, err)
			}
			if len(block) != end-i {
				return nil, st, fmt.Errorf("mine hard negatives: queries %d..%d: index returned %d rows", i, end-1, len(block))
			}
		}
		hits := block[i-from]
		pos := q.Positives[i]
		posDoc := docOf(pos)
		same := map[string]bool{} // text keys a negative must not have
		if corpus.TextOf != nil {
			same[chunk.TextKey(corpus.TextOf(pos))] = true
		}
		if q.Texts != nil {
			same[chunk.TextKey(q.Texts[i])] = true
		}
		ceiling := math.Inf(1)
		if cfg.MaxScore > 0 {
			ceiling = cfg.MaxScore * q.PosScores[i]
		}
		seen := map[string]bool{}
		var pool []int // ranks
		for r := cfg.RankFrom; r < len(hits); r++ {
			id := hits[r].ID
			if id == pos || docOf(id) == posDoc || seen[id] {
				continue
			}
			seen[id] = true
			if len(same) > 0 && corpus.TextOf != nil && same[chunk.TextKey(corpus.TextOf(id))] {
				st.SameText++
				continue
			}
			if hits[r].Score > ceiling {
				st.AboveMax++
				continue
			}
			pool = append(pool, r)
		}
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		k := min(cfg.N, len(pool))
		for j := 0; j < k; j++ { // partial Fisher–Yates
			s := j + rng.IntN(len(pool)-j)
			pool[j], pool[s] = pool[s], pool[j]
		}
		picked := pool[:k]
		sort.Ints(picked)
		negs := make([]string, k)
		for j, r := range picked {
			negs[j] = hits[r].ID
		}
		out[i] = negs
		st.Queries++
		if k < cfg.N {
			st.Shortfall++
			st.Missing += cfg.N - k
		}
	}
	return out, st, nil
}

// mineBlock is the number of queries MineHardNegatives searches per index
// call.
const mineBlock = 512

// Triplet is one training example: the query, its hypothetical documents
// d′ (for the fused query of Eq. 10), the positive passage text and the
// hard-negative passage texts.
type Triplet struct {
	Query    string
	HypoDocs []string
	Pos      string
	Negs     []string
}

// flagRecord is a FlagEmbedding fine-tuning line. "hypo_docs" is ragforge's
// addition (ignored by FlagEmbedding, which reads query/pos/neg).
type flagRecord struct {
	Query    string   `json:"query"`
	Pos      []string `json:"pos"`
	Neg      []string `json:"neg"`
	HypoDocs []string `json:"hypo_docs,omitempty"`
}

// WriteJSONL writes one FlagEmbedding line {"query": str, "pos": [str],
// "neg": [str]} per triplet (plus "hypo_docs" when present). neg is written
// as [] rather than null when a triplet has no negatives.
func WriteJSONL(w io.Writer, triplets []Triplet) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i, t := range triplets {
		negs := t.Negs
		if negs == nil {
			negs = []string{}
		}
		if err := enc.Encode(flagRecord{Query: t.Query, Pos: []string{t.Pos}, Neg: negs, HypoDocs: t.HypoDocs}); err != nil {
			return fmt.Errorf("write triplets: record %d: %w", i, err)
		}
	}
	return bw.Flush()
}

// ReadJSONL reads FlagEmbedding lines. A record with several positives
// becomes one triplet per positive (same query, negatives and hypothetical
// documents), in order. Blank lines are skipped. Errors name the line and
// field: invalid JSON, a missing/empty "query", or an empty "pos".
func ReadJSONL(r io.Reader, name string) ([]Triplet, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<28)
	var out []Triplet
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var rec flagRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("read triplets %s: line %d: %w", name, line, err)
		}
		if rec.Query == "" {
			return nil, fmt.Errorf("read triplets %s: line %d: field %q: missing or empty", name, line, "query")
		}
		if len(rec.Pos) == 0 {
			return nil, fmt.Errorf("read triplets %s: line %d: field %q: %w", name, line, "pos", errors.New("no positive"))
		}
		for _, p := range rec.Pos {
			out = append(out, Triplet{Query: rec.Query, HypoDocs: rec.HypoDocs, Pos: p, Negs: rec.Neg})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read triplets %s: line %d: %w", name, line+1, err)
	}
	return out, nil
}

// ReadJSONLFile is ReadJSONL on a file.
func ReadJSONLFile(path string) ([]Triplet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read triplets: %w", err)
	}
	defer f.Close()
	return ReadJSONL(f, path)
}
