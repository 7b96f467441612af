package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// walkCorpus is chunk.Walk of path with the AP paper's chunking (512/128).
func walkCorpus(path string) func(func(data.Chunk) error) error {
	return func(yield func(data.Chunk) error) error {
		_, err := chunk.Walk(path, data.FieldOptions{}, chunk.DefaultConfig(), yield)
		return err
	}
}

func report(v any) error { return json.NewEncoder(os.Stdout).Encode(v) }

func chunkStage(args []string) error {
	fs := flag.NewFlagSet("chunk", flag.ExitOnError)
	corpus := fs.String("corpus", "", "corpus (required)")
	fs.Parse(args)
	if *corpus == "" {
		return fmt.Errorf("chunk: -corpus is required")
	}
	t0 := time.Now()
	var bytes int64
	st, err := chunk.Walk(*corpus, data.FieldOptions{}, chunk.DefaultConfig(), func(c data.Chunk) error {
		bytes += int64(len(c.Text))
		return nil
	})
	if err != nil {
		return err
	}
	return report(map[string]any{"docs": st.Docs, "chunks": st.Chunks, "text_bytes": bytes, "seconds": time.Since(t0).Seconds()})
}

func bm25Stage(args []string) error {
	fs := flag.NewFlagSet("bm25", flag.ExitOnError)
	corpus := fs.String("corpus", "", "corpus (required)")
	out := fs.String("out", "", "index directory to create (required)")
	shard := fs.Int("shard-size", 100_000, "chunks per bleve shard (0: one index)")
	fs.Parse(args)
	if *corpus == "" || *out == "" {
		return fmt.Errorf("bm25: -corpus and -out are required")
	}
	t0 := time.Now()
	ix, err := bm25.BuildStream(*out, walkCorpus(*corpus), bm25.DefaultConfig(), *shard, nil)
	if err != nil {
		return err
	}
	defer ix.Close()
	return report(map[string]any{"chunks": ix.Count(), "shards": ix.Shards(), "avgdl": ix.AvgDocLen(), "seconds": time.Since(t0).Seconds()})
}

func encodeStage(args []string) error {
	fs := flag.NewFlagSet("encode", flag.ExitOnError)
	corpus := fs.String("corpus", "", "corpus (required)")
	encDir := fs.String("encoder", "", "BERT encoder directory (required)")
	out := fs.String("out", "", "RAG² root to write (required)")
	name := fs.String("name", "corpus", "corpus name under -out")
	shardRows := fs.Int("shard-rows", 50_000, "rows per .npy/.json shard")
	maxLen := fs.Int("max-length", 128, "tokens per chunk, specials included")
	batch := fs.Int("batch-size", 64, "texts per forward pass")
	fs.Parse(args)
	if *corpus == "" || *encDir == "" || *out == "" {
		return fmt.Errorf("encode: -corpus, -encoder and -out are required")
	}
	enc, err := encode.LoadBERT(*encDir, os.Getenv("GOMLX_BACKEND"), "")
	if err != nil {
		return err
	}
	enc.MaxLength, enc.BatchSize = *maxLen, *batch
	info, err := enc.Info(*encDir)
	if err != nil {
		return err
	}
	info.Source, info.ChunkSize, info.ChunkOverlap = *corpus, chunk.DefaultConfig().Size, chunk.DefaultConfig().Overlap
	t0 := time.Now()
	last := time.Now()
	n, err := encode.EncodeToRAG2(enc, walkCorpus(*corpus), *out, *name, *shardRows, info, func(done int) {
		if time.Since(last) > time.Minute {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "encode: %d chunks in %.0f s\n", done, time.Since(t0).Seconds())
		}
	})
	if err != nil {
		return err
	}
	return report(map[string]any{"chunks": n, "dim": enc.Dim(), "seconds": time.Since(t0).Seconds()})
}

func faissStage(args []string) error {
	fs := flag.NewFlagSet("faiss", flag.ExitOnError)
	encoded := fs.String("encoded", "", "RAG² root written by encode (required)")
	name := fs.String("name", "corpus", "corpus name under -encoded")
	factory := fs.String("factory", "IVF1024,PQ32", "faiss index_factory string")
	trainRows := fs.Int("train-rows", dense.DefaultTrainRows, "training sample size")
	out := fs.String("out", "", "directory to save the index to (required)")
	fs.Parse(args)
	if *encoded == "" || *out == "" {
		return fmt.Errorf("faiss: -encoded and -out are required")
	}
	t0 := time.Now()
	ix, err := dense.BuildRAG2(*encoded, *name, *factory, dense.StreamOptions{TrainRows: *trainRows, Seed: 1})
	if err != nil {
		return err
	}
	defer ix.Close()
	build := time.Since(t0).Seconds()
	if err := ix.Save(*out); err != nil {
		return err
	}
	var size int64
	if st, err := os.Stat(filepath.Join(*out, dense.IndexFile)); err == nil {
		size = st.Size()
	}
	return report(map[string]any{"rows": ix.Len(), "factory": *factory, "train_rows": *trainRows, "build_s": build, "seconds": time.Since(t0).Seconds(), "index_bytes": size})
}
