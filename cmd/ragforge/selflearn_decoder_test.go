package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"
)

// Issue 33's self-learning acceptance, with real processes: a tiny Qwen2
// from `models init --arch qwen2 --size tiny`, pretrained on the demo
// corpus (`pretrain`: a random decoder writes invalid UTF-8), is the
// generator of a `selflearn` round on that corpus that runs every stage,
// LoRA SFT of the generator included. The same round SIGKILLed after its
// first LoRA checkpoint and run again resumes to identical results: the
// same selected and regenerated texts, adapter bytes, merged generator and
// metrics.
func TestSelflearnDecoderSIGKILLResume(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, pretrains a decoder and runs two rounds; skipped with -short")
	}
	dir, corpus, qa := sampleFiles(t)
	bin := filepath.Join(dir, "ragforge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := filepath.Join(dir, "runs.db")
	sh := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"--db", db}, args...)...).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("ragforge %v: %v\n%s", args, err, stderr)
		}
		return out
	}
	qwen, pt, bert := filepath.Join(dir, "qwen2-tiny"), filepath.Join(dir, "qwen2-tiny-pt"), filepath.Join(dir, "bert")
	sh("models", "init", "--arch", "qwen2", "--size", "tiny", "--tokenizer", filepath.Join("..", "..", "models", "testutil", "tinyqwen", "tokenizer"), "--out", qwen)
	sh("pretrain", "--model", qwen, "--corpus", corpus, "--out", pt, "--max-seq-length", "128", "--batch-size", "8", "--epochs", "30", "--lr", "1e-2")
	sh("models", "init", "--arch", "bert", "--size", "tiny", "--tokenizer", filepath.Join("..", "..", "train", "selflearn", "testdata", "vocab.txt"), "--out", bert)
	args := func(work string) []string {
		return []string{"--db", db, "selflearn", "--corpus", corpus, "--retriever", bert, "--generator", "qwen2:" + pt,
			"--eval-qa", qa, "--eval-limit", "6", "--rounds", "1", "--samples", "8", "--candidates", "2",
			"--max-query-tokens", "8", "--max-doc-tokens", "12", "--gen-temperature", "1", "--max-length", "96",
			"--retriever-batch", "4", "--recipe", "pretrained", "--generator-lr", "1e-3", "--generator-warmup-steps", "0",
			"--generator-save-steps", "1", "--work", work, "--json"}
	}
	type report struct {
		RunID  string `json:"run_id"`
		Rounds []struct {
			Counts   map[string]int `json:"counts"`
			Errors   []string       `json:"errors"`
			Variants []struct {
				Name    string             `json:"name"`
				Metrics map[string]float64 `json:"metrics"`
			} `json:"variants"`
		} `json:"rounds"`
	}
	parse := func(out []byte) report {
		var r report
		if err := json.Unmarshal(out, &r); err != nil || len(r.Rounds) != 2 {
			t.Fatalf("selflearn --json: %v\n%s", err, out)
		}
		return r
	}

	workA := filepath.Join(dir, "a")
	outA, err := exec.Command(bin, args(workA)...).Output()
	if err != nil {
		t.Fatalf("uninterrupted run: %v", err)
	}
	repA := parse(outA)
	t.Logf("round 1 counts %v errors %q", repA.Rounds[1].Counts, repA.Rounds[1].Errors)
	if c := repA.Rounds[1].Counts; c["selected"] < 3 || c["triplets"] == 0 || len(repA.Rounds[1].Variants) == 0 {
		t.Fatalf("round 1 %+v: want at least 3 selected pairs (2 LoRA updates), triplets and evaluated variants", repA.Rounds[1])
	}

	workB := filepath.Join(dir, "b")
	cmd := exec.Command(bin, args(workB)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(workB, "round-1", "generator-lora", "checkpoint-1")
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, err := os.Stat(ckpt); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no LoRA checkpoint-1 after 5 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the run ended before it could be killed (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(workB, "report.json")); err == nil {
		t.Fatal("the killed run had already finished")
	}
	outB, err := exec.Command(bin, args(workB)...).Output()
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	repB := parse(outB)
	if repB.RunID == repA.RunID {
		t.Fatal("the two work dirs share a run")
	}
	for i := range repA.Rounds {
		if !reflect.DeepEqual(repA.Rounds[i].Variants, repB.Rounds[i].Variants) {
			t.Errorf("round %d metrics differ:\n uninterrupted %+v\n resumed       %+v", i, repA.Rounds[i].Variants, repB.Rounds[i].Variants)
		}
	}
	for _, f := range []string{"sft_alpaca.jsonl", "train.jsonl", "generator-lora/adapter/adapter_model.safetensors",
		"generator-lora/adapter/adapter_config.json", "generator/model.safetensors"} {
		a, errA := os.ReadFile(filepath.Join(workA, "round-1", f))
		b, errB := os.ReadFile(filepath.Join(workB, "round-1", f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("round-1/%s differs between the uninterrupted and the killed-and-resumed run (%v, %v)", f, errA, errB)
		}
	}
}
