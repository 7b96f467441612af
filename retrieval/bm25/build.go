package bm25

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/ragforge/ragforge/data"
)

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
	if err := checkMetaFields(chunks, cfg.MetaFields); err != nil {
		return nil, err
	}
	for lo := 0; lo < len(chunks); lo += BatchSize {
		hi := min(lo+BatchSize, len(chunks))
		b := bi.NewBatch()
		for i := lo; i < hi; i++ {
			c := chunks[i]
			text, err := indexText(c, cfg.MetaFields)
			if err != nil {
				return nil, fmt.Errorf("chunk %d (%s): %w", i, c.ID, err)
			}
			st := storedChunk{DocID: c.DocID, Index: c.Index, Start: c.Start, End: c.End, Meta: c.Meta}
			if text != c.Text {
				st.Text = c.Text
			}
			sc, err := json.Marshal(st)
			if err != nil {
				return nil, fmt.Errorf("chunk %d (%s): field %q: %w", i, c.ID, "Meta", err)
			}
			if err := b.Index(c.ID, map[string]any{fieldText: text, fieldChunk: string(sc)}); err != nil {
				return nil, fmt.Errorf("chunk %d (%s): %w", i, c.ID, err)
			}
			// Same count bleve stores as the field length (TextField.AnalyzedLength).
			ix.meta.Tokens += int64(len(a.Analyze([]byte(text))))
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

// indexText is the text fill analyzes for c: the string values of its
// metaFields (Config.MetaFields) that c has, then c.Text, space-separated.
// Errors: a field whose value is not a string.
func indexText(c data.Chunk, metaFields []string) (string, error) {
	if len(metaFields) == 0 {
		return c.Text, nil
	}
	parts := make([]string, 0, len(metaFields)+1)
	for _, f := range metaFields {
		v, ok := c.Meta[f]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("meta field %q: want a string, got %T", f, v)
		}
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(append(parts, c.Text), " "), nil
}

// checkMetaFields refuses a meta field that no chunk has: a misspelt name
// would otherwise index the text alone without a word.
func checkMetaFields(chunks []data.Chunk, metaFields []string) error {
	if len(chunks) == 0 {
		return nil
	}
	for _, f := range metaFields {
		found := false
		for _, c := range chunks {
			if _, ok := c.Meta[f]; ok {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("meta field %q: no chunk has it (chunk %s has %v)", f, chunks[0].ID, slices.Sorted(maps.Keys(chunks[0].Meta)))
		}
	}
	return nil
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
