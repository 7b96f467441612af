package encode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/npy"
	"github.com/ragforge/ragforge/data/storedb"
	"github.com/ragforge/ragforge/data/storedb/storedbtest"
	"github.com/ragforge/ragforge/data/workqueue"
)

// splitChunks is a corpus of n chunks of varied lengths (so the encoder's
// length buckets and batch shapes differ from block to block).
func splitChunks(n int) []data.Chunk {
	words := strings.Fields("the aspirin blocks cyclooxygenase and reduces fever while ibuprofen relieves pain in adults with arthritis")
	out := make([]data.Chunk, n)
	for i := range out {
		var sb strings.Builder
		for j := range 1 + (i*7)%13 {
			sb.WriteString(words[(i+j*3)%len(words)] + " ")
		}
		out[i] = data.Chunk{ID: fmt.Sprint("c", i), DocID: fmt.Sprint("d", i/4), Text: sb.String()}
	}
	return out
}

// npyBytes is the .npy file of vecs [len(vecs)/dim, dim].
func npyBytes(t *testing.T, vecs []float32, dim int) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.npy")
	if err := npy.Write(p, vecs, len(vecs)/dim, dim); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Three workers and a claimer that dies holding batch 1 encode a corpus of
// five batches through the store's queue; the merged vectors are the
// one-process EncodeCorpus's, byte for byte as .npy, batch 1 taken over
// once its lease expired and no batch encoded twice. (The toy encoder on
// the sequential Go backend gives a row the same bits in any batch, so this
// checks the queue, order and merge; the block alignment is what keeps a
// backend whose kernels depend on the batch shape equal too.)
func TestSplitQueueEqualsOneProcess(t *testing.T) {
	storedbtest.Each(t, testSplitQueueEqualsOneProcess)
}

func testSplitQueueEqualsOneProcess(t *testing.T, target string) {
	enc := toyEncoder(t)
	chunks := splitChunks(4*CorpusBlock + 90)
	single, dim, err := EncodeCorpus(enc, chunks, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := npyBytes(t, single, dim)

	db, err := storedb.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := workqueue.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := Split{Dir: filepath.Join(t.TempDir(), "parts"), BatchRows: CorpusBlock}
	payloads, err := s.Payloads(chunks)
	if err != nil || len(payloads) != 5 {
		t.Fatalf("payloads %d, %v; want 5", len(payloads), err)
	}
	if _, err := q.Enqueue(ctx, "enc", payloads); err != nil {
		t.Fatal(err)
	}
	if b, _, err := q.Claim(ctx, "enc", "dead", 300*time.Millisecond); err != nil || b.N != 0 {
		t.Fatalf("dead claim %+v, %v", b, err)
	}
	var mu sync.Mutex
	rows := 0
	var got []float32
	n, published, err := s.Run(ctx, enc, chunks, Workers{Queue: q, Job: "enc", Workers: 3, Lease: time.Second},
		func(r int) { mu.Lock(); rows += r; mu.Unlock() },
		func(vecs []float32, d int) error { got = vecs; return nil })
	if err != nil || n != 5 || !published {
		t.Fatalf("Run = %d batches, published %v, %v; want 5, true", n, published, err)
	}
	if rows != len(chunks) {
		t.Errorf("%d rows encoded, want %d (each once)", rows, len(chunks))
	}
	if !bytes.Equal(npyBytes(t, got, dim), want) {
		t.Error("merged .npy differs from the one-process .npy")
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("parts directory left after the merge: %v", err)
	}
	// A process joining after the merge finds nothing to do.
	if n, published, err := s.Run(ctx, enc, chunks, Workers{Queue: q, Job: "enc", Workers: 2}, nil,
		func([]float32, int) error { t.Error("published twice"); return nil }); n != 0 || published || err != nil {
		t.Errorf("late Run = %d, %v, %v; want 0, false, nil", n, published, err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("parts directory left by the late Run: %v", err)
	}
	// A worker that chunked another corpus is refused.
	if _, _, err := s.Run(ctx, enc, chunks[1:], Workers{Queue: q, Job: "enc"}, nil, nil); err == nil {
		t.Error("Run over other chunks: no error")
	}
}

// Static shards: the first to finish finds a part missing, the last one
// merges; the vectors are the one-process ones.
func TestSplitShardsEqualOneProcess(t *testing.T) {
	enc := toyEncoder(t)
	chunks := splitChunks(2*CorpusBlock + 3)
	single, dim, err := EncodeCorpus(enc, chunks, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := Split{Dir: filepath.Join(t.TempDir(), "parts"), BatchRows: CorpusBlock}
	var got []float32
	publish := func(vecs []float32, d int) error { got = vecs; return nil }
	ctx := context.Background()
	if n, published, err := s.Run(ctx, enc, chunks, Workers{Shard: 1, Shards: 2}, nil, publish); n != 1 || published || err != nil {
		t.Fatalf("shard 1/2 = %d, %v, %v; want 1 batch, not published", n, published, err)
	}
	if n, published, err := s.Run(ctx, enc, chunks, Workers{Shard: 0, Shards: 2}, nil, publish); n != 2 || !published || err != nil {
		t.Fatalf("shard 0/2 = %d, %v, %v; want 2 batches, published", n, published, err)
	}
	if !bytes.Equal(npyBytes(t, got, dim), npyBytes(t, single, dim)) {
		t.Error("merged shards differ from the one-process vectors")
	}
}

func TestSplitRefusesUnalignedBatch(t *testing.T) {
	for _, rows := range []int{-CorpusBlock, 100, CorpusBlock + 1} {
		if _, err := (Split{BatchRows: rows}).Payloads(splitChunks(3)); err == nil || !strings.Contains(err.Error(), "multiple of") {
			t.Errorf("BatchRows %d: err %v", rows, err)
		}
	}
}
