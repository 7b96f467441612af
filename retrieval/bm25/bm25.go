// Package bm25 is ragforge's lexical retriever: Okapi BM25 over chunks, with
// bleve v2 (github.com/blevesearch/bleve/v2) as the inverted index and a
// biomedical analyzer ("biomed") that keeps tokens such as "HER2+",
// "BI-RADS", "70%" and "≥10" whole.
//
// # Scoring
//
// Search scores with the Lucene/Elasticsearch BM25 formula (Robertson et al.,
// Lucene ≥ 4 BM25Similarity with exact document lengths):
//
//	score(q, d) = Σ_{t ∈ q} idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))
//	idf(t)      = ln(1 + (N − n + 0.5)/(n + 0.5))
//
// where tf is the count of t in d, dl the number of terms of d after analysis,
// avgdl the mean dl over the index, N the number of chunks and n the number
// of chunks holding t. A term repeated in the query counts once per
// occurrence (as a Lucene BooleanQuery with repeated SHOULD clauses, and as
// rank_bm25). Unlike Lucene, dl is exact (Lucene quantizes it to one byte),
// and the (k1+1) factor is kept (Lucene ≥ 8 drops it; that only rescales).
//
// The postings, document frequencies and lengths come from bleve's index; the
// scores are computed by this package, because bleve's own "bm25" scoring
// model cannot be configured and is not this formula. bleve v2.6.3
// (search/scorer/scorer_term.go, search/searcher/search_term.go) scores a
// term as idf · √f·k1 / (√f + k1·(1 − b + b·dl/A)) with k1 = 1.2 and b = 0.75
// fixed in the process-wide variables search.BM25_k1 and search.BM25_b, where
// f is the term count (bleve takes its square root), and A =
// ceil(Σ_segments vocabulary size / N), a vocabulary count rather than the
// mean length. A query of several terms then multiplies each term's score by
// idf·queryNorm (queryNorm = 1/√Σ idf²) and the sum by the coordination
// factor matched/total terms. SearchBleve exposes that scoring unchanged, for
// comparison; the index mapping selects bleve's "bm25" scoring model so that
// other bleve clients opening the directory see it too.
package bm25

import (
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
)

// Config holds the BM25 parameters and the analyzer. They are stored in the
// index directory (ragforge.json) by Build and read back by Open.
type Config struct {
	// K1 is the term-frequency saturation, ≥ 0 (0 scores term presence only).
	K1 float64 `json:"k1"`
	// B is the document-length normalization, in [0, 1] (0: none).
	B float64 `json:"b"`
	// Analyzer names the analyzer for chunk and query text, one of
	// Analyzers(): "biomed" (the default when empty), "pt", "en", "cjk",
	// "standard".
	Analyzer string `json:"analyzer"`
}

// DefaultConfig is ragforge's default: k1 = 1.2, b = 0.75 (Lucene,
// Elasticsearch and bleve defaults) with the "biomed" analyzer.
func DefaultConfig() Config { return Config{K1: 1.2, B: 0.75, Analyzer: BiomedAnalyzer} }

// RankBM25Config reproduces the parameters of LangChain's BM25Retriever, which
// uses rank_bm25's BM25Okapi defaults k1 = 1.5, b = 0.75 (the AP RAG paper's
// lexical retriever), with the "biomed" analyzer. rank_bm25 itself uses
// idf = ln((N − n + 0.5)/(n + 0.5)) floored at 0.25·mean idf and splits on
// whitespace, so scores match it only in k1 and b, not exactly.
func RankBM25Config() Config { return Config{K1: 1.5, B: 0.75, Analyzer: BiomedAnalyzer} }

func (c Config) withDefaults() Config {
	if c.Analyzer == "" {
		c.Analyzer = BiomedAnalyzer
	}
	return c
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	c = c.withDefaults()
	if math.IsNaN(c.K1) || math.IsInf(c.K1, 0) || c.K1 < 0 {
		return fmt.Errorf("bm25 config: field %q: %v is not a finite value ≥ 0", "K1", c.K1)
	}
	if math.IsNaN(c.B) || c.B < 0 || c.B > 1 {
		return fmt.Errorf("bm25 config: field %q: %v is not in [0, 1]", "B", c.B)
	}
	if _, ok := analyzers[c.Analyzer]; !ok {
		return fmt.Errorf("bm25 config: field %q: unknown analyzer %q (have %v)", "Analyzer", c.Analyzer, Analyzers())
	}
	return nil
}

