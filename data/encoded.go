package data

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragforge/ragforge/data/npy"
)

// EncodedScheme prefixes a corpus argument that names a pre-encoded corpus
// in RAG²'s retriever layout: "rag2:DIR" or "rag2:DIR#corpus" (see
// OpenEncoded).
const EncodedScheme = "rag2:"

// EncodeInfoFile is the file in embeddings/<corpus>/ that records how
// ragforge encoded the corpus (EncodeInfo). RAG²'s own code reads only the
// .npy files there, so it does not disturb them.
const EncodeInfoFile = "ragforge_encode.json"

// EncodeInfo records how a pre-encoded corpus was made, so a reader encodes
// its queries the same way. Lengths are in tokens, specials included.
type EncodeInfo struct {
	Encoder       string `json:"encoder"`                  // encoder directory (absolute path)
	WeightsSHA256 string `json:"weights_sha256,omitempty"` // sha256 of its model.safetensors, when present
	Pooling       string `json:"pooling"`                  // "cls" or "mean"
	Normalize     bool   `json:"normalize"`                // vectors have unit L2 norm
	MaxLength     int    `json:"max_length"`               // truncation length used for passages and queries
	QueryPrefix   string `json:"query_prefix,omitempty"`   // prepended to queries (BGE/E5 instruction)
	PassagePrefix string `json:"passage_prefix,omitempty"` // prepended to passages before encoding (E5 "passage: ")
	Dim           int    `json:"dim"`
	Rows          int    `json:"rows"`
	Source        string `json:"source,omitempty"` // the corpus the chunks came from
	ChunkSize     int    `json:"chunk_size"`       // 0: whole documents
	ChunkOverlap  int    `json:"chunk_overlap"`
	Version       string `json:"ragforge_version,omitempty"`
	// Sources says where each encoder setting came from: "model" (the
	// encoder directory's sentence-transformers files), "flag" or
	// "default" (ragforge's, the directory declaring none).
	Sources EncodeSources `json:"sources,omitzero"`
}

// EncodeSources names, per encoder setting of EncodeInfo (same JSON names),
// where its value came from (see EncodeInfo.Sources).
type EncodeSources struct {
	Pooling       string `json:"pooling,omitempty"`
	Normalize     string `json:"normalize,omitempty"`
	MaxLength     string `json:"max_length,omitempty"`
	QueryPrefix   string `json:"query_prefix,omitempty"`
	PassagePrefix string `json:"passage_prefix,omitempty"`
}

// Get returns the source of the setting of JSON name name ("" when unknown).
func (s EncodeSources) Get(name string) string {
	switch name {
	case "pooling":
		return s.Pooling
	case "normalize":
		return s.Normalize
	case "max_length":
		return s.MaxLength
	case "query_prefix":
		return s.QueryPrefix
	case "passage_prefix":
		return s.PassagePrefix
	}
	return ""
}

// Set records source for the setting of JSON name name; an unknown name
// panics (names are the code's, never input).
func (s *EncodeSources) Set(name, source string) {
	switch name {
	case "pooling":
		s.Pooling = source
	case "normalize":
		s.Normalize = source
	case "max_length":
		s.MaxLength = source
	case "query_prefix":
		s.QueryPrefix = source
	case "passage_prefix":
		s.PassagePrefix = source
	default:
		panic("data: EncodeSources.Set: unknown setting " + name)
	}
}

// Encoded is a pre-encoded corpus: its records in row order and their
// vectors, row-major [len(Docs), Dim].
type Encoded struct {
	Root, Name string
	Docs       []Document
	Vectors    []float32
	Dim        int
	// Info is the directory's EncodeInfo; nil for a directory ragforge did
	// not write (RAG²'s MedCPT embeddings, for example).
	Info *EncodeInfo
}

// IsEncodedSpec reports whether a corpus argument names a pre-encoded
// corpus ("rag2:...").
func IsEncodedSpec(spec string) bool { return strings.HasPrefix(spec, EncodedScheme) }

