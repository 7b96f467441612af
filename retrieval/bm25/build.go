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
	"github.com/blevesearch/bleve/v2/analysis"
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
// batch with the number of chunks indexed so far and len(chunks). It is
// BuildStream over chunks with one shard.
//
// Errors: invalid cfg, an empty or repeated Chunk.ID (naming the chunk's
// position), an existing dir, or an I/O error from bleve. On error the
// partially written dir is removed.
func Build(dir string, chunks []data.Chunk, cfg Config, progress func(done, total int)) (*Index, error) {
	walk := func(yield func(data.Chunk) error) error {
		for _, c := range chunks {
			if err := yield(c); err != nil {
				return err
			}
		}
		return nil
	}
	var prog func(int)
	if progress != nil {
		prog = func(done int) { progress(done, len(chunks)) }
	}
	return BuildStream(dir, walk, cfg, 0, prog)
}

// ShardDir is the directory of shard k inside a sharded index directory.
func ShardDir(dir string, k int) string { return filepath.Join(dir, fmt.Sprintf("shard-%04d", k)) }

// BuildStream indexes the chunks walk yields (chunk.Walk's shape), as they
// come, into a new persistent index at dir (which must not exist), in bleve
// batches of BatchSize. With shardSize > 0 the index is sharded: every
// shardSize chunks go to a scorch index of their own (ShardDir(dir, k)),
// closed when full, so building holds one shard's segments in memory whatever
// the corpus size; Open searches the shards as one (a bleve IndexAlias, with
// BM25 statistics N, avgdl and document frequencies summed over all shards,
// so scores equal a single index's). shardSize 0 builds one unsharded index
// (Build's layout). The returned Index is dir opened read-only. progress,
// when non-nil, receives the chunks indexed after every batch.
//
// Errors: invalid cfg, shardSize < 0, an empty or repeated Chunk.ID (naming
// the chunk's position; ids seen are kept to check it), a Config.MetaFields
// field no chunk has, an existing dir, walk's errors, I/O errors from bleve.
// On error the partially written dir is removed.
func BuildStream(dir string, walk func(yield func(data.Chunk) error) error, cfg Config, shardSize int, progress func(done int)) (*Index, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bm25 build %s: %w", dir, err)
	}
	if shardSize < 0 {
		return nil, fmt.Errorf("bm25 build %s: shard size %d: want ≥ 0 (0: one index)", dir, shardSize)
	}
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("bm25 build %s: already exists", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("bm25 build %s: %w", dir, err)
	}
	b := &builder{dir: dir, cfg: cfg, shardSize: shardSize, seen: map[string]int{}, progress: progress}
	err := walk(b.add)
	if err == nil {
		err = b.finish()
	}
	if err != nil {
		if b.cur != nil {
			_ = b.cur.bi.Close()
		}
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("bm25 build %s: %w", dir, err)
	}
	ix, err := Open(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return ix, nil
}

// builder is BuildStream's state: the shard being filled and the totals.
type builder struct {
	dir       string
	cfg       Config
	shardSize int
	progress  func(int)
	seen      map[string]int
	cur       *filler // the open shard; nil between shards
	shards    int
	m         meta
	metaFound []bool
	first     data.Chunk // for the missing-meta-field error
}

func (b *builder) add(c data.Chunk) error {
	i := b.m.Docs
	if c.ID == "" {
		return fmt.Errorf("chunk %d: field %q: empty", i, "ID")
	}
	if j, dup := b.seen[c.ID]; dup {
		return fmt.Errorf("chunk %d: field %q: %q repeats chunk %d", i, "ID", c.ID, j)
	}
	b.seen[c.ID] = i
	if i == 0 {
		b.first, b.metaFound = c, make([]bool, len(b.cfg.MetaFields))
	}
	for k, f := range b.cfg.MetaFields {
		if _, ok := c.Meta[f]; ok {
			b.metaFound[k] = true
		}
	}
	if b.cur == nil {
		if err := b.open(); err != nil {
			return err
		}
	}
	if err := b.cur.add(i, c); err != nil {
		return err
	}
	b.m.Docs++
	if b.cur.pending == BatchSize {
		if err := b.cur.flush(); err != nil {
			return err
		}
		if b.progress != nil {
			b.progress(b.m.Docs)
		}
	}
	if b.shardSize > 0 && b.cur.docs == b.shardSize {
		return b.closeShard()
	}
	return nil
}

func (b *builder) open() error {
	path := b.dir
	if b.shardSize > 0 {
		path = ShardDir(b.dir, b.shards)
	}
	bi, err := bleve.NewUsing(path, newMapping(bleveName(b.cfg.Analyzer)), scorch.Name, scorch.Name, nil)
	if err != nil {
		return err
	}
	f, err := newFiller(bi, b.cfg)
	if err != nil {
		_ = bi.Close()
		return err
	}
	b.cur = f
	return nil
}

func (b *builder) closeShard() error {
	f := b.cur
	if err := f.finish(); err != nil {
		return err
	}
	b.m.Tokens += f.tokens
	b.cur = nil
	if b.shardSize > 0 {
		b.shards++
	}
	if b.progress != nil {
		b.progress(b.m.Docs)
	}
	return f.bi.Close()
}

