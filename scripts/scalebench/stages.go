package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
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
	factory := fs.String("factory", "IVF1024,PQ32np", "faiss index_factory string (PQ without np also trains polysemous codes: minutes)")
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

// inflate writes a RAG² corpus of factor × the rows of -from: copy c of row
// i has id "<id>~<c>" and the row's vector plus N(0, σ²) noise per
// dimension (copy 0 unchanged), L2-normalized. It stands in for encoded
// vectors where encoding the corpus itself would take longer than the
// machine allows (docs/scaling.md says where it was used).
func inflate(args []string) error {
	fs := flag.NewFlagSet("inflate", flag.ExitOnError)
	from := fs.String("from", "", "RAG² root written by encode (required)")
	to := fs.String("to", "", "RAG² root to write (required)")
	name := fs.String("name", "corpus", "corpus name in both")
	factor := fs.Int("factor", 10, "copies of each row")
	sigma := fs.Float64("sigma", 0.05, "noise per dimension")
	shardRows := fs.Int("shard-rows", 50_000, "rows per written shard")
	fs.Parse(args)
	if *from == "" || *to == "" || *factor < 1 {
		return fmt.Errorf("inflate: -from and -to are required, -factor ≥ 1")
	}
	shards, dim, err := data.RAG2Shards(*from, *name)
	if err != nil {
		return err
	}
	w, err := data.NewRAG2Writer(*to, *name, dim, *shardRows)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 0x1f1a7e))
	for c := range *factor {
		for _, sh := range shards {
			docs, x, err := sh.Read()
			if err != nil {
				w.Abort()
				return err
			}
			chunks := make([]data.Chunk, len(docs))
			for i, d := range docs {
				chunks[i] = data.Chunk{ID: fmt.Sprintf("%s~%d", d.ID, c), DocID: d.ID, Text: d.Text}
				if c == 0 {
					continue
				}
				row := x[i*dim : (i+1)*dim]
				var norm float64
				for j := range row {
					row[j] += float32(rng.NormFloat64() * *sigma)
					norm += float64(row[j]) * float64(row[j])
				}
				for j := range row {
					row[j] /= float32(math.Sqrt(norm))
				}
			}
			if err := w.Add(chunks, x); err != nil {
				w.Abort()
				return err
			}
		}
	}
	if err := w.Close(data.EncodeInfo{Source: "inflate " + *from}); err != nil {
		return err
	}
	return report(map[string]any{"rows": w.Rows(), "dim": dim})
}
