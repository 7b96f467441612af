package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ragforge/ragforge/infer/serve"
	"github.com/ragforge/ragforge/internal/atomicfile"
)

// serveQuestion is the demo's one /v1/pipeline request.
const serveQuestion = "How long does the retrieval step run and at what temperature?"

// serveOnce starts the server of the pipeline run on a free loopback port,
// makes one /v1/pipeline call, and stops it as SIGTERM would.
func serveOnce(ctx context.Context, st *state) (Stage, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := serve.DefaultRunConfig("", "127.0.0.1:0")
	cfg.RunID, cfg.Backend = st.dirs["pipeline-run"], st.o.Backend
	cfg.OpenRead, cfg.RequestTimeout, cfg.MaxBodyBytes = true, 5*time.Minute, 1<<20
	// cfg.Log stays nil: request logs would drown the demo's output.
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve.RunWithStore(sctx, st.store, cfg, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		return Stage{}, fmt.Errorf("serve: %w", err)
	case <-time.After(5 * time.Minute):
		return Stage{}, fmt.Errorf("serve did not start")
	}
	body := fmt.Sprintf(`{"question":%q,"k":4}`, serveQuestion)
	start := time.Now()
	b, err := postPipeline(ctx, "http://"+addr+"/v1/pipeline", body)
	if err != nil {
		return Stage{}, err
	}
	var pr struct {
		Retrieved []json.RawMessage `json:"retrieved"`
		Kept      []json.RawMessage `json:"kept"`
		Answer    string            `json:"answer"`
	}
	_ = json.Unmarshal(b, &pr)
	took := time.Since(start).Seconds()
	cancel()
	if err := <-done; err != nil {
		return Stage{}, fmt.Errorf("serve stopped with: %w", err)
	}
	resp := st.path("pipeline-response.json")
	if err := atomicfile.WriteBytes(resp, b, 0o644); err != nil {
		return Stage{}, err
	}
	return Stage{
		Command:   fmt.Sprintf("ragforge --db %s serve --run %s --addr 127.0.0.1:8080 --open-read\n  curl -s -XPOST 127.0.0.1:8080/v1/pipeline -H 'Content-Type: application/json' -d '%s'", st.db, st.dirs["pipeline-run"], body),
		Metrics:   map[string]float64{"pipeline_seconds": took, "retrieved": float64(len(pr.Retrieved)), "kept": float64(len(pr.Kept))},
		Artifacts: []string{resp},
	}, nil
}

// postPipeline posts body to url and returns the response body, an error
// unless the status is 200.
func postPipeline(ctx context.Context, url, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("/v1/pipeline: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/v1/pipeline: HTTP %d: %s", resp.StatusCode, b)
	}
	return b, nil
}
