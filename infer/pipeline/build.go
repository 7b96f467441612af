package pipeline

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// CorpusPart is one corpus to write: its chunks and, when the pipeline has a
// retriever, the dense index over them (rows may be in any order but must
// cover exactly the chunk ids).
type CorpusPart struct {
	Name   string
	Chunks []data.Chunk
	Dense  *dense.Index
}

// Parts is what Save writes. Model fields are source directories (HF layout)
// copied into the pipeline, "" for none.
type Parts struct {
	// Manifest is written as pipeline.json; an empty Corpora list is filled
	// from Corpora's names.
	Manifest Manifest
	Corpora  []CorpusPart

	Retriever, Filter, Generator, Reranker string

	// Progress, when set, is told the stage ("bm25:<corpus>",
	// "encode:<corpus>") and how many chunks of it are done.
	Progress func(stage string, done, total int)
}

// CheckParts refuses, by name, a model directory of a family its part
// cannot load, before anything is copied or encoded (serve would fail on
// it later, or run a filter that is no T5): the retriever must be a BERT-
// family bi-encoder (encode.Arch), the filter a T5 (models/t5.ModelTypes),
// the generator a language model family (lm.Families), the reranker a BERT
// cross-encoder. Families come from config.json model_type (hf.ModelType).
func CheckParts(p Parts) error {
	if p.Retriever != "" {
		if _, err := encode.Arch(p.Retriever); err != nil {
			return fmt.Errorf("%s: %w", RetrieverDir, err)
		}
	}
	for _, part := range []struct {
		name, dir, what string
		ok              func(mt string) bool
		want            []string
	}{
		{FilterDir, p.Filter, "a T5 filter", func(mt string) bool { return slices.Contains(t5.ModelTypes, mt) }, t5.ModelTypes},
		{GeneratorDir, p.Generator, "a language model", func(mt string) bool { _, ok := lm.Families()[mt]; return ok }, slices.Sorted(maps.Keys(lm.Families()))},
		{RerankerDir, p.Reranker, "a BERT cross-encoder", func(mt string) bool { return mt == bert.BERT.ModelType }, []string{bert.BERT.ModelType}},
	} {
		if part.dir == "" {
			continue
		}
		mt, err := hf.ModelType(part.dir)
		if err != nil {
			return fmt.Errorf("%s %s: %w", part.name, part.dir, err)
		}
		if !part.ok(mt) {
			return fmt.Errorf("%s %s: config.json model_type %q is not %s (want %s)", part.name, part.dir, mt, part.what, strings.Join(part.want, ", "))
		}
	}
	return nil
}

// Save writes a pipeline directory at dir (which must not exist) from parts:
// the manifest, each corpus's chunks.jsonl, a BM25 index built from the
// chunks with Manifest.BM25, the dense index when given, and copies of the
// model directories. It writes into a temporary sibling and renames it to
// dir at the end. Errors: an existing dir, an invalid manifest, a corpus
// whose name disagrees with the manifest, a dense index given without a
// retriever (or missing with one), I/O and indexing errors.
func Save(dir string, parts Parts) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("save pipeline %s: already exists", dir)
	}
	if err := CheckParts(parts); err != nil {
		return fmt.Errorf("save pipeline %s: %w", dir, err)
	}
	m := parts.Manifest
	if len(m.Corpora) == 0 {
		for _, c := range parts.Corpora {
			m.Corpora = append(m.Corpora, c.Name)
		}
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("save pipeline %s: manifest: %w", dir, err)
	}
	if len(m.Corpora) != len(parts.Corpora) {
		return fmt.Errorf("save pipeline %s: manifest lists %d corpora, %d given", dir, len(m.Corpora), len(parts.Corpora))
	}
	err := atomicfile.Dir(dir, false, func(tmp string) error {
		for i, c := range parts.Corpora {
			if c.Name != m.Corpora[i] {
				return fmt.Errorf("corpus %d is %q, manifest says %q", i, c.Name, m.Corpora[i])
			}
			if (c.Dense != nil) != (parts.Retriever != "") {
				return fmt.Errorf("corpus %q: a dense index needs a retriever and a retriever needs dense indexes", c.Name)
			}
			cd := filepath.Join(tmp, CorporaDir, c.Name)
			if err := os.MkdirAll(cd, 0o755); err != nil {
				return err
			}
			if err := WriteChunks(filepath.Join(cd, ChunksFile), c.Chunks); err != nil {
				return err
			}
			var prog func(done, total int)
			if parts.Progress != nil {
				stage := "bm25:" + c.Name
				prog = func(done, total int) { parts.Progress(stage, done, total) }
			}
			ix, err := bm25.Build(filepath.Join(cd, BM25Dir), c.Chunks, m.BM25, prog)
			if err != nil {
				return fmt.Errorf("corpus %q: %w", c.Name, err)
			}
			if err := ix.Close(); err != nil {
				return fmt.Errorf("corpus %q: %w", c.Name, err)
			}
			if c.Dense != nil {
				if c.Dense.Len() != len(c.Chunks) {
					return fmt.Errorf("corpus %q: dense index holds %d vectors for %d chunks", c.Name, c.Dense.Len(), len(c.Chunks))
				}
				if err := c.Dense.Save(filepath.Join(cd, DenseDir)); err != nil {
					return fmt.Errorf("corpus %q: %w", c.Name, err)
				}
			}
		}
		for _, part := range []struct{ src, name string }{
			{parts.Retriever, RetrieverDir}, {parts.Filter, FilterDir}, {parts.Generator, GeneratorDir}, {parts.Reranker, RerankerDir},
		} {
			if part.src == "" {
				continue
			}
			if err := copyDir(part.src, filepath.Join(tmp, part.name)); err != nil {
				return fmt.Errorf("%s: %w", part.name, err)
			}
			m.Parts = append(m.Parts, part.name)
		}
		b, err := marshalIndent(m)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tmp, ManifestFile), b, 0o644); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save pipeline %s: %w", dir, err)
	}
	return nil
}

