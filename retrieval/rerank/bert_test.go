package rerank

import (
	"github.com/ragforge/ragforge/internal/testutil"
	"math"
	"reflect"
	"testing"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
	"github.com/ragforge/ragforge/retrieval"
)

// With the real WordPiece tokenizer, Pair of short texts equals HF
// tokenizer(a, b) as EncodePair builds it, and a random-weight BERT
// cross-encoder reranks with batches exactly as it scores pairs one by one.
func TestCrossEncoderBERT(t *testing.T) {
	tok, err := wordpiece.Load(testutil.SharedPath(t, "fixtures/bert-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	q := "coloração de hematoxilina"
	docs := []string{"fixar em formol tamponado", "hematoxilina de Harris por 5 min", "lavar em água corrente", "eosina alcoólica"}
	for _, d := range docs {
		ids, types := Pair(tok, q, d, 512)
		wantIDs, wantTypes := tok.EncodePair(q, d)
		if !reflect.DeepEqual(ids, wantIDs) || !reflect.DeepEqual(types, wantTypes) {
			t.Fatalf("Pair(%q) = %v %v, EncodePair %v %v", d, ids, types, wantIDs, wantTypes)
		}
	}
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	cfg := bert.TinyConfig(tok.Len())
	cfg.NumLabels = 1
	m, err := bert.NewRandom(be, cfg, true, 11)
	if err != nil {
		t.Fatal(err)
	}
	single := make([]float64, len(docs))
	for i, d := range docs {
		ids, types := tok.EncodePair(q, d)
		mask := make([]int, len(ids))
		for j := range mask {
			mask[j] = 1
		}
		s, err := m.Score([][]int{ids}, [][]int{mask}, [][]int{types})
		if err != nil {
			t.Fatal(err)
		}
		single[i] = float64(s[0])
	}
	hits := make([]retrieval.Hit, len(docs))
	for i := range docs {
		hits[i] = retrieval.Hit{ID: string(rune('a' + i)), Score: float64(10 - i)}
	}
	textOf := func(id string) (string, bool) { return docs[id[0]-'a'], true }
	ce := &CrossEncoder{Model: m, Tokenizer: tok, TopN: 4, K: 2, BatchSize: 3}
	got, err := ce.Rerank(q, hits, textOf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d hits", len(got))
	}
	for r, h := range got {
		i := int(h.ID[0] - 'a')
		if math.Abs(h.Score-single[i]) > 1e-4 {
			t.Errorf("rank %d %s: batched score %v, single %v", r, h.ID, h.Score, single[i])
		}
		for j, s := range single {
			// Nothing left out may beat a kept hit.
			kept := j == int(got[0].ID[0]-'a') || j == int(got[1].ID[0]-'a')
			if !kept && s > h.Score+1e-4 {
				t.Errorf("dropped %d (score %v) beats kept %s (%v)", j, s, h.ID, h.Score)
			}
		}
	}
}
