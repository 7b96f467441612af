package search

import (
	"math"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// toyBERT is a random one-layer BERT over retrieval/encode's test
// vocabulary, on the sequential Go backend.
func toyBERT(t *testing.T) *encode.BERTEncoder {
	t.Helper()
	be, err := backend.New("go:ops_sequential")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load("../encode/testdata")
	if err != nil {
		t.Fatal(err)
	}
	cfg := bert.TinyConfig(tok.Len())
	cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize, cfg.NumHiddenLayers = 16, 2, 32, 1
	cfg.MaxPositionEmbeddings, cfg.InitializerRange = 24, 0.2
	m, err := bert.NewRandom(be, cfg, false, 11)
	if err != nil {
		t.Fatal(err)
	}
	return encode.NewBERTEncoder(m, tok, "toy")
}

// Dense mode with a BERT encoder and a FAISS Flat index: a document's own
// text, searched as a query, finds it first with cosine 1; an encoder of
// another dimension is refused.
func TestDenseBERTFAISS(t *testing.T) {
	texts := []string{"gout", "what causes gout and joint pain", "aspirin", "insulin diabetes blood sugar"}
	enc := toyBERT(t)
	chunks := make([]data.Chunk, len(texts))
	for i, s := range texts {
		chunks[i] = data.Chunk{ID: "doc" + string(rune('0'+i)) + "#0", Text: s}
	}
	idx, err := IndexChunks(enc, chunks, "Flat", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	p := &Pipeline{Config: Config{Mode: Dense}, Encoder: enc, Index: idx}
	for i, s := range texts {
		hits, err := p.Search(s, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 3 || hits[0].ID != chunks[i].ID || math.Abs(hits[0].Score-1) > 1e-5 {
			t.Errorf("search %q: %v, want %s first with score 1", s, hits, chunks[i].ID)
		}
	}
	p.Encoder = letterEncoder{}
	if _, err := p.Search("x", 1); err == nil || !strings.Contains(err.Error(), "dim") {
		t.Errorf("dimension mismatch: error %v", err)
	}
}
