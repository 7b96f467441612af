// Package dense holds ragforge's dense-retrieval storage: a reader and writer
// for NumPy .npy float32 embedding matrices, a loader for the RAG² retriever
// corpus layout (embeddings/<corpus>/*.npy beside articles/<corpus>/*.json),
// and Index, a faiss index that maps its rows back to chunk or document ids.
//
// Embeddings are float32, row-major: n vectors of dimension d are a
// []float32 of length n*d.
package dense

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/faiss"
)

// File names inside a saved Index directory.
const (
	IndexFile = "index.faiss" // faiss::write_index output
	IDsFile   = "ids.json"    // JSON list of ids; ids[i] is faiss row i
)

// Index is a faiss index whose row i stands for ids[i] (a chunk id
// "<doc id>#<i>" or a document id).
type Index struct {
	ids []string
	fx  *faiss.Index
}

// Build indexes vecs, row-major [len(ids), dim], with the faiss factory
// string ("Flat" for exact search as in RAG²'s IndexFlatIP, "HNSW32",
// "IVF1024,Flat", ...) under the inner-product metric. Vectors are used as
// given: L2-normalize them first (faiss.Normalize) for cosine similarity;
// MedCPT, as RAG² uses it, is scored by raw inner product. Indexes that need
// training (IVF, PQ) are trained on vecs themselves.
//
// Errors: len(vecs) != len(ids)*dim, an empty or duplicate id, a factory
// string faiss rejects, too few vectors to train.
func Build(ids []string, vecs []float32, dim int, factory string) (*Index, error) {
	if dim < 1 || len(vecs) != len(ids)*dim {
		return nil, fmt.Errorf("dense: build: %d ids × dimension %d needs %d floats, got %d",
			len(ids), dim, len(ids)*max(dim, 0), len(vecs))
	}
	if err := checkIDs(ids); err != nil {
		return nil, fmt.Errorf("dense: build: %w", err)
	}
	b, err := NewBuilder(dim, factory)
	if err != nil {
		return nil, err
	}
	if b.NeedsTraining() {
		if err := b.Train(vecs); err != nil {
			b.Close()
			return nil, err
		}
	}
	if err := b.Add(ids, vecs); err != nil {
		b.Close()
		return nil, err
	}
	return b.Index(), nil
}

func checkIDs(ids []string) error {
	seen := make(map[string]int, len(ids))
	for i, id := range ids {
		if id == "" {
			return fmt.Errorf("id %d is empty", i)
		}
		if j, dup := seen[id]; dup {
			return fmt.Errorf("duplicate id %q at rows %d and %d", id, j, i)
		}
		seen[id] = i
	}
	return nil
}

// Search returns, for each query in qvecs (row-major [nq, Dim()]), at most k
// hits, best first: hits[q][r].ID is the id of the r-th nearest row and
// Score its inner product (for an L2 index loaded from disk, minus the
// squared distance, so higher is better). Rows hold min(k, Len()) hits at
// most and never an invalid id (faiss's -1 padding is cut off, see
// faiss.(*Index).SearchHits). Errors: k < 1, len(qvecs) not a multiple of
// Dim().
func (ix *Index) Search(qvecs []float32, k int) ([][]retrieval.Hit, error) {
	res, err := ix.fx.SearchHits(qvecs, k)
	if err != nil {
		return nil, fmt.Errorf("dense: search: %w", err)
	}
	sign := 1.0
	if ix.fx.Metric() == faiss.MetricL2 {
		sign = -1
	}
	out := make([][]retrieval.Hit, len(res))
	for q, row := range res {
		hits := make([]retrieval.Hit, len(row))
		for r, nb := range row {
			if nb.ID >= int64(len(ix.ids)) {
				return nil, fmt.Errorf("dense: search: faiss returned row %d, index has %d ids", nb.ID, len(ix.ids))
			}
			hits[r] = retrieval.Hit{ID: ix.ids[nb.ID], Score: sign * float64(nb.Score)}
		}
		out[q] = hits
	}
	return out, nil
}

// Len returns the number of indexed vectors.
func (ix *Index) Len() int { return len(ix.ids) }

// Dim returns the vector dimension.
func (ix *Index) Dim() int { return ix.fx.Dim() }

// IDs returns the ids by faiss row. The slice is the index's own; do not
// modify it.
func (ix *Index) IDs() []string { return ix.ids }