// MetaFile is the file, inside an index directory, that holds the Config and
// the corpus statistics.
const MetaFile = "ragforge.json"

// metaFormat identifies MetaFile's layout and the analyzers' behaviour:
// version 2 added NFC normalization to every analyzer and stop words to
// "biomed", so a version 1 index would be queried with other terms than it
// was built with; Open refuses it (rebuild the index).
const metaFormat = "ragforge-bm25/2"

// Index field names.
const (
	fieldText  = "text"  // analyzed, stored: Chunk.Text
	fieldChunk = "chunk" // stored only: JSON of the other Chunk fields
)

// BatchSize is the number of chunks Build indexes per bleve batch, and so the
// progress callback's granularity.
const BatchSize = 1000

type meta struct {
	Format string `json:"format"`
	Config
	Docs   int   `json:"docs"`   // N
	Tokens int64 `json:"tokens"` // Σ dl
}

type storedChunk struct {
	DocID string         `json:"doc_id"`
	Index int            `json:"index"`
	Start int            `json:"start"`
	End   int            `json:"end"`
	Meta  map[string]any `json:"meta,omitempty"`
}

// Index is a BM25 index over chunks. It implements retrieval.Retriever.
// Search, SearchBleve, Doc and Count are safe for concurrent use.
type Index struct {
	idx      bleve.Index
	meta     meta
	analyzer analysis.Analyzer
}

var _ retrieval.Retriever = (*Index)(nil)

func newMapping(analyzer string) *mapping.IndexMappingImpl {
	text := bleve.NewTextFieldMapping()
	text.Analyzer = analyzer
	text.Store = true
	text.IncludeTermVectors = false
	text.IncludeInAll = false
	text.DocValues = false

	stored := bleve.NewTextFieldMapping()
	stored.Index = false
	stored.Store = true
	stored.IncludeTermVectors = false
	stored.IncludeInAll = false
	stored.DocValues = false

	doc := bleve.NewDocumentStaticMapping()
	doc.AddFieldMappingsAt(fieldText, text)
	doc.AddFieldMappingsAt(fieldChunk, stored)

	m := bleve.NewIndexMapping()
	m.DefaultMapping = doc
	m.DefaultAnalyzer = analyzer
	m.ScoringModel = index.BM25Scoring
	m.IndexDynamic = false
	m.StoreDynamic = false
	m.DocValuesDynamic = false
	return m
}

// Build indexes chunks into a new persistent index at dir (which must not
// exist) and writes the Config and statistics to dir/ragforge.json. Chunks are
// indexed in batches of BatchSize; progress, when not nil, is called after each
// batch with the number of chunks indexed so far and len(chunks).
//
// Errors: invalid cfg, an empty or repeated Chunk.ID (naming the chunk's
// position), an existing dir, or an I/O error from bleve. On error the
// partially written dir is removed.
func Build(dir string, chunks []data.Chunk, cfg Config, progress func(done, total int)) (*Index, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bm25 build %s: %w", dir, err)
	}
	if err := checkIDs(chunks); err != nil {
		return nil, fmt.Errorf("bm25 build %s: %w", dir, err)
	}
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("bm25 build %s: already exists", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("bm25 build %s: %w", dir, err)
	}
	bi, err := bleve.NewUsing(dir, newMapping(bleveName(cfg.Analyzer)), scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("bm25 build %s: %w", dir, err)
	}
	ix, err := fill(bi, chunks, cfg, progress)
	if err == nil {
		err = writeMeta(dir, ix.meta)
	}
	if err != nil {
		_ = bi.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("bm25 build %s: %w", dir, err)
	}
	return ix, nil
}

// NewMemory indexes chunks into an in-memory scorch index (nothing is written
// to disk), as Build does.
func NewMemory(chunks []data.Chunk, cfg Config) (*Index, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bm25 memory index: %w", err)
	}
	if err := checkIDs(chunks); err != nil {
		return nil, fmt.Errorf("bm25 memory index: %w", err)
	}
	// Not bleve.NewMemOnly: its upsidedown index has no BM25 statistics and
	// bleve silently falls back to TF-IDF there.
	bi, err := bleve.NewUsing("", newMapping(bleveName(cfg.Analyzer)), scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("bm25 memory index: %w", err)
	}
	ix, err := fill(bi, chunks, cfg, nil)
	if err != nil {
		_ = bi.Close()
		return nil, fmt.Errorf("bm25 memory index: %w", err)
	}
	return ix, nil
}