// OpenEncoded loads a pre-encoded corpus named "rag2:DIR" or
// "rag2:DIR#corpus": DIR holds embeddings/<corpus>/*.npy and
// articles/<corpus>/*.json (LoadRAG2Corpus). Without "#corpus", DIR must
// hold exactly one corpus. EncodeInfoFile is read when present, and its
// row count and dimension must match the .npy files. Errors name the
// directory or file: a spec without the scheme, no or several corpora, a
// malformed or mismatched EncodeInfoFile, and LoadRAG2Corpus's errors.
func OpenEncoded(spec string) (*Encoded, error) {
	rest, ok := strings.CutPrefix(spec, EncodedScheme)
	if !ok || rest == "" {
		return nil, fmt.Errorf("open encoded corpus %q: want %sDIR or %sDIR#corpus", spec, EncodedScheme, EncodedScheme)
	}
	root, name, _ := strings.Cut(rest, "#")
	if name == "" {
		ents, err := os.ReadDir(filepath.Join(root, "embeddings"))
		if err != nil {
			return nil, fmt.Errorf("open encoded corpus %s: %w (want DIR/embeddings/<corpus>/*.npy)", root, err)
		}
		var names []string
		for _, e := range ents {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
		if len(names) != 1 {
			return nil, fmt.Errorf("open encoded corpus %s: embeddings/ holds %d corpora %v; name one as %s%s#<corpus>", root, len(names), names, EncodedScheme, root)
		}
		name = names[0]
	}
	docs, vecs, dim, err := LoadRAG2Corpus(root, name)
	if err != nil {
		return nil, err
	}
	enc := &Encoded{Root: root, Name: name, Docs: docs, Vectors: vecs, Dim: dim}
	infoPath := filepath.Join(root, "embeddings", name, EncodeInfoFile)
	b, err := os.ReadFile(infoPath)
	switch {
	case err == nil:
		var info EncodeInfo
		if err := json.Unmarshal(b, &info); err != nil {
			return nil, fmt.Errorf("open encoded corpus: read %s: %w", infoPath, err)
		}
		if info.Rows != len(docs) || info.Dim != dim {
			return nil, fmt.Errorf("open encoded corpus: %s: fields \"rows\"/\"dim\" say [%d, %d], the .npy files hold [%d, %d]",
				infoPath, info.Rows, info.Dim, len(docs), dim)
		}
		enc.Info = &info
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("open encoded corpus: %w", err)
	}
	return enc, nil
}

// Chunks returns the records as chunks, in row order: the fields ragforge
// writes ("doc_id", "index", "start", "end", "meta") are restored; for
// other records DocID is the record id, the text is title + " " + text when
// there is a title (the BEIR convention LoadChunks follows for whole
// documents), and Meta keeps the record's other fields.
func (e *Encoded) Chunks() []Chunk {
	out := make([]Chunk, len(e.Docs))
	for i, d := range e.Docs {
		c := Chunk{ID: d.ID, DocID: d.ID, Text: d.Text, End: len(d.Text), Meta: d.Meta}
		if d.Title != "" {
			c.Text = d.Title + " " + d.Text
			c.End = len(c.Text)
		}
		if s, ok := d.Meta["doc_id"].(string); ok && s != "" {
			c.DocID = s
			c.Index = metaInt(d.Meta["index"])
			c.Start, c.End = metaInt(d.Meta["start"]), metaInt(d.Meta["end"])
			m, _ := d.Meta["meta"].(map[string]any)
			c.Meta = m
		}
		out[i] = c
	}
	return out
}

func metaInt(v any) int {
	if f, ok := v.(float64); ok {
		return int(f)
	}
	return 0
}

// rag2Record is one articles record as WriteRAG2 writes it.
type rag2Record struct {
	ID    string         `json:"id"`
	DocID string         `json:"doc_id"`
	Index int            `json:"index"`
	Start int            `json:"start"`
	End   int            `json:"end"`
	Text  string         `json:"text"`
	Meta  map[string]any `json:"meta,omitempty"`
}

// WriteRAG2 writes chunks and their vectors (row-major [len(chunks), dim])
// as corpus name under root in RAG²'s retriever layout:
//
//	root/embeddings/<name>/<name>_Embeds_<k>.npy     float32 [N_k, dim]
//	root/articles/<name>/<name>_Articles_<k>.json    JSON list of N_k records
//	root/embeddings/<name>/ragforge_encode.json      info (EncodeInfoFile)
//
// Shard k holds rows [k·shardRows, (k+1)·shardRows); shardRows ≤ 0 writes
// one shard. A record is {"id", "doc_id", "index", "start", "end", "text",
// "meta"} (the chunk; LoadRAG2Corpus reads "id" and "text", Chunks the rest),
// so the ids travel with the vectors. info.Rows and info.Dim are set here.
// The two corpus directories are written under temporary names and renamed
// at the end. Errors: a name that is not a plain file name, existing corpus
// directories (not overwritten), len(vecs) != len(chunks)·dim, I/O errors
// naming the file. RAG2Writer writes the same files shard by shard.
func WriteRAG2(root, name string, chunks []Chunk, vecs []float32, dim, shardRows int, info EncodeInfo) error {
	if dim <= 0 || len(vecs) != len(chunks)*dim {
		return fmt.Errorf("write rag2 corpus %q: %d floats for %d chunks of dim %d", name, len(vecs), len(chunks), dim)
	}
	if shardRows <= 0 {
		shardRows = max(len(chunks), 1)
	}
	w, err := NewRAG2Writer(root, name, dim, shardRows)
	if err != nil {
		return err
	}
	if err := w.Add(chunks, vecs); err != nil {
		w.Abort()
		return err
	}
	return w.Close(info)
}

// RAG2Writer writes a corpus in RAG²'s retriever layout (WriteRAG2) while it
// is being encoded: Add buffers rows and writes each shard of shardRows rows
// as soon as it is full, so memory holds at most one shard of chunks and
// vectors whatever the corpus size. Close writes the last shard and the
// EncodeInfo and moves the directories into place; Abort removes them. Not
// safe for concurrent use.
type RAG2Writer struct {
	name                           string
	embDir, artDir, tmpEmb, tmpArt string
	dim, shardRows                 int
	shards, rows                   int
	chunks                         []Chunk
	vecs                           []float32
}

// NewRAG2Writer starts corpus name under root (see WriteRAG2), with rows of
// dimension dim and shardRows rows per .npy/.json pair. Errors: a name that
// is not a plain file name, dim or shardRows < 1, existing corpus
// directories, I/O errors.
func NewRAG2Writer(root, name string, dim, shardRows int) (*RAG2Writer, error) {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("write rag2 corpus %q: want a plain directory name", name)
	}
	if dim <= 0 || shardRows <= 0 {
		return nil, fmt.Errorf("write rag2 corpus %q: dim %d and rows per shard %d: want ≥ 1", name, dim, shardRows)
	}
	w := &RAG2Writer{name: name, dim: dim, shardRows: shardRows,
		embDir: filepath.Join(root, "embeddings", name), artDir: filepath.Join(root, "articles", name)}
	w.tmpEmb, w.tmpArt = w.embDir+".tmp", w.artDir+".tmp"
	for _, d := range []string{w.embDir, w.artDir} {
		if _, err := os.Lstat(d); err == nil {
			return nil, fmt.Errorf("write rag2 corpus %q: %s already exists (not overwritten)", name, d)
		}
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			return nil, fmt.Errorf("write rag2 corpus %q: %w", name, err)
		}
	}
	for _, d := range []string{w.tmpEmb, w.tmpArt} {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("write rag2 corpus %q: %w", name, err)
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			w.Abort()
			return nil, fmt.Errorf("write rag2 corpus %q: %w", name, err)
		}
	}
	return w, nil
}

