// Package pipeline defines the on-disk layout of an exported ragforge RAG
// pipeline (what `ragforge serve --pipeline DIR` loads) and writes, reads
// and assembles it:
//
//	DIR/pipeline.json                 manifest (Manifest): corpora, chunking, retrieval defaults, prompts
//	DIR/corpora/<name>/chunks.jsonl   one data.Chunk per line, in index order
//	DIR/corpora/<name>/bm25/          bleve BM25 index (retrieval/bm25.Build)
//	DIR/corpora/<name>/dense/         index.faiss + ids.json (retrieval/dense.Index.Save), when a retriever exists
//	DIR/retriever/                    BERT bi-encoder, HF layout (config.json, model.safetensors, vocab.txt), optional
//	DIR/filter/                       RAG² Flan-T5 filter, HF layout with [HELPFUL]/[NOT_HELPFUL] added, optional
//	DIR/generator/                    generator (rationales, answers, HyDE documents): a T5 or a Llama/Qwen2/Qwen3 decoder by model_type (models/lm.Load), HF layout, optional
//	DIR/reranker/                     BERT cross-encoder (num_labels 1), HF layout, optional
//
// Save writes a directory from parts already computed (chunks, dense
// indexes, model directories); Build also embeds the chunks with the
// retriever and builds the FAISS indexes. Both write into a temporary
// sibling directory renamed into place at the end, so DIR is either complete
// or absent. Load opens the indexes and reads the chunks; loading the
// models onto a backend is left to the caller (infer/serve).
package pipeline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/retrieval/search"
)

// File and directory names of the layout (see the package doc).
const (
	ManifestFile = "pipeline.json"
	CorporaDir   = "corpora"
	ChunksFile   = "chunks.jsonl"
	BM25Dir      = "bm25"
	DenseDir     = "dense"
	RetrieverDir = "retriever"
	FilterDir    = "filter"
	GeneratorDir = "generator"
	RerankerDir  = "reranker"
	// ArtifactKind is the data/tracker artifact kind under which `ragforge
	// export` records a pipeline's pipeline.json; FromRun resolves it.
	ArtifactKind = "pipeline"
	// Version is the manifest format version written by Save.
	Version = 1
)

// ChunkInfo records how the chunks were made (provenance only; the chunks
// themselves are stored). Size and Overlap are in Unit ("runes" for
// LangChain's character splitter, "tokens", or "document" for unchunked
// corpora, Size 0).
type ChunkInfo struct {
	Size       int      `json:"size"`
	Overlap    int      `json:"overlap"`
	Separators []string `json:"separators,omitempty"`
	Unit       string   `json:"unit,omitempty"`
}

// Retrieval holds the retrieval defaults a request may override.
type Retrieval struct {
	Mode search.Mode `json:"mode"` // one of search.Modes; default hybrid
	K    int         `json:"k"`    // hits returned; default 5
	// Balanced applies RAG²'s balanced retrieval across corpora
	// (fusion.Balanced: ⌊k/n⌋ hits per corpus); otherwise per-corpus lists
	// are fused with equal-weight RRF. Default true.
	Balanced bool `json:"balanced"`
	// DenseWeight and BM25Weight are the hybrid RRF weights (AP paper: 0.3
	// dense, 0.7 BM25), RRFC the rank constant (60).
	DenseWeight float64 `json:"dense_weight"`
	BM25Weight  float64 `json:"bm25_weight"`
	RRFC        float64 `json:"rrf_c"`
	// Depth is how many hits each retriever contributes to a fusion
	// (≥ k; default 100, retrieval/search.DefaultDepth).
	Depth int `json:"depth"`
	// Pooling ("cls" or "mean"), Normalize and QueryInstruction configure
	// the BERT bi-encoder as encode.BERTEncoder (BGE defaults: cls, true, "").
	Pooling          string `json:"pooling"`
	Normalize        bool   `json:"normalize"`
	QueryInstruction string `json:"query_instruction,omitempty"`
	// DocInstruction is prepended to passages (E5's "passage: "), as
	// encode.BERTEncoder.DocInstruction; empty by default.
	DocInstruction string `json:"doc_instruction,omitempty"`
	MaxLength      int    `json:"max_length"` // query/document tokens, default 512
	// HyDEMode is retrieval/hyde's Mode (fusion, doc_only, concat) and
	// HyDEN the number of hypothetical documents (SL-HyDE: 1).
	HyDEMode string `json:"hyde_mode"`
	HyDEN    int    `json:"hyde_n"`
	// Sources says where the encoder settings (pooling, normalize,
	// max_length, query_instruction, doc_instruction under their
	// ragforge_encode.json names) came from: "model" (the retriever's
	// sentence-transformers files), "flag" or "default".
	Sources data.EncodeSources `json:"sources,omitzero"`
}

