package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
)

// Issue 30, acceptance 5: serve refuses to start on a pipeline whose parts
// are missing or mismatched, naming the part, instead of starting without
// the filter or answering every dense request 500 with /healthz "ok".
func TestLoadRefusesDamagedPipeline(t *testing.T) {
	src := buildPipeline(t)
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"filter deleted", func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, pipeline.FilterDir))
		}, `part "filter", listed in pipeline.json, is missing`},
		{"generator replaced by a file", func(t *testing.T, dir string) {
			g := filepath.Join(dir, pipeline.GeneratorDir)
			os.RemoveAll(g)
			os.WriteFile(g, []byte("x"), 0o644)
		}, `part "generator", listed in pipeline.json, is missing or unreadable (not a directory)`},
		{"retriever of another width", func(t *testing.T, dir string) {
			r := filepath.Join(dir, pipeline.RetrieverDir)
			wp, err := wordpiece.Load(r)
			if err != nil {
				t.Fatal(err)
			}
			be, err := backend.New("")
			if err != nil {
				t.Fatal(err)
			}
			cfg := bert.TinyConfig(wp.Len())
			cfg.HiddenSize, cfg.IntermediateSize = cfg.HiddenSize/2, cfg.IntermediateSize/2
			m, err := bert.NewRandom(be, cfg, false, 9)
			if err != nil {
				t.Fatal(err)
			}
			os.RemoveAll(r)
			if err := m.Save(r); err != nil {
				t.Fatal(err)
			}
			if err := wp.Save(r); err != nil {
				t.Fatal(err)
			}
		}, "dimensions but corpus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "p")
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			if comps, err := Load(Config{PipelineDir: dir}); err != nil {
				t.Fatalf("undamaged copy: %v", err)
			} else {
				comps.Pipeline.Close()
			}
			c.damage(t, dir)
			comps, err := Load(Config{PipelineDir: dir})
			if err == nil {
				comps.Pipeline.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load: %v, want an error containing %q", err, c.want)
			}
		})
	}
}
