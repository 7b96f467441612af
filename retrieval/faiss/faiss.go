// Package faiss wraps the faiss C++ library (Debian libfaiss-dev 1.7.3,
// static libfaiss.a) through a small cgo C++ shim (shim.h, shim.cpp).
//
// Vectors are float32, row-major: a batch of n vectors of dimension d is a
// []float32 of length n*d, row i at x[i*d:(i+1)*d]. Ids are the int64 labels
// faiss assigns: 0, 1, 2, ... in insertion order (or the caller's ids with
// AddWithIDs on an "IDMap,..." index).
//
// Metrics follow faiss: MetricInnerProduct scores are inner products (higher
// is better; cosine similarity when the vectors are L2-normalized, see
// Normalize), MetricL2 scores are squared Euclidean distances (lower is
// better).
//
// Building needs libfaiss-dev, libopenblas-dev and libgomp (apt).
//
// Concurrency: Search, SearchHits and the accessors may run concurrently;
// Train, Add, AddWithIDs, SetNprobe, SetEfSearch and Close take an exclusive
// lock. C++ exceptions are caught in the shim and returned as Go errors.
package faiss

/*
#cgo CXXFLAGS: -std=c++17 -O2 -fopenmp
#cgo LDFLAGS: -lfaiss -lopenblas -lgomp -lstdc++ -lm
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// Metric is the similarity a faiss index ranks by.
type Metric int

const (
	// MetricInnerProduct ranks by <q, x>, higher first (faiss
	// METRIC_INNER_PRODUCT). With L2-normalized vectors it is cosine
	// similarity. It is the zero value and the default, as in RAG²'s
	// IndexFlatIP over MedCPT embeddings.
	MetricInnerProduct Metric = iota
	// MetricL2 ranks by squared Euclidean distance ||q - x||², lower first
	// (faiss METRIC_L2).
	MetricL2
)

// String returns "inner_product" or "l2".
func (m Metric) String() string {
	switch m {
	case MetricInnerProduct:
		return "inner_product"
	case MetricL2:
		return "l2"
	default:
		return fmt.Sprintf("Metric(%d)", int(m))
	}
}

// ErrClosed is returned by methods called after Close.
var ErrClosed = errors.New("faiss: index is closed")

// Index is a faiss::Index* owned by Go. Free it with Close; a finalizer frees
// it when an Index is dropped without Close.
type Index struct {
	mu     sync.RWMutex
	ptr    C.rf_index
	dim    int
	metric Metric
}

// New builds an empty index with faiss::index_factory(dim, factory, metric).
//
// factory is a faiss index factory string: "Flat" (exact), "IVF256,Flat",
// "IVF16,PQ8", "HNSW32", "IDMap,Flat", ... IVF and PQ indexes must be
// trained (Train) before Add and Search. Note that faiss's factory turns on
// polysemous training for 8-bit IVF-PQ ("IVF16,PQ8"), which takes minutes
// even on small data; append "np" ("IVF16,PQ8np") to skip it. Errors: dim < 1, an unknown metric,
// or a factory string faiss rejects (its message is included).
func New(dim int, factory string, metric Metric) (*Index, error) {
	if dim < 1 {
		return nil, fmt.Errorf("faiss: new %q: dimension %d < 1", factory, dim)
	}
	var m C.int
	switch metric {
	case MetricInnerProduct:
		m = 0
	case MetricL2:
		m = 1
	default:
		return nil, fmt.Errorf("faiss: new %q: unknown metric %d", factory, int(metric))
	}
	cs := C.CString(factory)
	defer C.free(unsafe.Pointer(cs))
	var p C.rf_index
	if err := cerr(C.rf_index_factory(C.int(dim), cs, m, &p)); err != nil {
		return nil, fmt.Errorf("faiss: new %q (dim %d, %v): %w", factory, dim, metric, err)
	}
	return wrap(p), nil
}

// Read loads an index written by Write (or by faiss.write_index in Python).
// Errors: a missing or corrupt file (faiss's message is included), or an
// index whose metric is neither inner product nor L2.
func Read(path string) (*Index, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	var p C.rf_index
	if err := cerr(C.rf_read_index(cs, &p)); err != nil {
		return nil, fmt.Errorf("faiss: read %s: %w", path, err)
	}
	ix := wrap(p)
	if C.rf_metric(p) < 0 {
		ix.Close()
		return nil, fmt.Errorf("faiss: read %s: unsupported metric (want inner product or L2)", path)
	}
	return ix, nil
}

func wrap(p C.rf_index) *Index {
	ix := &Index{ptr: p, dim: int(C.rf_dim(p))}
	if C.rf_metric(p) == 1 {
		ix.metric = MetricL2
	}
	runtime.SetFinalizer(ix, (*Index).Close)
	return ix
}

// cerr converts a shim error string (NULL = success) into a Go error and
// frees it.
func cerr(s *C.char) error {
	if s == nil {
		return nil
	}
	defer C.rf_free_str(s)
	return errors.New(C.GoString(s))
}

// Close frees the C++ index. It is idempotent and safe to call from a
// finalizer; later calls to other methods return ErrClosed (or zero values
// for the accessors).
func (ix *Index) Close() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.ptr != nil {
		C.rf_free_index(ix.ptr)
		ix.ptr = nil
		runtime.SetFinalizer(ix, nil)
	}
}

// Write saves the index with faiss::write_index.
func (ix *Index) Write(path string) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.ptr == nil {
		return fmt.Errorf("faiss: write %s: %w", path, ErrClosed)
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	if err := cerr(C.rf_write_index(ix.ptr, cs)); err != nil {
		return fmt.Errorf("faiss: write %s: %w", path, err)
	}
	return nil
}

// Dim returns the vector dimension d.
func (ix *Index) Dim() int { return ix.dim }

// Metric returns the index's metric.
func (ix *Index) Metric() Metric { return ix.metric }

// Ntotal returns the number of stored vectors (0 after Close).
func (ix *Index) Ntotal() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.ptr == nil {
		return 0
	}
	return int64(C.rf_ntotal(ix.ptr))
}

// IsTrained reports whether the index can Add and Search (always true for
// Flat and HNSW, true for IVF/PQ after Train). False after Close.
func (ix *Index) IsTrained() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.ptr != nil && C.rf_is_trained(ix.ptr) != 0
}

// rows checks that x holds whole rows of dimension dim and returns the row
// count.
func (ix *Index) rows(op string, x []float32) (int, error) {
	if len(x)%ix.dim != 0 {
		return 0, fmt.Errorf("faiss: %s: len(x) = %d is not a multiple of the index dimension %d", op, len(x), ix.dim)
	}
	return len(x) / ix.dim, nil
}

// Train trains the index (IVF coarse quantizer k-means, PQ codebooks) on x,
// row-major [n, dim]. A no-op for Flat and HNSW. faiss needs at least nlist
// training vectors for IVF<nlist> (it warns on stderr below 39 per list).
func (ix *Index) Train(x []float32) error {
	n, err := ix.rows("train", x)
	if err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.ptr == nil {
		return fmt.Errorf("faiss: train: %w", ErrClosed)
	}
	if n == 0 {
		return errors.New("faiss: train: no training vectors")
	}
	if err := cerr(C.rf_train(ix.ptr, C.int64_t(n), (*C.float)(&x[0]))); err != nil {
		return fmt.Errorf("faiss: train on %d vectors: %w", n, err)
	}
	return nil
}

// Add appends x, row-major [n, dim]; the vectors get ids Ntotal(),
// Ntotal()+1, ... Errors: len(x) not a multiple of Dim(), or an untrained
// index.
func (ix *Index) Add(x []float32) error {
	n, err := ix.rows("add", x)
	if err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.ptr == nil {
		return fmt.Errorf("faiss: add: %w", ErrClosed)
	}
	if C.rf_is_trained(ix.ptr) == 0 {
		return errors.New("faiss: add: index is not trained (call Train first)")
	}
	if n == 0 {
		return nil
	}
	if err := cerr(C.rf_add(ix.ptr, C.int64_t(n), (*C.float)(&x[0]))); err != nil {
		return fmt.Errorf("faiss: add %d vectors: %w", n, err)
	}
	return nil
}

// AddWithIDs appends x, row-major [n, dim], under the caller's ids (len n).
// Only indexes that store ids support it (factory "IDMap,Flat",
// "IDMap,HNSW32", IVF indexes); Flat and HNSW return faiss's error.
func (ix *Index) AddWithIDs(x []float32, ids []int64) error {
	n, err := ix.rows("add with ids", x)
	if err != nil {
		return err
	}
	if len(ids) != n {
		return fmt.Errorf("faiss: add with ids: %d vectors but %d ids", n, len(ids))
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.ptr == nil {
		return fmt.Errorf("faiss: add with ids: %w", ErrClosed)
	}
	if C.rf_is_trained(ix.ptr) == 0 {
		return errors.New("faiss: add with ids: index is not trained (call Train first)")
	}
	if n == 0 {
		return nil
	}
	if err := cerr(C.rf_add_with_ids(ix.ptr, C.int64_t(n), (*C.float)(&x[0]), (*C.int64_t)(&ids[0]))); err != nil {
		return fmt.Errorf("faiss: add %d vectors with ids: %w", n, err)
	}
	return nil
}

// Search returns the k nearest stored vectors of each query in x, row-major
// [nq, dim], as faiss does: scores and ids are row-major [nq, k], best first
// (highest inner product, or lowest squared L2 distance).
//
// As in faiss, a row with fewer than k results (k > Ntotal(), an IVF search
// whose nprobe lists hold fewer than k vectors, an HNSW search that ran out
// of candidates) is padded with id -1 (score -Inf for inner product, +Inf
// for L2 in practice, but do not rely on the score). Use SearchHits to get
// rows cut at the first -1.
//
// Errors: k < 1, len(x) not a multiple of Dim(), an untrained index.
func (ix *Index) Search(x []float32, k int) (scores []float32, ids []int64, err error) {
	nq, err := ix.rows("search", x)
	if err != nil {
		return nil, nil, err
	}
	if k < 1 {
		return nil, nil, fmt.Errorf("faiss: search: k = %d < 1", k)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.ptr == nil {
		return nil, nil, fmt.Errorf("faiss: search: %w", ErrClosed)
	}
	if C.rf_is_trained(ix.ptr) == 0 {
		return nil, nil, errors.New("faiss: search: index is not trained (call Train and Add first)")
	}
	scores = make([]float32, nq*k)
	ids = make([]int64, nq*k)
	if nq == 0 {
		return scores, ids, nil
	}
	if err := cerr(C.rf_search(ix.ptr, C.int64_t(nq), (*C.float)(&x[0]), C.int64_t(k),
		(*C.float)(&scores[0]), (*C.int64_t)(&ids[0]))); err != nil {
		return nil, nil, fmt.Errorf("faiss: search %d queries, k %d: %w", nq, k, err)
	}
	return scores, ids, nil
}

// Neighbor is one search result: a faiss id and its score (inner product or
// squared L2 distance, by the index's Metric).
type Neighbor struct {
	ID    int64
	Score float32
}

// SearchHits is Search with k clamped to Ntotal() and each query's row cut at
// its first -1 id, so no invalid id ever comes back: result[i] holds at most
// min(k, Ntotal()) neighbors of query i, best first. An empty index gives
// empty rows.
func (ix *Index) SearchHits(x []float32, k int) ([][]Neighbor, error) {
	nq, err := ix.rows("search", x)
	if err != nil {
		return nil, err
	}
	if k < 1 {
		return nil, fmt.Errorf("faiss: search: k = %d < 1", k)
	}
	total := ix.Ntotal()
	out := make([][]Neighbor, nq)
	if total == 0 {
		if !ix.IsTrained() {
			return nil, errors.New("faiss: search: index is not trained (call Train and Add first)")
		}
		return out, nil
	}
	kk := k
	if int64(kk) > total {
		kk = int(total)
	}
	scores, ids, err := ix.Search(x, kk)
	if err != nil {
		return nil, err
	}
	for q := range nq {
		row := make([]Neighbor, 0, kk)
		for j := q * kk; j < (q+1)*kk; j++ {
			if ids[j] < 0 {
				break
			}
			row = append(row, Neighbor{ID: ids[j], Score: scores[j]})
		}
		out[q] = row
	}
	return out, nil
}

// SetNprobe sets how many inverted lists an IVF index visits per query
// (faiss IndexIVF::nprobe, default 1; values above nlist act as nlist).
// It finds the IVF index under IndexPreTransform / IDMap wrappers. Errors:
// nprobe < 1 or an index without an IVF part.
func (ix *Index) SetNprobe(nprobe int) error {
	if nprobe < 1 {
		return fmt.Errorf("faiss: set nprobe: %d < 1", nprobe)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.ptr == nil {
		return fmt.Errorf("faiss: set nprobe: %w", ErrClosed)
	}
	if err := cerr(C.rf_set_nprobe(ix.ptr, C.int64_t(nprobe))); err != nil {
		return fmt.Errorf("faiss: set nprobe %d: %w", nprobe, err)
	}
	return nil
}

// SetEfSearch sets the HNSW search beam width (faiss HNSW::efSearch, default
// 16). Higher values raise recall and cost; efSearch below k is raised to k
// by faiss. Errors: ef < 1 or a non-HNSW index.
func (ix *Index) SetEfSearch(ef int) error {
	if ef < 1 {
		return fmt.Errorf("faiss: set efSearch: %d < 1", ef)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.ptr == nil {
		return fmt.Errorf("faiss: set efSearch: %w", ErrClosed)
	}
	if err := cerr(C.rf_set_ef_search(ix.ptr, C.int(ef))); err != nil {
		return fmt.Errorf("faiss: set efSearch %d: %w", ef, err)
	}
	return nil
}

// Nprobe returns the IVF index's nprobe (see SetNprobe), or 0 for an index
// without an IVF part or after Close.
func (ix *Index) Nprobe() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.ptr == nil {
		return 0
	}
	return max(0, int(C.rf_nprobe(ix.ptr)))
}

// EfSearch returns the HNSW index's efSearch (see SetEfSearch), or 0 for a
// non-HNSW index or after Close.
func (ix *Index) EfSearch() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.ptr == nil {
		return 0
	}
	return max(0, int(C.rf_ef_search(ix.ptr)))
}

// Normalize scales each row of x, row-major [n, dim], to unit L2 norm in
// place (faiss.normalize_L2), so that inner product equals cosine
// similarity. All-zero rows are left as they are. Errors: dim < 1 or len(x)
// not a multiple of dim.
func Normalize(x []float32, dim int) error {
	if dim < 1 {
		return fmt.Errorf("faiss: normalize: dimension %d < 1", dim)
	}
	if len(x)%dim != 0 {
		return fmt.Errorf("faiss: normalize: len(x) = %d is not a multiple of dimension %d", len(x), dim)
	}
	for i := 0; i < len(x); i += dim {
		row := x[i : i+dim]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		if ss == 0 {
			continue
		}
		inv := 1 / math.Sqrt(ss)
		for j := range row {
			row[j] = float32(float64(row[j]) * inv)
		}
	}
	return nil
}