// BuildOptions configures Build.
type BuildOptions struct {
	Parts
	// Encoder embeds the chunks (EncodeDocs) for the dense indexes when
	// Parts.Retriever is set. Nil: the BERT model and tokenizer of
	// Parts.Retriever are loaded on Backend and wrapped as an
	// encode.BERTEncoder with the manifest's pooling, normalisation and
	// maximum length.
	Encoder encode.Encoder
	Backend string // GoMLX backend config for the loaded encoder ("" = default)
}

// Build assembles a pipeline directory at dir from chunks and model
// directories: when opt.Retriever is set every corpus's chunks are embedded
// (encode.EncodeCorpus) and indexed with faiss (Manifest.FAISSFactory, inner
// product; Manifest.FAISSSearch is checked against the index), then Save
// writes everything, BM25 indexes included. Dense
// indexes given in opt.Corpora are kept as they are. Errors: those of
// Save, the encoder's, faiss's.
func Build(dir string, opt BuildOptions) error {
	parts := opt.Parts
	if err := CheckParts(parts); err != nil {
		return fmt.Errorf("build pipeline %s: %w", dir, err)
	}
	parts.Corpora = append([]CorpusPart(nil), opt.Corpora...)
	if parts.Retriever != "" {
		enc := opt.Encoder
		if enc == nil {
			var err error
			if enc, err = LoadEncoder(parts.Retriever, opt.Backend, parts.Manifest.Retrieval); err != nil {
				return fmt.Errorf("build pipeline %s: %w", dir, err)
			}
		}
		factory := parts.Manifest.FAISSFactory
		if factory == "" {
			factory = "Flat"
		}
		// Fail before encoding, not when the server loads the pipeline, on
		// a setting the index cannot take (nprobe on HNSW, efSearch on IVF).
		if err := dense.CheckSearch(enc.Dim(), factory, parts.Manifest.FAISSSearch); err != nil {
			return fmt.Errorf("build pipeline %s: faiss %q: %w", dir, factory, err)
		}
		for i, c := range parts.Corpora {
			if c.Dense != nil {
				continue
			}
			var prog encode.Progress
			if parts.Progress != nil {
				stage := "encode:" + c.Name
				prog = func(done, total int) { parts.Progress(stage, done, total) }
			}
			vecs, dim, err := encode.EncodeCorpus(enc, c.Chunks, prog)
			if err != nil {
				return fmt.Errorf("build pipeline %s: corpus %q: %w", dir, c.Name, err)
			}
			ids := make([]string, len(c.Chunks))
			for j, ch := range c.Chunks {
				ids[j] = ch.ID
			}
			ix, err := dense.Build(ids, vecs, dim, factory)
			if err != nil {
				return fmt.Errorf("build pipeline %s: corpus %q: %w", dir, c.Name, err)
			}
			defer ix.Close()
			parts.Corpora[i].Dense = ix
		}
	}
	return Save(dir, parts)
}

// LoadEncoder loads the BERT bi-encoder of a retriever directory (HF
// layout: config.json, model.safetensors, vocab.txt or tokenizer.json) on
// the named backend, configured by r (pooling, normalisation, query
// instruction, maximum length).
func LoadEncoder(dir, backendName string, r Retrieval) (*encode.BERTEncoder, error) {
	return LoadEncoderAs(dir, backendName, r, nn.Auto)
}

// LoadEncoderAs is LoadEncoder holding the weights as dt (nn.DType).
func LoadEncoderAs(dir, backendName string, r Retrieval, dt nn.DType) (*encode.BERTEncoder, error) {
	enc, err := encode.LoadBERTAs(dir, backendName, r.Pooling, dt)
	if err != nil {
		return nil, fmt.Errorf("load retriever: %w", err)
	}
	enc.Normalize = r.Normalize
	enc.QueryInstruction, enc.DocInstruction = r.QueryInstruction, r.DocInstruction
	if r.MaxLength > 0 {
		enc.MaxLength = r.MaxLength
	}
	return enc, nil
}

// copyDir copies the regular files of src (recursively) to dst.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			info, err := os.Stat(path) // follow links (e.g. a "best" checkpoint link's files)
			if err != nil || !info.Mode().IsRegular() {
				return fmt.Errorf("copy %s: not a regular file", path)
			}
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return fmt.Errorf("copy %s: %w", path, err)
		}
		return out.Close()
	})
}
