package demo

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/modelinit"
	"github.com/ragforge/ragforge/retrieval/fusion"
)

// Issue 30, acceptance 6 (demo): a tuned hybrid whose ragforge_fusion.json
// chose dense weight 0 is named "BM25 (dense weight 0)" in the demo's
// summary, and the demo's pipeline build reads that evaluation run, so the
// pipeline serves weights 0 / 1, not the defaults 0.3 / 0.7.
func TestTunedHybridWithDenseWeightZero(t *testing.T) {
	vocab := testutil.SharedPath(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	corpus, qa, err := sample.WriteTo(dir)
	if err != nil {
		t.Fatal(err)
	}
	bert := filepath.Join(dir, "bert")
	if _, err := modelinit.Init(modelinit.Options{Arch: "bert", Size: "tiny", Tokenizer: vocab, Out: bert, Seed: 42, TokenMatchScore: 8}); err != nil {
		t.Fatal(err)
	}
	if err := fusion.WriteWeights(bert, fusion.Weights{Dense: 0, BM25: 1, ChosenBy: "test"}); err != nil {
		t.Fatal(err)
	}
	store, err := tracker.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	o := DefaultOptions()
	o.Work, o.ChunkSize, o.Overlap = dir, 300, 50
	var log bytes.Buffer
	st := &state{o: o, log: &log, db: store.Path(), store: store, corpus: corpus, qa: qa,
		dirs: map[string]string{"retriever-tuned": bert}, metric: map[string]map[string]float64{"retrieval: BM25": {"nDCG@10": 0.5, "P@1": 0.5}}}
	line, err := evalTuned(context.Background(), st)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if line.Name != "retrieval: BM25 (dense weight 0), self-learned retriever unused" || len(line.Versus) == 0 || line.Versus[0].Model != "BM25 (dense weight 0)" {
		t.Errorf("summary line %q, versus %+v; want it named BM25 (dense weight 0)", line.Name, line.Versus)
	}
	pl := filepath.Join(dir, "pipeline")
	cfg := pipeline.DefaultBuildConfig(pl, "lab="+corpus)
	cfg.FromRun, cfg.K = st.dirs["retrieval-tuned-run"], 4
	cfg.Given = func(flag string) bool { return flag == "k" }
	if _, err := pipeline.BuildRun(context.Background(), store, cfg); err != nil {
		t.Fatal(err)
	}
	m, err := pipeline.ReadManifest(filepath.Join(pl, pipeline.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if r := m.Retrieval; r.Mode != "hybrid" || r.DenseWeight != 0 || r.BM25Weight != 1 || m.FromRun != line.RunID {
		t.Errorf("pipeline.json retrieval %+v from_run %q; want hybrid 0/1 from %s", r, m.FromRun, line.RunID)
	}
}
