package serve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/infer/serve"
	"github.com/ragforge/ragforge/retrieval/evalrun"
)

// The three library calls behind `eval retrieval`, `pipeline build
// --from-run` and `serve --run`, without the CLI: the pipeline serves the
// evaluated setting and answers /v1/retrieve until its context ends.
func TestRunWithStoreServesAnEvaluatedPipeline(t *testing.T) {
	dir := t.TempDir()
	corpus, qa, err := sample.WriteTo(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tracker.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	ecfg := evalrun.DefaultConfig(corpus, qa)
	ecfg.Ks, ecfg.Retriever.Preset = "1,3", "rank_bm25"
	ev, err := evalrun.Run(ctx, st, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	bcfg := pipeline.DefaultBuildConfig(filepath.Join(dir, "pipeline"), "lab="+corpus)
	bcfg.FromRun = ev.RunID
	built, err := pipeline.BuildRun(ctx, st, bcfg)
	if err != nil {
		t.Fatal(err)
	}
	m := built.Manifest
	if m.FromRun != ev.RunID || m.Retrieval.K != 3 || m.BM25.K1 != 1.5 || m.Retrieval.Mode != "bm25" {
		t.Errorf("manifest: from_run %q k %d k1 %v mode %s; want %s, 3 (the largest evaluated), 1.5 (rank_bm25), bm25",
			m.FromRun, m.Retrieval.K, m.BM25.K1, m.Retrieval.Mode, ev.RunID)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- serve.RunWithStore(sctx, st, serve.RunConfig{Options: loopback(), RunID: built.RunID}, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("RunWithStore: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("server did not start")
	}
	resp, err := http.Post("http://"+addr+"/v1/retrieve", "application/json", strings.NewReader(`{"query":"formalin fixation of surgical specimens","k":2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct {
		Hits []json.RawMessage `json:"hits"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil || len(got.Hits) != 2 {
		t.Errorf("/v1/retrieve: HTTP %d: %s", resp.StatusCode, b)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("RunWithStore after cancel: %v", err)
	}
}

// An unknown RunConfig.DType is refused before the pipeline loads, even
// one (here: no directory at all) whose models would never read it.
func TestRunWithStoreRefusesUnknownDType(t *testing.T) {
	dir := t.TempDir()
	st, err := tracker.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := serve.RunConfig{Options: loopback(), Pipeline: filepath.Join(dir, "absent"), DType: "half"}
	err = serve.RunWithStore(context.Background(), st, c, nil)
	if err == nil || !strings.Contains(err.Error(), `dtype "half": want auto, float32, bfloat16 or float16`) {
		t.Fatalf("RunWithStore with DType half: %v", err)
	}
}

func loopback() serve.Options {
	o := serve.DefaultOptions()
	o.Addr, o.OpenRead = "127.0.0.1:0", true
	return o
}
