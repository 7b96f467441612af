package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Acceptance 4 of the filter issue, with a real process: SIGKILL `train
// filter` mid-run, rerun it with --resume, and reach the final loss of an
// uninterrupted run with the same seed.
func TestTrainFilterSIGKILLResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and trains three times; skipped with -short")
	}
	rag2 := sharedDir(t, "data/rag2_filter/medqa_llama3_cot_5pct-train.json")
	spm := sharedDir(t, "fixtures/tokenizer/spiece.model")
	dir := t.TempDir()
	bin := filepath.Join(dir, "ragforge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := filepath.Join(dir, "runs.db")
	model := filepath.Join(dir, "t5")
	if out, err := exec.Command(bin, "--db", db, "models", "init", "--arch", "t5", "--size", "tiny", "--tokenizer", spm, "--out", model).CombinedOutput(); err != nil {
		t.Fatalf("models init: %v\n%s", err, out)
	}
	args := func(out string, extra ...string) []string {
		return append([]string{"--db", db, "train", "filter", "--model", model, "--train", rag2, "--valid-frac", "0", "--out", out,
			"--max-steps", "16", "--save-steps", "2", "--batch-size", "2", "--max-seq-length", "128", "--doc-stride", "32",
			"--lr", "1e-3", "--seed", "7"}, extra...)
	}
	finalLoss := func(out []byte) float64 {
		var res struct {
			Result struct{ FinalLoss float64 } `json:"result"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("train filter --json: %v\n%s", err, out)
		}
		return res.Result.FinalLoss
	}

	out, err := exec.Command(bin, args(filepath.Join(dir, "a"), "--json")...).Output()
	if err != nil {
		t.Fatalf("uninterrupted run: %v", err)
	}
	want := finalLoss(out)

	killedDir := filepath.Join(dir, "b")
	cmd := exec.Command(bin, args(killedDir)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(killedDir, "checkpoint-4")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no checkpoint-4 after 5 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the run ended before it could be killed (%v); the test needs a longer run", err)
	}
	if _, err := os.Stat(filepath.Join(killedDir, "checkpoint-16")); err == nil {
		t.Fatal("the killed run had already finished")
	}
	out, err = exec.Command(bin, args(killedDir, "--resume", "--json")...).Output()
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	got := finalLoss(out)
	t.Logf("final loss: uninterrupted %.8f, killed at checkpoint >= 4 and resumed %.8f", want, got)
	if math.Abs(got-want) > 1e-5 {
		t.Fatalf("resumed final loss %.8f differs from the uninterrupted %.8f by more than 1e-5", got, want)
	}
}