// Filter holds the RAG² filter settings (train/filtertrain defaults).
type Filter struct {
	// Windowing: 512 tokens sharing 128, aggregated by max (RAG²).
	filter.Windowing
	Threshold float64 `json:"threshold"` // [HELPFUL] when P ≥ Threshold; 0.5
	// WindowsFrom says where MaxSeqLength and DocStride came from: "model"
	// (the filter's config.json ragforge_filter_windows: what it was
	// evaluated at), "training" (its training_args.json) or "default".
	WindowsFrom string `json:"windows_from,omitempty"`
}

// Rerank holds the cross-encoder settings (retrieval/rerank defaults: top
// 20 rescored, 3 kept).
type Rerank struct {
	TopN int `json:"top_n"`
	K    int `json:"k"`
}

// Prompts are the templates of the RAG² pipeline stages. {question},
// {rationale} and {context} are replaced; {query} in HyDE as models/generate.
type Prompts struct {
	// Rationale asks the LLM for a rationale used as the retrieval query
	// (RAG² §3.2: the rationale, not the question, is the query).
	Rationale string `json:"rationale"`
	// Answer asks for the final answer given the kept snippets, numbered
	// [1], [2], ... in {context} so the answer can cite them.
	Answer string `json:"answer"`
	// HyDE writes the hypothetical document of a query (hyde.HypoPrompt).
	HyDE string `json:"hyde"`
}

// Manifest is pipeline.json.
type Manifest struct {
	Version   int         `json:"version"`
	Name      string      `json:"name,omitempty"`
	Corpora   []string    `json:"corpora"` // names, in the order of corpora/
	Chunk     ChunkInfo   `json:"chunk"`
	BM25      bm25.Config `json:"bm25"`
	Retrieval Retrieval   `json:"retrieval"`
	Filter    Filter      `json:"filter"`
	Rerank    Rerank      `json:"rerank"`
	Prompts   Prompts     `json:"prompts"`
	// FromRun is the eval-retrieval run whose settings (mode, hybrid
	// weights, depth, BM25, chunking, encoder options) this pipeline
	// serves (pipeline build --from-run); empty when built from flags.
	FromRun string `json:"from_run,omitempty"`
	// FAISSFactory is the faiss index factory of the dense indexes ("Flat",
	// exact inner product as RAG² and SL-HyDE; "HNSW32", "IVF256,Flat").
	FAISSFactory string `json:"faiss_factory"`
	// FAISSSearch holds the search-time settings Load applies to the dense
	// indexes (nprobe for IVF, efSearch for HNSW; zero = faiss's default).
	FAISSSearch dense.SearchParams `json:"faiss_search,omitzero"`
	// Parts names the model directories Build wrote (retriever, filter,
	// generator, reranker): Load refuses a pipeline that lost one, which
	// would otherwise serve without it. Absent in pipelines built before
	// it was recorded, whose parts are whatever directories exist.
	Parts []string `json:"parts,omitempty"`
}

// Default prompt templates.
const (
	DefaultRationalePrompt = "Question: {question}\nExplain step by step the medical knowledge needed to answer the question.\nRationale:"
	DefaultAnswerPrompt    = "Answer the question using the numbered context passages, citing the passages you use as [n].\n{context}\nQuestion: {question}\nAnswer:"
	DefaultHyDEPrompt      = "Please write a medical passage to answer the question.\nQuestion: {query}\nPassage:"
)

// promptVars are the placeholders each prompt must hold: without them a
// stage ignores its question (or its retrieved context).
var promptVars = map[string][]string{
	"prompts.rationale": {"{question}"},
	"prompts.answer":    {"{question}", "{context}"},
	"prompts.hyde":      {"{query}"},
}