// Faiss returns the underlying faiss index, e.g. to SetNprobe or
// SetEfSearch. Do not Add to it: the ids would go out of step.
func (ix *Index) Faiss() *faiss.Index { return ix.fx }

// SearchParams are faiss search-time settings of an Index; a zero field
// leaves faiss's value (nprobe 1, efSearch 16). With nprobe 1, an
// "IVF256,Flat" index over a thousand vectors visits one list of about four
// vectors and returns far fewer hits than asked.
type SearchParams struct {
	// Nprobe is how many inverted lists an IVF index visits per query
	// (faiss IndexIVF::nprobe).
	Nprobe int `json:"nprobe,omitempty"`
	// EfSearch is the HNSW search beam width (faiss HNSW::efSearch; faiss
	// raises it to k when smaller).
	EfSearch int `json:"ef_search,omitempty"`
}

// Validate rejects negative values; errors name the field.
func (p SearchParams) Validate() error {
	if p.Nprobe < 0 {
		return fmt.Errorf("field %q: %d, want ≥ 1 (0 = faiss's default)", "nprobe", p.Nprobe)
	}
	if p.EfSearch < 0 {
		return fmt.Errorf("field %q: %d, want ≥ 1 (0 = faiss's default)", "ef_search", p.EfSearch)
	}
	return nil
}

// SetSearch applies the non-zero fields of p. Errors: a negative value,
// nprobe on an index without an IVF part, efSearch on a non-HNSW index.
func (ix *Index) SetSearch(p SearchParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("dense: search params: %w", err)
	}
	if p.Nprobe > 0 {
		if err := ix.fx.SetNprobe(p.Nprobe); err != nil {
			return fmt.Errorf("dense: %w", err)
		}
	}
	if p.EfSearch > 0 {
		if err := ix.fx.SetEfSearch(p.EfSearch); err != nil {
			return fmt.Errorf("dense: %w", err)
		}
	}
	return nil
}

// CheckSearch reports, before any vector is encoded, whether an index made
// by Build(…, dim, factory) accepts p: it applies p to an empty index of that
// factory. Errors: those of SetSearch and of faiss's factory.
func CheckSearch(dim int, factory string, p SearchParams) error {
	if p == (SearchParams{}) {
		return nil
	}
	fx, err := faiss.New(dim, factory, faiss.MetricInnerProduct)
	if err != nil {
		return fmt.Errorf("dense: %w", err)
	}
	defer fx.Close()
	return (&Index{fx: fx}).SetSearch(p)
}

// Close frees the faiss index. It is idempotent.
func (ix *Index) Close() { ix.fx.Close() }

// Save writes dir/index.faiss and dir/ids.json, creating dir if needed.
func (ix *Index) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dense: save %s: %w", dir, err)
	}
	b, err := json.Marshal(ix.ids)
	if err != nil {
		return fmt.Errorf("dense: save %s: %w", dir, err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, IDsFile), b, 0o644); err != nil {
		return fmt.Errorf("dense: save: %w", err)
	}
	if err := ix.fx.Write(filepath.Join(dir, IndexFile)); err != nil {
		return fmt.Errorf("dense: save: %w", err)
	}
	return nil
}

// Load reads an Index written by Save. Errors name the file: a missing or
// corrupt index.faiss or ids.json, a row count that differs from the id
// count, empty or duplicate ids.
func Load(dir string) (*Index, error) {
	idsPath := filepath.Join(dir, IDsFile)
	b, err := os.ReadFile(idsPath)
	if err != nil {
		return nil, fmt.Errorf("dense: load: %w", err)
	}
	var ids []string
	if err := json.Unmarshal(b, &ids); err != nil {
		return nil, fmt.Errorf("dense: load %s: want a JSON list of strings: %w", idsPath, err)
	}
	if err := checkIDs(ids); err != nil {
		return nil, fmt.Errorf("dense: load %s: %w", idsPath, err)
	}
	fx, err := faiss.Read(filepath.Join(dir, IndexFile))
	if err != nil {
		return nil, fmt.Errorf("dense: load: %w", err)
	}
	if n := fx.Ntotal(); n != int64(len(ids)) {
		fx.Close()
		return nil, fmt.Errorf("dense: load %s: index holds %d vectors but %s lists %d ids",
			filepath.Join(dir, IndexFile), n, idsPath, len(ids))
	}
	return &Index{ids: ids, fx: fx}, nil
}
