package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ragforge/ragforge/infer/pipeline"
)

// pipeline.json records the chunking the build used.
func TestPipelineManifestRecordsChunking(t *testing.T) {
	dir, corpus, _ := sampleFiles(t)
	for _, tc := range []struct {
		size, overlap string
		want          pipeline.ChunkInfo
	}{
		{"300", "50", pipeline.ChunkInfo{Size: 300, Overlap: 50, Unit: "runes"}},
		{"0", "0", pipeline.ChunkInfo{Unit: "document"}},
	} {
		out := filepath.Join(dir, "pipe-"+tc.size)
		run(t, "pipeline", "build", "--db", filepath.Join(dir, "runs.db"), "--corpus", corpus, "--chunk-size", tc.size, "--chunk-overlap", tc.overlap, "--out", out)
		b, err := os.ReadFile(filepath.Join(out, "pipeline.json"))
		if err != nil {
			t.Fatal(err)
		}
		var man struct {
			Chunk pipeline.ChunkInfo `json:"chunk"`
		}
		if err := json.Unmarshal(b, &man); err != nil {
			t.Fatal(err)
		}
		if man.Chunk.Size != tc.want.Size || man.Chunk.Overlap != tc.want.Overlap || man.Chunk.Unit != tc.want.Unit {
			t.Errorf("--chunk-size %s: pipeline.json chunk %+v, want %+v", tc.size, man.Chunk, tc.want)
		}
	}
}