func checkIDs(chunks []data.Chunk) error {
	seen := make(map[string]int, len(chunks))
	for i, c := range chunks {
		if c.ID == "" {
			return fmt.Errorf("chunk %d: field %q: empty", i, "ID")
		}
		if j, dup := seen[c.ID]; dup {
			return fmt.Errorf("chunk %d: field %q: %q repeats chunk %d", i, "ID", c.ID, j)
		}
		seen[c.ID] = i
	}
	return nil
}

func fill(bi bleve.Index, chunks []data.Chunk, cfg Config, progress func(done, total int)) (*Index, error) {
	a := bi.Mapping().AnalyzerNamed(bleveName(cfg.Analyzer))
	if a == nil {
		return nil, fmt.Errorf("analyzer %q: not registered", cfg.Analyzer)
	}
	ix := &Index{idx: bi, analyzer: a, meta: meta{Format: metaFormat, Config: cfg, Docs: len(chunks)}}
	for lo := 0; lo < len(chunks); lo += BatchSize {
		hi := min(lo+BatchSize, len(chunks))
		b := bi.NewBatch()
		for i := lo; i < hi; i++ {
			c := chunks[i]
			sc, err := json.Marshal(storedChunk{DocID: c.DocID, Index: c.Index, Start: c.Start, End: c.End, Meta: c.Meta})
			if err != nil {
				return nil, fmt.Errorf("chunk %d (%s): field %q: %w", i, c.ID, "Meta", err)
			}
			if err := b.Index(c.ID, map[string]any{fieldText: c.Text, fieldChunk: string(sc)}); err != nil {
				return nil, fmt.Errorf("chunk %d (%s): %w", i, c.ID, err)
			}
			// Same count bleve stores as the field length (TextField.AnalyzedLength).
			ix.meta.Tokens += int64(len(a.Analyze([]byte(c.Text))))
		}
		if err := bi.Batch(b); err != nil {
			return nil, fmt.Errorf("chunks %d-%d: %w", lo, hi-1, err)
		}
		if progress != nil {
			progress(hi, len(chunks))
		}
	}
	n, err := bi.DocCount()
	if err != nil {
		return nil, err
	}
	if int(n) != len(chunks) {
		return nil, fmt.Errorf("indexed %d chunks, bleve holds %d", len(chunks), n)
	}
	return ix, nil
}

func writeMeta(dir string, m meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, MetaFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, MetaFile))
}

// Open opens, read-only, an index written by Build, with the Config stored in
// it. Errors: a missing or malformed ragforge.json (naming the field), a bleve
// error, or a chunk count that disagrees with ragforge.json.
func Open(dir string) (*Index, error) {
	path := filepath.Join(dir, MetaFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bm25 open %s: %w", dir, err)
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("bm25 open %s: %w", path, err)
	}
	if m.Format != metaFormat {
		return nil, fmt.Errorf("bm25 open %s: field %q: %q, want %q", path, "format", m.Format, metaFormat)
	}
	if err := m.Config.Validate(); err != nil {
		return nil, fmt.Errorf("bm25 open %s: %w", path, err)
	}
	if m.Docs < 0 || m.Tokens < 0 {
		return nil, fmt.Errorf("bm25 open %s: fields %q/%q: negative (%d, %d)", path, "docs", "tokens", m.Docs, m.Tokens)
	}
	bi, err := bleve.OpenUsing(dir, map[string]interface{}{"read_only": true})
	if err != nil {
		return nil, fmt.Errorf("bm25 open %s: %w", dir, err)
	}
	a := bi.Mapping().AnalyzerNamed(bleveName(m.Analyzer))
	n, err := bi.DocCount()
	switch {
	case err != nil:
	case a == nil:
		err = fmt.Errorf("analyzer %q: not registered", m.Analyzer)
	case int(n) != m.Docs:
		err = fmt.Errorf("%s: field %q: %d, but the index holds %d chunks", path, "docs", m.Docs, n)
	}
	if err != nil {
		_ = bi.Close()
		return nil, fmt.Errorf("bm25 open %s: %w", dir, err)
	}
	return &Index{idx: bi, meta: m, analyzer: a}, nil
}

