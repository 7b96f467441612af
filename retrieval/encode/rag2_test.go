package encode

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
)

// EncodeRAG2 writes what data.OpenEncoded reads back: the chunks, their
// vectors row for row, sharded, and the settings they were encoded with.
func TestEncodeRAG2RoundTrip(t *testing.T) {
	enc, dir, chunks := savedToy(t)
	out := filepath.Join(t.TempDir(), "enc")
	c := RAG2Corpus{Out: out, Name: "toy", ShardSize: 2, Source: "corpus.jsonl", ChunkSize: 0, Overlap: 128}
	res, err := EncodeRAG2(enc, dir, chunks, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	shards := (len(chunks) + 1) / 2
	if res.Rows != len(chunks) || res.Dim != enc.Dim() || len(res.Embeddings) != shards || len(res.Articles) != shards {
		t.Fatalf("result %+v: want %d rows of dim %d in %d shards", res, len(chunks), enc.Dim(), shards)
	}
	back, err := data.OpenEncoded(data.EncodedScheme + out + "#toy")
	if err != nil {
		t.Fatal(err)
	}
	want, err := enc.EncodeDocs(texts)
	if err != nil {
		t.Fatal(err)
	}
	var flat []float32
	for _, v := range want {
		flat = append(flat, v...)
	}
	if !reflect.DeepEqual(back.Vectors, flat) || len(back.Docs) != len(chunks) || back.Docs[1].Text != texts[1] {
		t.Errorf("read back %d docs, vectors equal %v", len(back.Docs), reflect.DeepEqual(back.Vectors, flat))
	}
	if i := back.Info; i == nil || i.Source != "corpus.jsonl" || i.ChunkOverlap != 0 || i.Pooling != string(enc.Pooling) {
		t.Errorf("info %+v: want the source, overlap 0 for whole documents, the encoder's pooling", i)
	}
	if _, err := EncodeRAG2(enc, dir, chunks, RAG2Corpus{Out: out, Name: "x", ShardSize: -1}, nil); err == nil || !strings.Contains(err.Error(), "shard size -1") {
		t.Errorf("negative shard size: %v", err)
	}
}

// StreamRAG2 writes the files EncodeRAG2 writes, byte for byte, with one
// .npy/.json pair (shard size 0) or sharded, while holding one block.
func TestStreamRAG2EqualsEncodeRAG2(t *testing.T) {
	enc, dir, chunks := savedToy(t)
	walk := func(yield func(data.Chunk) error) error {
		for _, c := range chunks {
			if err := yield(c); err != nil {
				return err
			}
		}
		return nil
	}
	for _, shard := range []int{0, 2} {
		root := t.TempDir()
		c := RAG2Corpus{Out: filepath.Join(root, "whole"), Name: "toy", ShardSize: shard, Source: "corpus.jsonl", ChunkSize: 512, Overlap: 128}
		want, err := EncodeRAG2(enc, dir, chunks, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Out = filepath.Join(root, "stream")
		got, err := StreamRAG2(enc, dir, walk, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Rows != want.Rows || got.Dim != want.Dim || len(got.Embeddings) != len(want.Embeddings) || len(got.Articles) != len(want.Articles) {
			t.Fatalf("shard %d: got %+v, want %+v", shard, got, want)
		}
		for _, sub := range []string{"embeddings/toy", "articles/toy"} {
			ents, err := os.ReadDir(filepath.Join(root, "whole", sub))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				a, errA := os.ReadFile(filepath.Join(root, "whole", sub, e.Name()))
				b, errB := os.ReadFile(filepath.Join(root, "stream", sub, e.Name()))
				if errA != nil || errB != nil || !bytes.Equal(a, b) {
					t.Errorf("shard %d: %s/%s differs (%v, %v)", shard, sub, e.Name(), errA, errB)
				}
			}
		}
	}
}

// savedToy saves the toy encoder as a model directory, loads it back as
// `ragforge encode` does, and gives the test texts as chunks.
func savedToy(t *testing.T) (*BERTEncoder, string, []data.Chunk) {
	t.Helper()
	_, dir := saveToy(t)
	enc, err := LoadBERT(dir, testBackend, "")
	if err != nil {
		t.Fatal(err)
	}
	chunks := make([]data.Chunk, len(texts))
	for i, s := range texts {
		chunks[i] = data.Chunk{ID: "d#" + string(rune('a'+i)), DocID: "d", Index: i, Text: s}
	}
	return enc, dir, chunks
}
