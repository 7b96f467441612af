package encode

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// testBackend runs ops sequentially (GoMLX v0.26 simplego can deadlock on
// 2-core machines with nested parallel workers).
const testBackend = "go:ops_sequential"

func toyEncoder(t *testing.T) *BERTEncoder {
	t.Helper()
	be, err := backend.New(testBackend)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load("testdata")
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
	return NewBERTEncoder(m, tok, "toy")
}

func unit(v []float32) []float32 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(s))
	}
	return out
}

func near(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > tol {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

var texts = []string{
	"gout",
	"what causes gout and joint pain",
	"aspirin",
	"the asthma airway of the lungs and the skin rash of the heart and the kidney stone fever and the blood sugar of diabetes", // > 22 content tokens: truncated
	"insulin diabetes blood sugar",
}

// Batched, length-sorted, bucket-padded encoding equals the model run on
// each text alone (Forward, [CLS] pooled and normalised by hand), in input
// order; long texts are cut to MaxLength tokens.
func TestBERTEncoderMatchesForward(t *testing.T) {
	enc := toyEncoder(t)
	enc.BatchSize = 2
	var calls [][2]int
	enc.Progress = func(done, total int) { calls = append(calls, [2]int{done, total}) }
	got, err := enc.EncodeDocs(texts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(enc.Tokenizer.Encode(texts[3], false)); n <= 22 {
		t.Fatalf("texts[3] has %d tokens, the truncation case needs > 22", n)
	}
	for i, text := range texts {
		ids := enc.Tokenizer.Encode(text, false)
		if len(ids) > 22 {
			ids = ids[:22]
		}
		ids = append(append([]int{2}, ids...), 3) // [CLS] … [SEP]
		out, err := enc.Model.Forward([][]int{ids}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "doc "+text, got[i], unit(out.CLS), 1e-5)
	}
	if len(calls) != 3 || calls[2] != [2]int{5, 5} || calls[0] != [2]int{2, 5} {
		t.Errorf("progress calls %v, want (2,5) (4,5) (5,5)", calls)
	}

	// Mean pooling, no normalisation.
	enc.Pooling, enc.Normalize = bert.PoolMean, false
	got, err = enc.EncodeDocs(texts[:2])
	if err != nil {
		t.Fatal(err)
	}
	out, err := enc.Model.Forward([][]int{enc.Tokenizer.Encode(texts[1], true)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "mean pooled", got[1], out.Mean, 1e-5)
}

// Repeated texts are encoded once (progress counts distinct texts), each
// copy gets its own slice, and a token budget that forces one-row and
// filler-padded batches changes nothing but rounding.
func TestBERTEncoderDuplicatesAndTokenBudget(t *testing.T) {
	enc := toyEncoder(t)
	in := []string{texts[1], texts[0], texts[1], texts[4], texts[0], texts[2], texts[3]}
	ref := make([][]float32, len(in))
	for i, s := range in {
		v, err := enc.EncodeDocs([]string{s})
		if err != nil {
			t.Fatal(err)
		}
		ref[i] = v[0]
	}
	for _, budget := range []int{0, 16, 48} { // default; one row per batch; up to 2-3 rows and fillers
		enc.MaxBatchTokens = budget
		var calls [][2]int
		enc.Progress = func(done, total int) { calls = append(calls, [2]int{done, total}) }
		got, err := enc.EncodeDocs(in)
		if err != nil {
			t.Fatal(err)
		}
		for i := range in {
			near(t, fmt.Sprintf("budget %d text %d", budget, i), got[i], ref[i], 1e-5)
		}
		if last := calls[len(calls)-1]; last != [2]int{5, 5} {
			t.Errorf("budget %d: progress %v, want to end at (5,5): 5 distinct texts", budget, calls)
		}
		if budget == 16 && len(calls) != 5 {
			t.Errorf("budget 16: %d batches, want 5 (one 16-token row each)", len(calls))
		}
		got[0][0] = 42
		if got[2][0] == 42 {
			t.Fatalf("budget %d: duplicate texts share one vector slice", budget)
		}
	}
}

func TestQueryInstruction(t *testing.T) {
	enc := toyEncoder(t)
	enc.QueryInstruction = "what causes "
	q, err := enc.EncodeQueries([]string{"gout"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := enc.EncodeDocs([]string{"what causes gout", "gout"})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "query with instruction", q[0], d[0], 1e-6)
	var diff float64
	for i := range q[0] {
		diff += math.Abs(float64(q[0][i] - d[1][i]))
	}
	if diff < 1e-3 {
		t.Error("instruction had no effect on the query vector")
	}
}

func TestDocInstruction(t *testing.T) {
	enc := toyEncoder(t)
	plain, err := enc.EncodeQueries([]string{"passage: gout"})
	if err != nil {
		t.Fatal(err)
	}
	enc.DocInstruction = "passage: "
	d, err := enc.EncodeDocs([]string{"gout"})
	if err != nil {
		t.Fatal(err)
	}
	near(t, "document with instruction", d[0], plain[0], 1e-6)
	q, err := enc.EncodeQueries([]string{"gout"})
	if err != nil {
		t.Fatal(err)
	}
	var diff float64
	for i := range q[0] {
		diff += math.Abs(float64(q[0][i] - d[0][i]))
	}
	if diff < 1e-3 {
		t.Error("the document instruction reached the query")
	}
}

// fakeEncoder returns [i, len(text)] for the i-th text of each call.
type fakeEncoder struct{ dim int }

func (f fakeEncoder) EncodeQueries(ts []string) ([][]float32, error) { return f.EncodeDocs(ts) }
func (f fakeEncoder) EncodeDocs(ts []string) ([][]float32, error) {
	out := make([][]float32, len(ts))
	for i, s := range ts {
		if s == "boom" {
			return nil, errors.New("boom")
		}
		out[i] = make([]float32, f.dim)
		out[i][0] = float32(len(s))
	}
	return out, nil
}
func (f fakeEncoder) Dim() int     { return 2 }
func (f fakeEncoder) Name() string { return "fake" }

func TestEncodeCorpus(t *testing.T) {
	chunks := make([]data.Chunk, CorpusBlock+3)
	for i := range chunks {
		chunks[i] = data.Chunk{ID: "d#" + string(rune('a'+i%26)), Text: strings.Repeat("x", i%7)}
	}
	var last [2]int
	n := 0
	vecs, dim, err := EncodeCorpus(fakeEncoder{dim: 2}, chunks, func(d, tot int) { last, n = [2]int{d, tot}, n+1 })
	if err != nil {
		t.Fatal(err)
	}
	if dim != 2 || len(vecs) != 2*len(chunks) {
		t.Fatalf("dim %d, %d floats", dim, len(vecs))
	}
	for i := range chunks {
		if vecs[2*i] != float32(i%7) || vecs[2*i+1] != 0 {
			t.Fatalf("row %d = %v, want [%d 0]", i, vecs[2*i:2*i+2], i%7)
		}
	}
	if n != 2 || last != [2]int{len(chunks), len(chunks)} {
		t.Errorf("progress: %d calls, last %v", n, last)
	}
	if _, _, err := EncodeCorpus(fakeEncoder{dim: 3}, chunks[:2], nil); err == nil || !strings.Contains(err.Error(), "vector length 3") {
		t.Errorf("wrong-length vectors: error %v", err)
	}
	chunks[1].Text, chunks[1].ID = "boom", "bad#1"
	if _, _, err := EncodeCorpus(fakeEncoder{dim: 2}, chunks[:2], nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("encoder error not returned: %v", err)
	}
}

// EncodeToRAG2 writes, block by block, the files WriteRAG2 writes from the
// whole corpus (byte for byte), for shards that do and do not fall on block
// boundaries.
func TestEncodeToRAG2EqualsWriteRAG2(t *testing.T) {
	chunks := make([]data.Chunk, 2*CorpusBlock+7)
	for i := range chunks {
		chunks[i] = data.Chunk{ID: fmt.Sprintf("d%d#0", i), DocID: fmt.Sprintf("d%d", i), Text: strings.Repeat("y", i%11+1), End: i%11 + 1}
	}
	walk := func(yield func(data.Chunk) error) error {
		for _, c := range chunks {
			if err := yield(c); err != nil {
				return err
			}
		}
		return nil
	}
	enc := fakeEncoder{dim: 2}
	for _, shard := range []int{100, CorpusBlock, len(chunks) + 5} {
		root := t.TempDir()
		vecs, dim, err := EncodeCorpus(enc, chunks, nil)
		if err != nil {
			t.Fatal(err)
		}
		info := data.EncodeInfo{Encoder: "fake", Pooling: "cls"}
		if err := data.WriteRAG2(filepath.Join(root, "whole"), "c", chunks, vecs, dim, shard, info); err != nil {
			t.Fatal(err)
		}
		var dones []int
		n, err := EncodeToRAG2(enc, walk, filepath.Join(root, "stream"), "c", shard, info, func(d int) { dones = append(dones, d) })
		if err != nil {
			t.Fatal(err)
		}
		if n != len(chunks) || dones[len(dones)-1] != len(chunks) {
			t.Fatalf("shard %d: %d rows, progress %v", shard, n, dones)
		}
		for _, sub := range []string{"embeddings/c", "articles/c"} {
			ents, err := os.ReadDir(filepath.Join(root, "whole", sub))
			if err != nil {
				t.Fatal(err)
			}
			if want := (len(chunks) + shard - 1) / shard; sub == "articles/c" && len(ents) != want {
				t.Fatalf("shard %d: %d article files, want %d", shard, len(ents), want)
			}
			for _, e := range ents {
				a, _ := os.ReadFile(filepath.Join(root, "whole", sub, e.Name()))
				b, err := os.ReadFile(filepath.Join(root, "stream", sub, e.Name()))
				if err != nil || !bytes.Equal(a, b) {
					t.Fatalf("shard %d: %s/%s differs from WriteRAG2's (err %v)", shard, sub, e.Name(), err)
				}
			}
		}
	}
	// A failing encoder leaves nothing behind.
	root := t.TempDir()
	bad := append(append([]data.Chunk(nil), chunks...), data.Chunk{ID: "x#0", Text: "boom"})
	badWalk := func(yield func(data.Chunk) error) error {
		for _, c := range bad {
			if err := yield(c); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := EncodeToRAG2(enc, badWalk, root, "c", 100, data.EncodeInfo{}, nil); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("encoder error: got %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "embeddings")); len(ents) != 0 {
		t.Fatalf("failed encoding left %v", ents)
	}
}
