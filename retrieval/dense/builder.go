package dense

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/npy"
	"github.com/ragforge/ragforge/retrieval/faiss"
)

// Builder makes an Index from vectors that arrive in batches: an IVF/PQ
// index is trained once on a sample (Train), then every batch is added as
// it comes (Add), so only the index itself (for "IVF…,PQ<m>", m bytes per
// vector plus the ids) stays in memory. Not safe for concurrent use.
type Builder struct {
	factory string
	dim     int
	fx      *faiss.Index
	ids     []string
	seen    map[string]int
}

// NewBuilder starts an empty index of the faiss factory string under the
// inner-product metric (as Build). Errors: dim < 1, a factory faiss rejects.
func NewBuilder(dim int, factory string) (*Builder, error) {
	fx, err := faiss.New(dim, factory, faiss.MetricInnerProduct)
	if err != nil {
		return nil, fmt.Errorf("dense: build: %w", err)
	}
	return &Builder{factory: factory, dim: dim, fx: fx, seen: map[string]int{}}, nil
}

// NeedsTraining reports whether Train must run before Add (IVF, PQ).
func (b *Builder) NeedsTraining() bool { return !b.fx.IsTrained() }

// Train trains the index on sample, row-major [n, dim] (the IVF coarse
// k-means and the PQ codebooks). Errors: faiss's (too few vectors, a
// length not a multiple of dim).
func (b *Builder) Train(sample []float32) error {
	if err := b.fx.Train(sample); err != nil {
		return fmt.Errorf("dense: build %q: train on %d vectors: %w", b.factory, len(sample)/b.dim, err)
	}
	return nil
}

// Add appends vecs, row-major [len(ids), dim], under ids. Errors: a length
// mismatch, an empty id or one already added (naming both rows), an
// untrained index.
func (b *Builder) Add(ids []string, vecs []float32) error {
	if len(vecs) != len(ids)*b.dim {
		return fmt.Errorf("dense: build %q: %d ids × dimension %d needs %d floats, got %d", b.factory, len(ids), b.dim, len(ids)*b.dim, len(vecs))
	}
	for i, id := range ids {
		row := len(b.ids) + i
		if id == "" {
			return fmt.Errorf("dense: build %q: id %d is empty", b.factory, row)
		}
		if j, dup := b.seen[id]; dup {
			return fmt.Errorf("dense: build %q: duplicate id %q at rows %d and %d", b.factory, id, j, row)
		}
		b.seen[id] = row
	}
	if err := b.fx.Add(vecs); err != nil {
		for _, id := range ids {
			delete(b.seen, id)
		}
		return fmt.Errorf("dense: build %q: add rows %d..%d: %w", b.factory, len(b.ids), len(b.ids)+len(ids)-1, err)
	}
	b.ids = append(b.ids, ids...)
	return nil
}

// Rows returns the number of vectors added.
func (b *Builder) Rows() int { return len(b.ids) }

// Index returns the built index; the Builder must not be used after.
func (b *Builder) Index() *Index {
	ix := &Index{ids: b.ids, fx: b.fx}
	b.fx, b.ids, b.seen = nil, nil, nil
	return ix
}

// Close frees an unfinished index.
func (b *Builder) Close() {
	if b.fx != nil {
		b.fx.Close()
	}
}

// StreamOptions are BuildRAG2's settings.
type StreamOptions struct {
	// TrainRows is the size of the training sample, drawn uniformly
	// without replacement from the corpus (all rows when it has fewer).
	// 0 means DefaultTrainRows. faiss's k-means wants 39–256 points per
	// centroid (it warns below 39·nlist and subsamples above 256·nlist),
	// and each PQ sub-quantizer trains 2^nbits = 256 centroids.
	TrainRows int
	// Seed seeds the sample (PCG).
	Seed uint64
	// AddBatch is the most vectors handed to faiss per add call; 0 means
	// DefaultAddBatch.
	AddBatch int
}