// Rows returns the number of rows added so far.
func (w *RAG2Writer) Rows() int { return w.rows }

// Add appends chunks and their vectors (row-major [len(chunks), dim]),
// writing every shard that fills. The caller may reuse both slices after
// Add returns (chunks are copied, vectors too). Errors: a vector count that
// does not match, I/O errors naming the file.
func (w *RAG2Writer) Add(chunks []Chunk, vecs []float32) error {
	if len(vecs) != len(chunks)*w.dim {
		return fmt.Errorf("write rag2 corpus %q: %d floats for %d chunks of dim %d", w.name, len(vecs), len(chunks), w.dim)
	}
	for len(chunks) > 0 {
		n := min(len(chunks), w.shardRows-len(w.chunks))
		w.chunks = append(w.chunks, chunks[:n]...)
		w.vecs = append(w.vecs, vecs[:n*w.dim]...)
		chunks, vecs = chunks[n:], vecs[n*w.dim:]
		w.rows += n
		if len(w.chunks) == w.shardRows {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *RAG2Writer) flush() error {
	stem := fmt.Sprintf("%s_%%s_%d", w.name, w.shards)
	if err := npy.Write(filepath.Join(w.tmpEmb, fmt.Sprintf(stem, "Embeds")+".npy"), w.vecs, len(w.chunks), w.dim); err != nil {
		return fmt.Errorf("write rag2 corpus %q: %w", w.name, err)
	}
	if err := writeRecords(filepath.Join(w.tmpArt, fmt.Sprintf(stem, "Articles")+".json"), w.chunks); err != nil {
		return fmt.Errorf("write rag2 corpus %q: %w", w.name, err)
	}
	w.shards++
	clear(w.chunks) // drop the texts for the collector
	w.chunks, w.vecs = w.chunks[:0], w.vecs[:0]
	return nil
}

// Close writes the last shard (an empty one when nothing was added), then
// info (with Rows and Dim set) and renames the directories into place. On
// error everything written is removed.
func (w *RAG2Writer) Close(info EncodeInfo) (err error) {
	defer func() {
		if err != nil {
			w.Abort()
		}
	}()
	if len(w.chunks) > 0 || w.shards == 0 {
		if err := w.flush(); err != nil {
			return err
		}
	}
	info.Rows, info.Dim = w.rows, w.dim
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("write rag2 corpus %q: %w", w.name, err)
	}
	if err := os.WriteFile(filepath.Join(w.tmpEmb, EncodeInfoFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write rag2 corpus %q: %w", w.name, err)
	}
	if err := os.Rename(w.tmpArt, w.artDir); err != nil {
		return fmt.Errorf("write rag2 corpus %q: %w", w.name, err)
	}
	if err := os.Rename(w.tmpEmb, w.embDir); err != nil {
		os.RemoveAll(w.artDir)
		return fmt.Errorf("write rag2 corpus %q: %w", w.name, err)
	}
	return nil
}

// Abort removes what the writer wrote (the temporary directories).
func (w *RAG2Writer) Abort() {
	os.RemoveAll(w.tmpEmb)
	os.RemoveAll(w.tmpArt)
}

// writeRecords writes chunks as a JSON list, one record per line.
func writeRecords(path string, chunks []Chunk) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	w.WriteString("[")
	for i, c := range chunks {
		if i > 0 {
			w.WriteString(",")
		}
		w.WriteString("\n")
		if err := enc.Encode(rag2Record{ID: c.ID, DocID: c.DocID, Index: c.Index, Start: c.Start, End: c.End, Text: c.Text, Meta: c.Meta}); err != nil {
			f.Close()
			return fmt.Errorf("write %s: chunk %q: %w", path, c.ID, err)
		}
	}
	w.WriteString("]\n")
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
