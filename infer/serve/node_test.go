package serve

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeClient returns a directory with the official openai npm package
// installed (npm install openai@6 into a cache directory under the temp
// dir, once), or skips the test saying what is missing.
func nodeClient(t *testing.T) string {
	t.Helper()
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIP: %s not found (apt-get install nodejs npm) — the end-to-end test with the official openai Node client did not run", bin)
		}
	}
	dir := filepath.Join(os.TempDir(), "ragforge-openai-node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", dir, "openai@6")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("SKIP: npm install openai failed (%v) — the end-to-end test with the official openai Node client did not run:\n%s", err, out)
		}
	}
	return dir
}

// Acceptance 3 with the real client: the openai Node package's default
// embeddings.create (base64) returns the float vector, streamed chat and
// completions deliver text and a final usage chunk, and an unknown model
// is its 404 APIError with code model_not_found.
func TestOfficialNodeClient(t *testing.T) {
	dir := nodeClient(t)
	f := newFixture(t, Options{})
	script, err := filepath.Abs(filepath.Join("testdata", "node", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Node resolves "openai" from the script's directory upwards, so the
	// script is copied next to the installed node_modules.
	run := filepath.Join(dir, "client.mjs")
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(run, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", run, f.ts.URL+"/v1", f.comps.Local.Name(), f.comps.Encoder.Name()).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		EmbeddingDefault, EmbeddingFloat []float64
		EmbeddingUsage                   struct{ Prompt_tokens int }
		ChatStream, CompletionStream     struct {
			Text   string
			Usage  *struct{ Completion_tokens, Total_tokens int }
			Chunks int
		}
		ChatText     string
		UnknownModel struct {
			Status int
			Code   string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.EmbeddingDefault) != 128 || len(got.EmbeddingFloat) != 128 {
		t.Fatalf("embedding dims %d (default) and %d (float), want 128", len(got.EmbeddingDefault), len(got.EmbeddingFloat))
	}
	for i := range got.EmbeddingFloat {
		if math.Abs(got.EmbeddingDefault[i]-got.EmbeddingFloat[i]) > 1e-7 {
			t.Fatalf("component %d: default %v, float %v", i, got.EmbeddingDefault[i], got.EmbeddingFloat[i])
		}
	}
	if got.EmbeddingUsage.Prompt_tokens == 0 {
		t.Error("embeddings usage is zero")
	}
	for name, s := range map[string]struct {
		Text   string
		Usage  *struct{ Completion_tokens, Total_tokens int }
		Chunks int
	}{"chat": got.ChatStream, "completions": got.CompletionStream} {
		if s.Usage == nil || s.Usage.Total_tokens == 0 || s.Chunks < 2 {
			t.Errorf("%s stream: %+v", name, s)
		}
	}
	if got.ChatStream.Text != got.ChatText {
		t.Errorf("streamed chat %q, non-streamed %q", got.ChatStream.Text, got.ChatText)
	}
	if got.UnknownModel.Status != 404 || got.UnknownModel.Code != "model_not_found" {
		t.Errorf("unknown model: %+v", got.UnknownModel)
	}
}
