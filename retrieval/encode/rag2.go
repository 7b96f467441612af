package encode

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/version"
)

// RAG2Corpus says where and how a chunked corpus is written in RAG²'s
// retriever layout (dmis-lab/RAG2 retriever/README.md).
type RAG2Corpus struct {
	Out       string // root directory (embeddings/, articles/)
	Name      string // embeddings/<Name>, articles/<Name>
	ShardSize int    // rows per .npy/.json pair; 0: one pair
	// Source, ChunkSize and Overlap are recorded in data.EncodeInfoFile
	// (ChunkSize 0: whole documents, Overlap recorded as 0).
	Source             string
	ChunkSize, Overlap int
	// Sources is where each encoder setting came from (model, flag or
	// default), recorded beside them.
	Sources Sources
}

// RAG2Result is an encoded corpus: what `ragforge encode --json` prints.
type RAG2Result struct {
	RunID      string   `json:"run_id"` // set by a caller that records a run
	Dir        string   `json:"dir"`
	Name       string   `json:"name"`
	Rows       int      `json:"rows"`
	Dim        int      `json:"dim"`
	Embeddings []string `json:"embeddings"` // the .npy files written
	Articles   []string `json:"articles"`   // the .json files written
	// Pending: this process did its batches of a split encode (Split);
	// another one writes the corpus.
	Pending bool `json:"pending,omitempty"`
}

// EncodeRAG2 encodes chunks with enc (loaded from dir, its settings
// applied) and writes them in RAG²'s layout (data.WriteRAG2) with the
// encoder's settings (enc.Info) in data.EncodeInfoFile, so `--corpus
// rag2:DIR` reads them back and encodes queries the same way.
func EncodeRAG2(enc *BERTEncoder, dir string, chunks []data.Chunk, c RAG2Corpus, progress Progress) (*RAG2Result, error) {
	if c.Out == "" || c.ShardSize < 0 {
		return nil, fmt.Errorf("encode rag2: out %q, shard size %d: want a directory and a size >= 0", c.Out, c.ShardSize)
	}
	vecs, dim, err := EncodeCorpus(enc, chunks, progress)
	if err != nil {
		return nil, err
	}
	return WriteRAG2(enc, dir, chunks, vecs, dim, c)
}

// WriteRAG2 writes chunks with their vectors [len(chunks), dim], encoded by
// enc (loaded from dir), in RAG²'s layout with the encoder's settings: the
// second half of EncodeRAG2, for vectors a Split merged.
func WriteRAG2(enc *BERTEncoder, dir string, chunks []data.Chunk, vecs []float32, dim int, c RAG2Corpus) (*RAG2Result, error) {
	info, err := c.info(enc, dir)
	if err != nil {
		return nil, err
	}
	if err := data.WriteRAG2(c.Out, c.Name, chunks, vecs, dim, c.ShardSize, info); err != nil {
		return nil, err
	}
	return c.result(len(chunks), dim)
}

// StreamRAG2 is EncodeRAG2 over a streamed corpus (walk: chunk.Walk's
// shape, chunks in order): blocks of CorpusBlock chunks are encoded and
// written shard by shard (EncodeToRAG2), so memory holds one block and one
// shard of c.ShardSize rows, never the corpus (with ShardSize 0, one
// .npy/.json pair as EncodeRAG2 writes, the shard is the corpus). The files
// equal EncodeRAG2's. progress, when non-nil, gets the chunks done.
func StreamRAG2(enc *BERTEncoder, dir string, walk func(yield func(data.Chunk) error) error, c RAG2Corpus, progress func(done int)) (*RAG2Result, error) {
	info, err := c.info(enc, dir)
	if err != nil {
		return nil, err
	}
	shard := c.ShardSize
	if shard == 0 {
		shard = math.MaxInt
	}
	n, err := EncodeToRAG2(enc, walk, c.Out, c.Name, shard, info, progress)
	if err != nil {
		return nil, err
	}
	return c.result(n, enc.Dim())
}

// info is the encoder's settings (enc.Info) with where the corpus came from.
func (c RAG2Corpus) info(enc *BERTEncoder, dir string) (data.EncodeInfo, error) {
	if c.Out == "" || c.ShardSize < 0 {
		return data.EncodeInfo{}, fmt.Errorf("encode rag2: out %q, shard size %d: want a directory and a size >= 0", c.Out, c.ShardSize)
	}
	info, err := enc.Info(dir)
	if err != nil {
		return data.EncodeInfo{}, err
	}
	info.Sources = c.Sources
	info.Source, info.ChunkSize, info.ChunkOverlap, info.Version = c.Source, c.ChunkSize, c.Overlap, version.Version
	if c.ChunkSize == 0 {
		info.ChunkOverlap = 0
	}
	return info, nil
}

// result lists the files written for rows chunks of dimension dim.
func (c RAG2Corpus) result(rows, dim int) (*RAG2Result, error) {
	res := &RAG2Result{Dir: c.Out, Name: c.Name, Rows: rows, Dim: dim}
	for _, sub := range []struct {
		dir, ext string
		into     *[]string
	}{{"embeddings", ".npy", &res.Embeddings}, {"articles", ".json", &res.Articles}} {
		ents, err := os.ReadDir(filepath.Join(c.Out, sub.dir, c.Name))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), sub.ext) && e.Name() != data.EncodeInfoFile {
				*sub.into = append(*sub.into, filepath.Join(c.Out, sub.dir, c.Name, e.Name()))
			}
		}
	}
	return res, nil
}
