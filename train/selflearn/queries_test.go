package selflearn

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// TestGenQueriesPerChunk: QueriesPerChunk keys per chunk, each mapped to its
// chunk; query j of a chunk is the ICT generator's j-th for that chunk
// whatever the batch, distinct within the chunk, and a chunk too short for
// that many distinct queries gets ErrDuplicateQuery for the repeats.
func TestGenQueriesPerChunk(t *testing.T) {
	corpus := []data.Chunk{
		{ID: "a#0", Text: "Gout is caused by uric acid crystals. Aspirin lowers fever in adults today. Formalin fixes tissue."},
		{ID: "b#0", Text: "Fever."},
	}
	tests := []struct {
		q       int
		keys    int
		dupOfB  int // ErrDuplicateQuery items of chunk b
		batches []int
	}{
		{1, 2, 0, []int{2}},
		{4, 8, 3, []int{8}},
		{4, 8, 3, []int{3, 5}}, // a batch boundary inside chunk a's queries
		{6, 12, 5, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	}
	var first []string // chunk a's queries with q = 6, one batch
	for _, tc := range tests {
		cfg := DefaultConfig()
		cfg.QueriesPerChunk = tc.q
		s := &state{cfg: cfg, corpus: corpus, byID: map[string]int{"a#0": 0, "b#0": 1}}
		keys := s.queryKeys(1, []int{0, 1})
		if len(keys) != tc.keys || keys[0] != roundKey(1, "a#0") {
			t.Fatalf("q %d: keys %q, want %d starting with %q", tc.q, keys, tc.keys, roundKey(1, "a#0"))
		}
		got := map[string][]string{}
		dups := 0
		next := 0
		for _, n := range tc.batches {
			sel := make([]int, n)
			for i := range sel {
				sel[i] = next + i
			}
			next += n
			outs, errs := s.genQueries(context.Background(), 1, generate.ICT{}, keys, sel)
			for i, k := range sel {
				id := s.chunkOfKey(keys[k])
				switch {
				case errors.Is(errs[i], ErrDuplicateQuery) && id == "b#0":
					dups++
				case errs[i] != nil:
					t.Fatalf("q %d: key %s: %v", tc.q, keys[k], errs[i])
				default:
					if len(outs[i]) != 1 || !strings.Contains(corpus[s.byID[id]].Text, outs[i][0]) {
						t.Fatalf("q %d: key %s (chunk %s): query %q is not one text of its chunk", tc.q, keys[k], id, outs[i])
					}
					got[id] = append(got[id], outs[i][0])
				}
			}
		}
		if dups != tc.dupOfB || len(got["b#0"]) != 1 || len(got["a#0"]) != tc.q {
			t.Errorf("q %d: chunk a %d queries, b %d, duplicates %d; want %d, 1, %d", tc.q, len(got["a#0"]), len(got["b#0"]), dups, tc.q, tc.dupOfB)
		}
		seen := map[string]bool{}
		for _, x := range got["a#0"] {
			if seen[x] {
				t.Errorf("q %d: chunk a: %q twice", tc.q, x)
			}
			seen[x] = true
		}
		if tc.q == 6 {
			first = got["a#0"]
		}
	}
	// The same seed gives the same queries in any batching (checked above
	// against one call) and run after run.
	s := &state{cfg: DefaultConfig(), corpus: corpus, byID: map[string]int{"a#0": 0, "b#0": 1}}
	s.cfg.QueriesPerChunk = 6
	keys := s.queryKeys(1, []int{0, 1})
	outs, _ := s.genQueries(context.Background(), 1, generate.ICT{}, keys, []int{0, 1, 2, 3, 4, 5})
	for j := range outs {
		if outs[j][0] != first[j] {
			t.Errorf("query %d: %q, earlier %q", j, outs[j][0], first[j])
		}
	}
}

// TestRunQueriesPerChunkAndPooling: a round with 3 queries per chunk holds
// out whole chunks (3 of 12 at 0.25) and trains on every pair of the others,
// each query's positive being its own chunk, and the trained retriever
// declares the configured pooling and prompts.
func TestRunQueriesPerChunkAndPooling(t *testing.T) {
	cfg := toyConfig(t, toyRetriever(t))
	cfg.QueriesPerChunk, cfg.Pooling, cfg.FusionHoldout = 3, "mean", 0.25
	cfg.QueryInstruction, cfg.DocInstruction = "query: ", "passage: "
	qs, qrels := toyEval()
	rep, err := Run(context.Background(), cfg, toyCorpus(), qs, qrels, openStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Rounds[1].Counts
	if c.Sampled != 12 || c.Queries != 36 || c.QueryErrors != 0 || c.Triplets != 27 || c.HeldOut != 9 {
		t.Fatalf("counts %+v, want 12 chunks, 36 queries, 27 trained, 9 held out", c)
	}
	f, err := os.Open(filepath.Join(cfg.WorkDir, "round-1", "train.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	perPos := map[string]map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct {
			Query string   `json:"query"`
			Pos   []string `json:"pos"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		if len(row.Pos) != 1 || !strings.Contains(strings.Join(strings.Fields(row.Pos[0]), " "), row.Query) {
			t.Fatalf("triplet %q: positive %q does not hold the query", row.Query, row.Pos)
		}
		if perPos[row.Pos[0]] == nil {
			perPos[row.Pos[0]] = map[string]bool{}
		}
		perPos[row.Pos[0]][row.Query] = true
	}
	if len(perPos) != 9 {
		t.Errorf("%d positives, want the 9 chunks not held out (a held-out chunk trained by another query?)", len(perPos))
	}
	for p, q := range perPos {
		if len(q) != 3 {
			t.Errorf("chunk %q: %d distinct queries, want 3", p, len(q))
		}
	}
	if p, err := encode.DirPooling(rep.Rounds[1].RetrieverDir); err != nil || p != bert.PoolMean {
		t.Errorf("trained retriever pooling %q, %v; want mean", p, err)
	}
	// It carries the prompts it was trained with.
	if st, _, err := encode.DirSettings(rep.Rounds[1].RetrieverDir); err != nil || st.QueryPrefix != "query: " || st.PassagePrefix != "passage: " {
		t.Errorf("trained retriever settings %+v, %v; want the query and document prompts it trained with", st, err)
	}
}
