package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
)

// loraBaseDir is qwen2-tiny with a 75-token WordPiece vocabulary (ids fit
// its 512 rows), as a model directory train lora reads.
func loraBaseDir(t *testing.T) string {
	t.Helper()
	src := testutil.SharedPath(t, "fixtures/qwen2-tiny")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		if err := hf.CopyFile(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := hf.CopyFile(filepath.Join("..", "..", "train", "selflearn", "testdata", "vocab.txt"), filepath.Join(dir, "vocab.txt")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// train lora trains on the SFT JSONL selflearn writes, records a run and
// leaves a PEFT adapter folder and a merged checkpoint that load.
func TestTrainLoRA(t *testing.T) {
	base := loraBaseDir(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	data := filepath.Join("..", "..", "train", "selflearn", "testdata", "sft_alpaca.golden.jsonl")
	stdout := run(t, "--db", filepath.Join(dir, "runs.db"), "--backend", "go", "--json", "train", "lora", "--model", base, "--data", data, "--out", out,
		"--r", "4", "--lora-alpha", "8", "--target-modules", "all-linear", "--lr", "1e-3", "--warmup-steps", "1", "--epochs", "2",
		"--batch-size", "1", "--grad-accum", "2", "--merge")
	var res struct {
		RunID  string `json:"run_id"`
		Result struct {
			GlobalStep, TotalSteps int
			AdapterDir, MergedDir  string
			History                []struct{ Loss float64 }
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	// 2 records, 1 per micro-batch, 2 micro-batches per update: 1 update per epoch.
	if res.RunID == "" || res.Result.GlobalStep != 2 || res.Result.TotalSteps != 2 || len(res.Result.History) != 2 {
		t.Fatalf("result %+v, want a run of 2 updates", res)
	}
	cfg, err := os.ReadFile(filepath.Join(res.Result.AdapterDir, decoder.AdapterConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), `"r": 4,`) || !strings.Contains(string(cfg), `"down_proj",`) {
		t.Errorf("adapter_config.json lacks the run's settings:\n%s", cfg)
	}
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	m, err := decoder.Load(be, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadAdapter(res.Result.AdapterDir); err != nil {
		t.Fatal(err)
	}
	if _, err := decoder.Load(be, res.Result.MergedDir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(res.Result.MergedDir, "vocab.txt")); err != nil {
		t.Errorf("merged checkpoint lacks the tokenizer: %v", err)
	}
	// Continuing the adapter in a new run: the same settings, or an error
	// naming both.
	more := []string{"--db", filepath.Join(dir, "runs.db"), "--backend", "go", "train", "lora", "--model", base, "--data", data,
		"--init-adapter", res.Result.AdapterDir, "--lora-alpha", "8", "--target-modules", "all-linear", "--epochs", "1"}
	run(t, append(more, "--out", filepath.Join(dir, "more"), "--r", "4")...)
	if code, stderr := runErr(append(more, "--out", filepath.Join(dir, "other"), "--r", "8")...); code == 0 || !strings.Contains(stderr, "the run asks for r 8") {
		t.Errorf("--init-adapter with another r: exit %d, stderr %q; want an error naming both", code, stderr)
	}
	// A second run into the same --out without --resume is refused.
	code, stderr := runErr("--db", filepath.Join(dir, "runs.db"), "--backend", "go", "train", "lora", "--model", base, "--data", data, "--out", out)
	if code == 0 || !strings.Contains(stderr, "resume") {
		t.Errorf("rerun: exit %d, stderr %q; want a refusal naming --resume", code, stderr)
	}
}

// A LoRA flag value that makes no sense is an error naming the field,
// before anything is read or stored.
func TestTrainLoRABadFlags(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--db", filepath.Join(dir, "runs.db"), "train", "lora", "--model", dir, "--data", filepath.Join(dir, "missing.jsonl"), "--out", filepath.Join(dir, "out")}
	for _, tc := range []struct{ flag, value, want string }{
		{"--r", "0", "r must be > 0"},
		{"--lora-alpha", "0", "lora_alpha"},
		{"--lora-dropout", "1", "lora_dropout"},
		{"--target-modules", "q_proj,c_attn", `"c_attn"`},
		{"--target-modules", "", "target_modules"},
		{"--lr", "0", "LearningRate"},
		{"--grad-accum", "0", "GradAccumulation"},
		{"--max-grad-norm", "-1", "MaxGradNorm"},
	} {
		code, stderr := runErr(append(base, tc.flag, tc.value)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s %q: exit %d, stderr %q; want an error containing %s", tc.flag, tc.value, code, stderr, tc.want)
		}
	}
}