func (b *builder) finish() error {
	if b.cur == nil && (b.shardSize == 0 || b.shards == 0) {
		if err := b.open(); err != nil { // an empty corpus: an empty index
			return err
		}
	}
	if b.cur != nil {
		if err := b.closeShard(); err != nil {
			return err
		}
	}
	for k, f := range b.cfg.MetaFields {
		if b.m.Docs > 0 && !b.metaFound[k] {
			return fmt.Errorf("meta field %q: no chunk has it (chunk %s has %v)", f, b.first.ID, slices.Sorted(maps.Keys(b.first.Meta)))
		}
	}
	b.m.Format, b.m.Config, b.m.Shards = metaFormat, b.cfg, b.shards
	return writeMeta(b.dir, b.m)
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
	ix, err := fill(bi, chunks, cfg)
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

func fill(bi bleve.Index, chunks []data.Chunk, cfg Config) (*Index, error) {
	if err := checkMetaFields(chunks, cfg.MetaFields); err != nil {
		return nil, err
	}
	f, err := newFiller(bi, cfg)
	if err != nil {
		return nil, err
	}
	for i, c := range chunks {
		if err := f.add(i, c); err != nil {
			return nil, err
		}
		if f.pending == BatchSize {
			if err := f.flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := f.finish(); err != nil {
		return nil, err
	}
	m := meta{Format: metaFormat, Config: cfg, Docs: f.docs, Tokens: f.tokens}
	return &Index{idx: bi, shards: []bleve.Index{bi}, analyzer: f.a, meta: m}, nil
}

// filler indexes chunks into one bleve index in batches of BatchSize.
type filler struct {
	bi      bleve.Index
	a       analysis.Analyzer
	cfg     Config
	b       *bleve.Batch
	pending int   // chunks in b
	first   int   // position of b's first chunk, for errors
	docs    int   // chunks added
	tokens  int64 // Σ dl
}

func newFiller(bi bleve.Index, cfg Config) (*filler, error) {
	a := bi.Mapping().AnalyzerNamed(bleveName(cfg.Analyzer))
	if a == nil {
		return nil, fmt.Errorf("analyzer %q: not registered", cfg.Analyzer)
	}
	return &filler{bi: bi, a: a, cfg: cfg, b: bi.NewBatch()}, nil
}

// add puts chunk c (at position i of the corpus, for errors) in the batch.
func (f *filler) add(i int, c data.Chunk) error {
	text, err := indexText(c, f.cfg.MetaFields)
	if err != nil {
		return fmt.Errorf("chunk %d (%s): %w", i, c.ID, err)
	}
	st := storedChunk{DocID: c.DocID, Index: c.Index, Start: c.Start, End: c.End, Meta: c.Meta}
	if text != c.Text {
		st.Text = c.Text
	}
	sc, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("chunk %d (%s): field %q: %w", i, c.ID, "Meta", err)
	}
	if f.pending == 0 {
		f.first = i
	}
	if err := f.b.Index(c.ID, map[string]any{fieldText: text, fieldChunk: string(sc)}); err != nil {
		return fmt.Errorf("chunk %d (%s): %w", i, c.ID, err)
	}
	// Same count bleve stores as the field length (TextField.AnalyzedLength).
	f.tokens += int64(len(f.a.Analyze([]byte(text))))
	f.pending++
	f.docs++
	return nil
}

func (f *filler) flush() error {
	if f.pending == 0 {
		return nil
	}
	if err := f.bi.Batch(f.b); err != nil {
		return fmt.Errorf("chunks %d-%d: %w", f.first, f.first+f.pending-1, err)
	}
	f.b.Reset()
	f.pending = 0
	return nil
}

// finish flushes the batch and checks bleve's document count.
func (f *filler) finish() error {
	if err := f.flush(); err != nil {
		return err
	}
	n, err := f.bi.DocCount()
	if err != nil {
		return err
	}
	if int(n) != f.docs {
		return fmt.Errorf("indexed %d chunks, bleve holds %d", f.docs, n)
	}
	return nil
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

// Open opens, read-only, an index written by Build or BuildStream, with the
// Config stored in it; a sharded index's shards are opened and searched as
// one through a bleve IndexAlias. Errors: a missing or malformed
// ragforge.json (naming the field), a bleve error naming the shard, or a
// chunk count that disagrees with ragforge.json.
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
	if m.Docs < 0 || m.Tokens < 0 || m.Shards < 0 {
		return nil, fmt.Errorf("bm25 open %s: fields %q/%q/%q: negative (%d, %d, %d)", path, "docs", "tokens", "shards", m.Docs, m.Tokens, m.Shards)
	}
	ix := &Index{meta: m}
	dirs := []string{dir}
	if m.Shards > 0 {
		dirs = dirs[:0]
		for k := range m.Shards {
			dirs = append(dirs, ShardDir(dir, k))
		}
	}
	n := uint64(0)
	for _, d := range dirs {
		bi, err := bleve.OpenUsing(d, map[string]interface{}{"read_only": true})
		if err == nil {
			ix.shards = append(ix.shards, bi)
			var c uint64
			c, err = bi.DocCount()
			n += c
		}
		if err != nil {
			ix.Close()
			return nil, fmt.Errorf("bm25 open %s: %w", d, err)
		}
	}
	ix.idx = ix.shards[0]
	if len(ix.shards) > 1 {
		ix.idx = bleve.NewIndexAlias(ix.shards...)
	}
	ix.analyzer = ix.shards[0].Mapping().AnalyzerNamed(bleveName(m.Analyzer))
	switch {
	case ix.analyzer == nil:
		err = fmt.Errorf("analyzer %q: not registered", m.Analyzer)
	case int(n) != m.Docs:
		err = fmt.Errorf("%s: field %q: %d, but the index holds %d chunks", path, "docs", m.Docs, n)
	}
	if err != nil {
		ix.Close()
		return nil, fmt.Errorf("bm25 open %s: %w", dir, err)
	}
	return ix, nil
}
