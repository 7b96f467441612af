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
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
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
	// MetaFields names Chunk.Meta fields (string values, e.g. the AP
	// corpus's "title" and "keywords") indexed with each chunk: their values,
	// in this order and space-separated, precede Chunk.Text in the analyzed
	// text, so a chunk from the middle of a document still matches the
	// document's title, as Elasticsearch's multi_match over title and text
	// or Haystack's meta_fields_to_embed do. They count in the chunk's
	// length dl; Doc and hits return Chunk.Text unchanged. A chunk without
	// the field indexes its text alone. Empty: the text alone (the default).
	MetaFields []string `json:"meta_fields,omitempty"`
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

// Equal reports whether c and o hold the same values (a nil and an empty
// MetaFields are equal).
func (c Config) Equal(o Config) bool {
	return c.K1 == o.K1 && c.B == o.B && c.Analyzer == o.Analyzer && slices.Equal(c.MetaFields, o.MetaFields)
}

// IsZero reports whether c is the zero Config, which callers read as
// "not set" (DefaultConfig then applies).
func (c Config) IsZero() bool { return c.Equal(Config{}) }

// Validate reports the first invalid field.
// MaxK1 is the largest k1 Validate accepts.
const MaxK1 = 100

func (c Config) Validate() error {
	c = c.withDefaults()
	// k1 saturates term frequency; published settings lie in [0.5, 3]
	// and past 100 the score is raw term frequency to within 1%.
	if math.IsNaN(c.K1) || c.K1 < 0 || c.K1 > MaxK1 {
		return fmt.Errorf("bm25 config: field %q: %v is not in [0, %v]", "K1", c.K1, MaxK1)
	}
	if math.IsNaN(c.B) || c.B < 0 || c.B > 1 {
		return fmt.Errorf("bm25 config: field %q: %v is not in [0, 1]", "B", c.B)
	}
	if _, ok := analyzers[c.Analyzer]; !ok {
		return fmt.Errorf("bm25 config: field %q: unknown analyzer %q (have %v)", "Analyzer", c.Analyzer, Analyzers())
	}
	for i, f := range c.MetaFields {
		if strings.TrimSpace(f) == "" {
			return fmt.Errorf("bm25 config: field %q: entry %d is empty", "MetaFields", i)
		}
		if slices.Contains(c.MetaFields[:i], f) {
			return fmt.Errorf("bm25 config: field %q: %q repeats", "MetaFields", f)
		}
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
	// Shards is the number of shard indexes (ShardDir); 0: the directory
	// is one index.
	Shards int `json:"shards,omitempty"`
}

type storedChunk struct {
	// Text is Chunk.Text when the analyzed (and stored) fieldText holds
	// more: the Config.MetaFields values before it.
	Text  string         `json:"text,omitempty"`
	DocID string         `json:"doc_id"`
	Index int            `json:"index"`
	Start int            `json:"start"`
	End   int            `json:"end"`
	Meta  map[string]any `json:"meta,omitempty"`
}

// Index is a BM25 index over chunks. It implements retrieval.Retriever.
// Search, SearchBleve, Doc and Count are safe for concurrent use.
type Index struct {
	idx      bleve.Index   // the one shard, or an IndexAlias over them
	shards   []bleve.Index // scorch indexes, one per shard
	meta     meta
	analyzer analysis.Analyzer
}

var _ retrieval.Retriever = (*Index)(nil)

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

// Shards returns the number of bleve indexes searched as one (1 when
// unsharded).
func (ix *Index) Shards() int { return len(ix.shards) }

// Close releases the index and its shards.
func (ix *Index) Close() error {
	var errs []error
	for _, s := range ix.shards {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// Doc returns the stored chunk with the given ID, and whether it was found
// (a read or decoding error also reports false). Meta values come back as
// decoded from JSON (numbers as float64).
func (ix *Index) Doc(id string) (data.Chunk, bool) {
	var d index.Document
	for _, s := range ix.shards {
		if got, err := s.Document(id); err == nil && got != nil {
			d = got
			break
		}
	}
	if d == nil {
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
	if sc.Text != "" {
		c.Text = sc.Text
	}
	return c, true
}
