package main

import (
	"encoding/csv"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
)

// readmeBlocks returns the ```bash blocks of README.md between two headings.
func readmeBlocks(t *testing.T, from, to string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, from), strings.Index(s, to)
	if i < 0 || j < i {
		t.Fatalf("README.md: headings %q .. %q not found", from, to)
	}
	re := regexp.MustCompile("(?s)```bash\n(.*?)```")
	var blocks []string
	for _, m := range re.FindAllStringSubmatch(s[i:j], -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestREADMEWorkflows runs every command block of the README's Workflows
// section, in order, as a new user would from a checkout with ../shared
// beside it: the real binary, bash, the real data. Only three things are
// changed, for the test's sake: the load test runs 3 s at 4 clients instead of
// 30 s at 32, the judge URL points at a loopback fake judge, and the server's
// readiness is awaited before the next command. ```sh blocks are the
// paper-setting runs of tens of minutes (measured in docs/benchmarks.md,
// `make selflearn-ap`): shown to users, not run here.
func TestREADMEWorkflows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every README workflow (minutes); skipped with -short")
	}
	shared, err := filepath.Abs(sharedDir(t, "data"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(filepath.Join(repo, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(shared), filepath.Join(root, "shared")); err != nil {
		t.Fatal(err)
	}
	// The checkout's own files the README names (the byte-level BPE test
	// tokenizer `models init --arch qwen2` starts from).
	models, err := filepath.Abs(filepath.Join("..", "..", "models"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(models, filepath.Join(repo, "models")); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "ragforge"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	writeVariants(t, filepath.Join(shared, "ap_protocols_qa", "dev.csv"), filepath.Join(repo, "work", "variants.csv"))
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"{\"statements\": [\"s\"], \"verdicts\": [1], \"questions\": [\"q\"], \"attributed\": [1]}"},"finish_reason":"stop"}]}`))
	}))
	defer judge.Close()

	blocks := readmeBlocks(t, "## Workflows", "## Real checkpoints")
	if len(blocks) < 10 {
		t.Fatalf("found only %d bash blocks in the README's Workflows section", len(blocks))
	}
	script := "set -euo pipefail\n" + strings.Join(blocks, "\n")
	script = strings.ReplaceAll(script, "--duration 30s --concurrency 32", "--duration 3s --concurrency 4")
	script = strings.ReplaceAll(script, "http://127.0.0.1:8000/v1#judge-model", judge.URL+"/v1#judge")
	script = regexp.MustCompile(`(?m)^(.*ragforge serve .*&)$`).ReplaceAllString(script,
		"$1\nfor i in $(seq 1200); do curl -sf 127.0.0.1:8080/healthz >/dev/null && break; sleep 0.5; done")
	if !strings.Contains(script, "curl -sf 127.0.0.1:8080/healthz") {
		t.Fatal("the README's serve command was not found")
	}
	os.WriteFile(filepath.Join(root, "readme.sh"), []byte(script), 0o644)
	cmd := exec.Command("bash", filepath.Join(root, "readme.sh"))
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "RAGFORGE_DB=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README workflows failed: %v\n--- output (tail) ---\n%s", err, tail(string(out), 6000))
	}
	for _, want := range []string{"nDCG", "labels", "best checkpoint", "accuracy", "sl-hyde", "pipeline in", "p50", "rouge1"} {
		if !strings.Contains(strings.ToLower(string(out)), strings.ToLower(want)) {
			t.Errorf("README run output lacks %q\n%s", want, tail(string(out), 4000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// writeVariants writes two formulations of the first five AP questions.
func writeVariants(t *testing.T, qaPath, out string) {
	t.Helper()
	qs, err := data.LoadAPQA(qaPath)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	w.Write([]string{"question_id", "variant", "text", "context"})
	for _, q := range qs[:5] {
		w.Write([]string{q.ID, "canonical", q.Text, q.Context})
		words := strings.Fields(q.Text)
		w.Write([]string{q.ID, "short", strings.Join(words[:min(4, len(words))], " "), q.Context})
	}
	w.Flush()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