// DefaultManifest returns the defaults documented on the fields: hybrid
// retrieval with RRF weights 0.3/0.7 and C 60 (AP paper), k 5, balanced
// corpora (RAG²), BGE encoder conventions, SL-HyDE fusion with one
// document, the RAG² filter's 512/128 windows with max aggregation and
// threshold 0.5, cross-encoder top 20 → 3, BM25 k1 1.2 b 0.75, Flat FAISS.
func DefaultManifest() Manifest {
	return Manifest{
		Version: Version,
		BM25:    bm25.DefaultConfig(),
		Retrieval: Retrieval{
			Mode: search.Hybrid, K: 5, Balanced: true,
			DenseWeight: fusion.DenseWeight, BM25Weight: fusion.BM25Weight, RRFC: fusion.DefaultC, Depth: 100,
			Pooling: "cls", Normalize: true, MaxLength: 512, HyDEMode: "fusion", HyDEN: 1,
		},
		Filter:       Filter{Windowing: filter.Windowing{MaxSeqLength: 512, DocStride: 128, Aggregate: filter.AggregateMax}, Threshold: 0.5},
		Rerank:       Rerank{TopN: 20, K: 3},
		Prompts:      Prompts{Rationale: DefaultRationalePrompt, Answer: DefaultAnswerPrompt, HyDE: DefaultHyDEPrompt},
		FAISSFactory: "Flat",
	}
}

var corpusName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Validate checks the manifest; errors name the field.
func (m Manifest) Validate() error {
	if m.Version != Version {
		return fmt.Errorf("field %q: version %d, this ragforge reads %d", "version", m.Version, Version)
	}
	if len(m.Corpora) == 0 {
		return fmt.Errorf("field %q: no corpora", "corpora")
	}
	seen := map[string]bool{}
	for i, c := range m.Corpora {
		if !corpusName.MatchString(c) {
			return fmt.Errorf("field %q: corpus %d: name %q is not [A-Za-z0-9][A-Za-z0-9_.-]*", "corpora", i, c)
		}
		if seen[c] {
			return fmt.Errorf("field %q: corpus %q repeated", "corpora", c)
		}
		seen[c] = true
	}
	if err := m.BM25.Validate(); err != nil {
		return fmt.Errorf("field %q: %w", "bm25", err)
	}
	if err := m.FAISSSearch.Validate(); err != nil {
		return fmt.Errorf("field %q: %w", "faiss_search", err)
	}
	r := m.Retrieval
	if err := r.Mode.Check(); err != nil {
		return fmt.Errorf("field %q: %w", "retrieval.mode", err)
	}
	if r.K < 1 {
		return fmt.Errorf("field %q: %d, want ≥ 1", "retrieval.k", r.K)
	}
	if r.DenseWeight < 0 || r.BM25Weight < 0 || r.RRFC < 0 {
		return fmt.Errorf("field %q: weights and rrf_c must be ≥ 0", "retrieval")
	}
	if r.Pooling != "cls" && r.Pooling != "mean" {
		return fmt.Errorf("field %q: %q, want cls or mean", "retrieval.pooling", r.Pooling)
	}
	f := m.Filter
	if err := f.Windowing.Check(); err != nil {
		return fmt.Errorf("field %q: %w", "filter", err)
	}
	if f.Threshold < 0 || f.Threshold > 1 {
		return fmt.Errorf("field %q: %v outside [0, 1]", "filter.threshold", f.Threshold)
	}
	for _, p := range []struct{ field, text string }{
		{"prompts.rationale", m.Prompts.Rationale}, {"prompts.answer", m.Prompts.Answer}, {"prompts.hyde", m.Prompts.HyDE},
	} {
		for _, v := range promptVars[p.field] {
			if !strings.Contains(p.text, v) {
				return fmt.Errorf("field %q: %q has no %s: the stage would send the LLM the same text for every question (the defaults: rationale %q, answer %q, hyde %q)",
					p.field, p.text, v, DefaultRationalePrompt, DefaultAnswerPrompt, DefaultHyDEPrompt)
			}
		}
	}
	seenPart := map[string]bool{}
	for _, name := range m.Parts {
		switch name {
		case RetrieverDir, FilterDir, GeneratorDir, RerankerDir:
		default:
			return fmt.Errorf("field %q: %q, want %s, %s, %s or %s", "parts", name, RetrieverDir, FilterDir, GeneratorDir, RerankerDir)
		}
		if seenPart[name] {
			return fmt.Errorf("field %q: %q twice", "parts", name)
		}
		seenPart[name] = true
	}
	return nil
}

// Corpus is one loaded corpus: its chunks in index order, the BM25 index
// and, when the pipeline has a retriever, the dense index.
type Corpus struct {
	Name   string
	Chunks []data.Chunk
	BM25   *bm25.Index
	Dense  *dense.Index // nil without a retriever
	byID   map[string]int
}

// Chunk returns the chunk with id.
func (c *Corpus) Chunk(id string) (data.Chunk, bool) {
	i, ok := c.byID[id]
	if !ok {
		return data.Chunk{}, false
	}
	return c.Chunks[i], true
}

