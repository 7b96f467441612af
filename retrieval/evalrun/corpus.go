// Package evalrun is one retrieval evaluation as `ragforge eval retrieval`
// runs it, callable from Go: the corpus and its chunking (Corpus), the BM25,
// retriever and encoder settings (BM25, Retriever, Encoder), loading and
// assembling from them, and Evaluate (judge, search, score, write the TREC
// files, record the run). The settings keep the JSON the command has always
// stored as its run config, so `pipeline build --from-run` reads any run.
package evalrun

import (
	"fmt"
	"io"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/internal/progress"
)

// Corpus is a corpus on disk and how it is chunked. The json tags name the
// run config fields stored with every run.
type Corpus struct {
	Path       string `json:"corpus"`
	TextField  string `json:"text_field,omitempty"`
	IDField    string `json:"id_field,omitempty"`
	TitleField string `json:"title_field,omitempty"`
	SkipEmpty  bool   `json:"skip_empty"`
	ChunkSize  int    `json:"chunk_size"` // 0: whole documents
	Overlap    int    `json:"chunk_overlap"`
	MaxField   int    `json:"max_field_bytes"`

	// Given reports which settings (by flag name: "chunk-size", ...) the
	// caller set explicitly; nil: none. A pre-encoded corpus refuses them.
	Given func(name string) bool `json:"-"`
}

// DefaultCorpus is path chunked as the CLI's defaults: 512 characters, 128
// overlap (RAG²'s AP setting).
func DefaultCorpus(path string) Corpus {
	return Corpus{Path: path, ChunkSize: 512, Overlap: 128, MaxField: data.DefaultMaxFieldBytes}
}

// Loaded is a loaded and chunked corpus.
type Loaded struct {
	Docs    []data.Document // nil for a pre-encoded corpus
	Chunks  []data.Chunk
	Encoded *data.Encoded // the pre-encoded corpus (rag2:DIR), else nil
}

// ChunkConfig is the recursive splitter's configuration; Size 0 indexes
// whole documents.
func (c *Corpus) ChunkConfig() (chunk.Config, error) {
	cfg := chunk.DefaultConfig()
	cfg.Size, cfg.Overlap = c.ChunkSize, c.Overlap
	if c.ChunkSize > 0 {
		if err := cfg.Validate(); err != nil {
			return cfg, fmt.Errorf("--chunk-size/--chunk-overlap: %w", err)
		}
	} else {
		cfg.Size = 0
	}
	return cfg, nil
}

// Load loads and chunks the corpus (data.Open, chunk.Corpus) with a
// progress bar on log (nil: none).
//
// A pre-encoded corpus (rag2:DIR) is not chunked again: its records are the
// chunks, Docs is nil, Encoded holds the vectors, and ChunkSize/Overlap
// take the values recorded when it was encoded; chunking and field
// settings given explicitly are refused.
func (c *Corpus) Load(log io.Writer) (*Loaded, error) {
	if c.Path == "" {
		return nil, fmt.Errorf("--corpus is required")
	}
	if data.IsEncodedSpec(c.Path) {
		for _, f := range []string{"chunk-size", "chunk-overlap", "text-field", "id-field", "title-field", "skip-empty", "max-field-bytes"} {
			if c.Given != nil && c.Given(f) {
				return nil, fmt.Errorf("--%s: does not apply to a pre-encoded corpus (%s): its chunks were made when it was encoded", f, c.Path)
			}
		}
	}
	cfg, err := c.ChunkConfig()
	if err != nil && !data.IsEncodedSpec(c.Path) {
		return nil, err
	}
	corpus, err := data.Open(c.Path, c.fields())
	if err != nil {
		return nil, err
	}
	if enc := corpus.Encoded; enc != nil && enc.Info != nil {
		c.ChunkSize, c.Overlap = enc.Info.ChunkSize, enc.Info.ChunkOverlap
	}
	bar := progress.New(orDiscard(log), -1, "chunk")
	defer bar.Finish()
	chunks, err := chunk.Corpus(corpus, cfg, bar.Func())
	if err != nil {
		return nil, err
	}
	return &Loaded{Docs: corpus.Docs, Chunks: chunks, Encoded: corpus.Encoded}, nil
}

func (c *Corpus) fields() data.FieldOptions {
	return data.FieldOptions{TextField: c.TextField, IDField: c.IDField, TitleField: c.TitleField, SkipEmpty: c.SkipEmpty, MaxFieldBytes: c.MaxField}
}

// Walk is Load without holding the corpus: it passes the chunks Load would
// return, in order, to yield (chunk.Walk), one document read at a time. A
// pre-encoded corpus is refused (Load reads it). Errors: Load's checks,
// chunk.Walk's, yield's.
func (c *Corpus) Walk(yield func(data.Chunk) error) error {
	if c.Path == "" {
		return fmt.Errorf("--corpus is required")
	}
	cfg, err := c.ChunkConfig()
	if err != nil {
		return err
	}
	_, err = chunk.Walk(c.Path, c.fields(), cfg, yield)
	return err
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