// Config returns the index's configuration.
func (ix *Index) Config() Config { return ix.meta.Config }

// Count returns the number of chunks indexed (N).
func (ix *Index) Count() int { return ix.meta.Docs }

// AvgDocLen returns avgdl, the mean number of analyzed terms per chunk (0 for
// an empty index).
func (ix *Index) AvgDocLen() float64 {
	if ix.meta.Docs == 0 {
		return 0
	}
	return float64(ix.meta.Tokens) / float64(ix.meta.Docs)
}

// Close releases the index.
func (ix *Index) Close() error { return ix.idx.Close() }

// ErrBadK is returned (wrapped) by Search and SearchBleve for k ≤ 0.
var ErrBadK = errors.New("k must be > 0")

// Search returns the top-k chunks for query by BM25 (see the package
// documentation), best first. The query is analyzed with the index's analyzer
// and its terms are OR-ed: a chunk matching any term is a candidate. Equal
// scores are ordered by chunk ID. It returns at most k hits, fewer when fewer
// chunks match; a query with no terms after analysis (empty, blank, only
// punctuation or stop words) returns an empty slice and no error.
// Errors: k ≤ 0 (ErrBadK), or a bleve read error.
func (ix *Index) Search(query string, k int) ([]retrieval.Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("bm25 search: k=%d: %w", k, ErrBadK)
	}
	qtf := map[string]int{}
	var order []string
	for _, t := range ix.analyzer.Analyze([]byte(query)) {
		if qtf[string(t.Term)] == 0 {
			order = append(order, string(t.Term))
		}
		qtf[string(t.Term)]++
	}
	hits := []retrieval.Hit{}
	if len(order) == 0 || ix.meta.Docs == 0 {
		return hits, nil
	}
	sort.Strings(order) // fixed summation order, so equal inputs give equal floats

	adv, err := ix.idx.Advanced()
	if err != nil {
		return nil, fmt.Errorf("bm25 search: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, fmt.Errorf("bm25 search: %w", err)
	}
	defer r.Close()

	N := float64(ix.meta.Docs)
	avgdl := ix.AvgDocLen()
	k1, b := ix.meta.K1, ix.meta.B
	acc := accPool.Get().(*accumulator)
	defer acc.release()
	var tfd index.TermFieldDoc
	for _, term := range order {
		tfr, err := r.TermFieldReader(context.Background(), []byte(term), fieldText, true, true, false)
		if err != nil {
			return nil, fmt.Errorf("bm25 search: term %q: %w", term, err)
		}
		n := float64(tfr.Count())
		idf := math.Log(1 + (N-n+0.5)/(n+0.5))
		w := float64(qtf[term]) * idf
		for {
			d, err := tfr.Next(tfd.Reset())
			if err != nil {
				_ = tfr.Close()
				return nil, fmt.Errorf("bm25 search: term %q: %w", term, err)
			}
			if d == nil {
				break
			}
			// scorch internal ids are 8-byte big-endian document numbers
			// below the snapshot's document total.
			if len(d.ID) != 8 || binary.BigEndian.Uint64(d.ID) >= maxDocNum {
				_ = tfr.Close()
				return nil, fmt.Errorf("bm25 search: term %q: internal id %x: not a scorch document number", term, []byte(d.ID))
			}
			tf := float64(d.Freq)
			// bleve stores norm = float32(1/√dl) (zapx); dl is an integer.
			dl := math.Round(1 / (d.Norm * d.Norm))
			acc.add(binary.BigEndian.Uint64(d.ID), w*tf*(k1+1)/(tf+k1*(1-b+b*dl/avgdl)))
		}
		if err := tfr.Close(); err != nil {
			return nil, fmt.Errorf("bm25 search: term %q: %w", term, err)
		}
	}

	cs := acc.top(k)
	for i := range cs {
		ext, err := r.ExternalID(binary.BigEndian.AppendUint64(nil, cs[i].id))
		if err != nil {
			return nil, fmt.Errorf("bm25 search: %w", err)
		}
		cs[i].ext = ext
	}
	// Order ties by external id.
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].score != cs[j].score {
			return cs[i].score > cs[j].score
		}
		return cs[i].ext < cs[j].ext
	})
	if len(cs) > k {
		cs = cs[:k]
	}
	for _, c := range cs {
		hits = append(hits, retrieval.Hit{ID: c.ext, Score: c.score})
	}
	return hits, nil
}