// Pipeline is a loaded pipeline directory. Model directories are the
// absolute paths of the optional parts, "" when absent.
type Pipeline struct {
	Dir      string
	Manifest Manifest
	Corpora  []*Corpus // in Manifest.Corpora order

	Retriever, Filter, Generator, Reranker string
}

// Corpus returns the corpus named name.
func (p *Pipeline) Corpus(name string) (*Corpus, bool) {
	for _, c := range p.Corpora {
		if c.Name == name {
			return c, true
		}
	}
	return nil, false
}

// SetSearch applies the non-zero fields of sp to every dense index (see
// dense.(*Index).SetSearch), e.g. a server's override of the manifest's
// FAISSSearch. Errors name the corpus; a pipeline without dense indexes
// given a non-zero sp is an error too.
func (p *Pipeline) SetSearch(sp dense.SearchParams) error {
	if sp == (dense.SearchParams{}) {
		return nil
	}
	if p.Retriever == "" {
		return fmt.Errorf("pipeline %s: faiss search settings given, but the pipeline has no dense index", p.Dir)
	}
	for _, c := range p.Corpora {
		if err := c.Dense.SetSearch(sp); err != nil {
			return fmt.Errorf("pipeline %s: corpus %q (faiss %q): %w", p.Dir, c.Name, p.Manifest.FAISSFactory, err)
		}
	}
	return nil
}

// Close releases the indexes.
func (p *Pipeline) Close() error {
	var errs []error
	for _, c := range p.Corpora {
		if c.BM25 != nil {
			errs = append(errs, c.BM25.Close())
		}
		if c.Dense != nil {
			c.Dense.Close()
		}
	}
	return errors.Join(errs...)
}

// Load opens the pipeline at dir: it validates pipeline.json, reads every
// corpus's chunks, opens its BM25 index and, when dir/retriever exists, its
// dense index, with the manifest's FAISSSearch applied. Errors name the file and, for chunks, the line and field: a
// missing or invalid manifest, a corpus without chunks, an index whose size
// differs from the chunk count, a chunk id repeated within or across corpora
// (balanced retrieval identifies hits by chunk id), a dense index without a
// retriever or the reverse.
func Load(dir string) (*Pipeline, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("load pipeline %s: %w", dir, err)
	}
	m, err := ReadManifest(filepath.Join(abs, ManifestFile))
	if err != nil {
		return nil, err
	}
	p := &Pipeline{Dir: abs, Manifest: m}
	listed := map[string]bool{}
	for _, name := range m.Parts {
		listed[name] = true
	}
	for _, part := range []struct {
		name string
		dst  *string
	}{{RetrieverDir, &p.Retriever}, {FilterDir, &p.Filter}, {GeneratorDir, &p.Generator}, {RerankerDir, &p.Reranker}} {
		d := filepath.Join(abs, part.name)
		st, err := os.Stat(d)
		if err == nil && st.IsDir() {
			*part.dst = d
			continue
		}
		if listed[part.name] {
			if err == nil {
				err = errors.New("not a directory")
			}
			return nil, fmt.Errorf("load pipeline %s: part %q, listed in %s, is missing or unreadable (%v): rebuild the pipeline, or remove %q from the field %q to serve without it", abs, part.name, ManifestFile, err, part.name, "parts")
		}
	}
	owner := map[string]string{}
	for _, name := range m.Corpora {
		c, err := loadCorpus(filepath.Join(abs, CorporaDir, name), name, p.Retriever != "")
		if err != nil {
			p.Close()
			return nil, err
		}
		p.Corpora = append(p.Corpora, c)
		for _, ch := range c.Chunks {
			if o, dup := owner[ch.ID]; dup {
				p.Close()
				return nil, fmt.Errorf("load pipeline %s: chunk id %q is in corpora %q and %q; ids must be unique across corpora", abs, ch.ID, o, name)
			}
			owner[ch.ID] = name
		}
	}
	if err := p.SetSearch(m.FAISSSearch); err != nil {
		p.Close()
		return nil, fmt.Errorf("load %s: field %q: %w", filepath.Join(abs, ManifestFile), "faiss_search", err)
	}
	return p, nil
}

