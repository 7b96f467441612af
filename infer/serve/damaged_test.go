package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
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
		{"filter replaced by a BERT", func(t *testing.T, dir string) {
			f := filepath.Join(dir, pipeline.FilterDir)
			os.RemoveAll(f)
			if err := os.CopyFS(f, os.DirFS(filepath.Join(dir, pipeline.RetrieverDir))); err != nil {
				t.Fatal(err)
			}
		}, `/filter: config.json model_type "bert" is not a T5 filter`},
		{"reranker's vocab.txt longer than its vocab_size", func(t *testing.T, dir string) {
			v := filepath.Join(dir, pipeline.RerankerDir, "vocab.txt")
			b, err := os.ReadFile(v)
			if err != nil {
				t.Fatal(err)
			}
			var extra strings.Builder
			for i := range 64 {
				fmt.Fprintf(&extra, "extra%d\n", i)
			}
			os.WriteFile(v, append(b, extra.String()...), 0o644)
		}, "more than the model's vocab_size"},
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

// failingFilter answers every Predict with err, or with scores.
type failingFilter struct {
	scores []float64
	err    error
}

func (f failingFilter) Predict(context.Context, string, []string) ([]float64, error) {
	return f.scores, f.err
}

// Issue 30, acceptance 5: Load runs each part once, so /healthz lists what
// was checked, and a part that loads but cannot answer (here a filter that
// fails or returns no probability) stops the start naming it.
func TestProbeNamesFailingPart(t *testing.T) {
	f := newFixture(t, Options{})
	code, b := f.call(t, "GET", "/healthz", nil, "")
	var h struct {
		Status  string   `json:"status"`
		Checked []string `json:"checked"`
	}
	decodeInto(t, b, &h)
	want := []string{"bm25", "retriever", "filter", "reranker", "generator"}
	if code != 200 || h.Status != "ok" || strings.Join(h.Checked, ",") != strings.Join(want, ",") {
		t.Errorf("/healthz: %d %s, want ok with checked %v", code, b, want)
	}
	for _, c := range []struct {
		name string
		f    Filter
		want string
	}{
		{"error", failingFilter{err: errors.New("window scoring failed")}, `part "filter" fails its start-up check: window scoring failed`},
		{"NaN", failingFilter{scores: []float64{math.NaN()}}, `part "filter" fails its start-up check: scored 1 snippet as [NaN]`},
		{"no score", failingFilter{}, `part "filter" fails its start-up check: scored 1 snippet as []`},
	} {
		comps := *f.comps
		comps.Filter = c.f
		if _, err := comps.probe(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