// SearchBleve runs the same OR-ed match query through bleve's own "bm25"
// scoring (k1 = 1.2, b = 0.75 whatever the Config, √tf, vocabulary-based
// average length, query norm and coordination factor; see the package
// documentation) and returns at most k hits, best first. It exists to compare
// with Search; a query with no terms returns an empty slice.
// Errors: k ≤ 0 (ErrBadK), or a bleve search error.
func (ix *Index) SearchBleve(query string, k int) ([]retrieval.Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("bm25 bleve search: k=%d: %w", k, ErrBadK)
	}
	hits := []retrieval.Hit{}
	if len(ix.analyzer.Analyze([]byte(query))) == 0 {
		return hits, nil
	}
	q := bleve.NewMatchQuery(query)
	q.SetField(fieldText)
	q.Analyzer = bleveName(ix.meta.Analyzer)
	req := bleve.NewSearchRequestOptions(q, k, 0, false)
	res, err := ix.idx.Search(req)
	if err != nil {
		return nil, fmt.Errorf("bm25 bleve search: %w", err)
	}
	for _, h := range res.Hits {
		hits = append(hits, retrieval.Hit{ID: h.ID, Score: h.Score})
	}
	return hits, nil
}

// Doc returns the stored chunk with the given ID, and whether it was found
// (a read or decoding error also reports false). Meta values come back as
// decoded from JSON (numbers as float64).
func (ix *Index) Doc(id string) (data.Chunk, bool) {
	d, err := ix.idx.Document(id)
	if err != nil || d == nil {
		return data.Chunk{}, false
	}
	c := data.Chunk{ID: id}
	var sc storedChunk
	ok := true
	d.VisitFields(func(f index.Field) {
		switch f.Name() {
		case fieldText:
			c.Text = string(f.Value())
		case fieldChunk:
			if err := json.Unmarshal(f.Value(), &sc); err != nil {
				ok = false
			}
		}
	})
	if !ok {
		return data.Chunk{}, false
	}
	c.DocID, c.Index, c.Start, c.End, c.Meta = sc.DocID, sc.Index, sc.Start, sc.End, sc.Meta
	return c, true
}

// maxDocNum bounds the scorch document numbers Search accepts (and so the
// accumulator's size).
const maxDocNum = 1 << 31

type cand struct {
	id    uint64 // scorch document number
	ext   string // external id (Chunk.ID), filled for the returned candidates
	score float64
}

// accumulator sums per-document scores in a dense slice indexed by scorch
// document number. BM25 contributions are > 0, so a zero score means "not
// seen"; touched lists the documents seen, for top and for resetting.
type accumulator struct {
	scores  []float64
	touched []uint64
	heap    candHeap
}

var accPool = sync.Pool{New: func() any { return new(accumulator) }}

func (a *accumulator) add(id uint64, v float64) {
	if id >= uint64(len(a.scores)) {
		a.scores = append(a.scores, make([]float64, int(id)+1-len(a.scores))...)
	}
	if a.scores[id] == 0 {
		a.touched = append(a.touched, id)
	}
	a.scores[id] += v
}

// top returns the k best candidates and every candidate tied with the k-th,
// in no particular order. It costs O(n log k) for n candidates.
func (a *accumulator) top(k int) []cand {
	h := a.heap[:0]
	for _, id := range a.touched {
		s := a.scores[id]
		if len(h) < k {
			heap.Push(&h, cand{id: id, score: s})
		} else if s > h[0].score {
			h[0] = cand{id: id, score: s}
			heap.Fix(&h, 0)
		}
	}
	a.heap = h
	if len(h) == 0 {
		return nil
	}
	kth := h[0].score
	cs := make([]cand, 0, len(h))
	for _, id := range a.touched {
		if s := a.scores[id]; s >= kth {
			cs = append(cs, cand{id: id, score: s})
		}
	}
	return cs
}

func (a *accumulator) release() {
	for _, id := range a.touched {
		a.scores[id] = 0
	}
	a.touched = a.touched[:0]
	a.heap = a.heap[:0]
	accPool.Put(a)
}

// candHeap is a min-heap on score.
type candHeap []cand

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return h[i].score < h[j].score }
func (h candHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