// Defaults of StreamOptions.
const (
	DefaultTrainRows = 100_000
	DefaultAddBatch  = 65_536
)

// BuildRAG2 builds an Index over corpus in a RAG² layout under root
// (data.RAG2Shards: what encode.EncodeToRAG2 writes) without loading the
// corpus: a first pass over the .npy shards copies a uniform sample of
// TrainRows rows to train an IVF/PQ index (skipped for Flat and HNSW), a
// second pass reads one shard at a time and adds its vectors in batches of
// AddBatch under the records' ids. Peak memory is the index, the sample and
// one shard. Errors: invalid options, those of data.RAG2Shards and
// RAG2Shard.Read naming the file, and of Builder.
func BuildRAG2(root, corpus, factory string, opt StreamOptions) (*Index, error) {
	if opt.TrainRows < 0 || opt.AddBatch < 0 {
		return nil, fmt.Errorf("dense: build %s#%s: train rows %d, add batch %d: want ≥ 0", root, corpus, opt.TrainRows, opt.AddBatch)
	}
	if opt.TrainRows == 0 {
		opt.TrainRows = DefaultTrainRows
	}
	if opt.AddBatch == 0 {
		opt.AddBatch = DefaultAddBatch
	}
	shards, dim, err := data.RAG2Shards(root, corpus)
	if err != nil {
		return nil, err
	}
	b, err := NewBuilder(dim, factory)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			b.Close()
		}
	}()
	if b.NeedsTraining() {
		sample, err := sampleRows(shards, dim, opt.TrainRows, opt.Seed)
		if err != nil {
			return nil, err
		}
		if err := b.Train(sample); err != nil {
			return nil, err
		}
	}
	for _, sh := range shards {
		docs, vecs, err := sh.Read()
		if err != nil {
			return nil, err
		}
		for lo := 0; lo < len(docs); lo += opt.AddBatch {
			hi := min(lo+opt.AddBatch, len(docs))
			ids := make([]string, hi-lo)
			for i := range ids {
				ids[i] = docs[lo+i].ID
			}
			if err := b.Add(ids, vecs[lo*dim:hi*dim]); err != nil {
				return nil, fmt.Errorf("%w (%s)", err, sh.Embeds)
			}
		}
	}
	ok = true
	return b.Index(), nil
}

// sampleRows copies n rows drawn uniformly without replacement (all rows
// when the shards hold fewer), in corpus order, reading one .npy at a time.
func sampleRows(shards []data.RAG2Shard, dim, n int, seed uint64) ([]float32, error) {
	total := 0
	for _, s := range shards {
		total += s.Rows
	}
	n = min(n, total)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	// Floyd's algorithm: n distinct rows of [0, total) in O(n) memory.
	pick := make(map[int]struct{}, n)
	for j := total - n; j < total; j++ {
		if t := rng.IntN(j + 1); !has(pick, t) {
			pick[t] = struct{}{}
		} else {
			pick[j] = struct{}{}
		}
	}
	rows := make([]int, 0, n)
	for r := range pick {
		rows = append(rows, r)
	}
	slices.Sort(rows)
	out := make([]float32, 0, n*dim)
	base := 0
	for _, s := range shards {
		if len(rows) > 0 && rows[0] < base+s.Rows {
			x, _, err := readNpy(s)
			if err != nil {
				return nil, err
			}
			for len(rows) > 0 && rows[0] < base+s.Rows {
				r := rows[0] - base
				out = append(out, x[r*dim:(r+1)*dim]...)
				rows = rows[1:]
			}
		}
		base += s.Rows
	}
	return out, nil
}

func has(m map[int]struct{}, k int) bool { _, ok := m[k]; return ok }

func readNpy(s data.RAG2Shard) ([]float32, int, error) {
	x, n, _, err := npy.Read(s.Embeds)
	if err != nil {
		return nil, 0, fmt.Errorf("dense: sample %s: %w", s.Embeds, err)
	}
	return x, n, nil
}