func loadCorpus(dir, name string, wantDense bool) (*Corpus, error) {
	chunks, err := ReadChunks(filepath.Join(dir, ChunksFile))
	if err != nil {
		return nil, err
	}
	c := &Corpus{Name: name, Chunks: chunks, byID: make(map[string]int, len(chunks))}
	for i, ch := range chunks {
		c.byID[ch.ID] = i
	}
	if c.BM25, err = bm25.Open(filepath.Join(dir, BM25Dir)); err != nil {
		return nil, fmt.Errorf("load corpus %q: %w", name, err)
	}
	if n := c.BM25.Count(); n != len(chunks) {
		c.BM25.Close()
		return nil, fmt.Errorf("load corpus %q: bm25 index holds %d chunks, %s %d", name, n, ChunksFile, len(chunks))
	}
	dd := filepath.Join(dir, DenseDir)
	_, statErr := os.Stat(dd)
	switch {
	case wantDense && statErr != nil:
		c.BM25.Close()
		return nil, fmt.Errorf("load corpus %q: the pipeline has a retriever but no dense index: %w", name, statErr)
	case !wantDense && statErr == nil:
		c.BM25.Close()
		return nil, fmt.Errorf("load corpus %q: %s exists but the pipeline has no %s/ to encode queries", name, dd, RetrieverDir)
	case wantDense:
		if c.Dense, err = dense.Load(dd); err != nil {
			c.BM25.Close()
			return nil, fmt.Errorf("load corpus %q: %w", name, err)
		}
		ids := c.Dense.IDs()
		if len(ids) != len(chunks) {
			c.Close()
			return nil, fmt.Errorf("load corpus %q: dense index holds %d vectors, %s %d chunks", name, len(ids), ChunksFile, len(chunks))
		}
		for i, id := range ids {
			if _, ok := c.byID[id]; !ok {
				c.Close()
				return nil, fmt.Errorf("load corpus %q: dense row %d: id %q is not a chunk", name, i, id)
			}
		}
	}
	return c, nil
}

// Close releases the corpus's indexes.
func (c *Corpus) Close() {
	if c.BM25 != nil {
		c.BM25.Close()
	}
	if c.Dense != nil {
		c.Dense.Close()
	}
}

// ReadManifest reads and validates a pipeline.json. Unknown fields are
// errors (a manifest from a newer ragforge should not be half-read).
func ReadManifest(path string) (Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, fmt.Errorf("load pipeline: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("load %s: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, fmt.Errorf("load %s: %w", path, err)
	}
	return m, nil
}

// ReadChunks reads a chunks.jsonl file: one data.Chunk per line (blank lines
// skipped). Errors name the file, the 1-based line and the field: invalid
// JSON, an empty or repeated id, an empty doc_id.
func ReadChunks(path string) ([]data.Chunk, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read chunks: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var out []data.Chunk
	seen := map[string]bool{}
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			var c data.Chunk
			if jerr := json.Unmarshal(b, &c); jerr != nil {
				return nil, fmt.Errorf("load %s: line %d: %w", path, line, jerr)
			}
			switch {
			case c.ID == "":
				return nil, fmt.Errorf("load %s: line %d: field %q: empty", path, line, "id")
			case seen[c.ID]:
				return nil, fmt.Errorf("load %s: line %d: field %q: %q repeated", path, line, "id", c.ID)
			case c.DocID == "":
				return nil, fmt.Errorf("load %s: line %d: field %q: empty", path, line, "doc_id")
			}
			seen[c.ID] = true
			out = append(out, c)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("load %s: line %d: %w", path, line, err)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("load %s: no chunks", path)
	}
	return out, nil
}

// WriteChunks writes chunks to path as JSONL (compact, HTML not escaped).
func WriteChunks(path string, chunks []data.Chunk) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write chunks: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i, c := range chunks {
		if err := enc.Encode(c); err != nil {
			f.Close()
			return fmt.Errorf("write %s: chunk %d (%q): %w", path, i, c.ID, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// FromRun returns the pipeline directory recorded by run id (or unique id
// prefix) of store: the directory of its latest artifact of kind
// ArtifactKind, which is the pipeline's pipeline.json. Errors: an unknown
// run, a run without such an artifact, or one whose directory is gone.
func FromRun(store *tracker.Store, id string) (string, error) {
	d, err := store.Get(id)
	if err != nil {
		return "", fmt.Errorf("pipeline of run %s: %w", id, err)
	}
	var paths []string
	for _, a := range d.Artifacts {
		if a.Kind == ArtifactKind {
			paths = append(paths, a.Path)
		}
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("pipeline of run %s: no %q artifact (export one with `ragforge export`)", d.ID, ArtifactKind)
	}
	p := paths[len(paths)-1]
	dir := p
	if filepath.Base(p) == ManifestFile {
		dir = filepath.Dir(p)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err != nil {
		return "", fmt.Errorf("pipeline of run %s: artifact %s: %w", d.ID, p, err)
	}
	return dir, nil
}

// marshalIndent encodes v as indented JSON (two spaces, HTML not escaped)
// with a final newline.
func marshalIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
