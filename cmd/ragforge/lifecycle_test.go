package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/data/tracker"
)

// syncBuffer is a bytes.Buffer safe for a child's stderr and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// buildBinary builds ragforge into dir.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "ragforge")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runOf returns the newest run of kind in db, or nil.
func runOf(t *testing.T, db, kind string) *tracker.RunInfo {
	t.Helper()
	st, err := tracker.OpenRead(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := st.List(tracker.ListOptions{Kind: kind, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(l) == 0 {
		return nil
	}
	return &l[0]
}

// signalRun starts bin with args, waits until ready() (polled) and the
// newest run of kind is a new running one, sends sig, and returns the
// run as the store shows it after the process ended, with the exit code
// (-1 when killed by the signal).
func signalRun(t *testing.T, bin, db, kind string, sig syscall.Signal, ready func() bool, args ...string) (tracker.RunInfo, int, string) {
	t.Helper()
	var before string
	if r := runOf(t, db, kind); r != nil {
		before = r.ID
	}
	cmd := exec.Command(bin, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if r := runOf(t, db, kind); r != nil && r.ID != before && r.Status == tracker.StatusRunning && (ready == nil || ready()) {
			break
		}
		if cmd.ProcessState != nil || time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s: no running %s run to signal\n%s", strings.Join(args, " "), kind, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	r := runOf(t, db, kind)
	if r == nil || r.ID == before {
		t.Fatalf("no new %s run", kind)
	}
	return *r, code, stderr.String()
}

// Acceptance 5 of the serve-safety issue: SIGINT and SIGTERM finish the run
// as interrupted with exit 128+signal, SIGKILL leaves it stale (never
// running), `runs gc` closes stale runs, and `train filter --resume` after
// a kill continues the same run id with one metric row per step.
func TestRunLifecycleSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and trains several times; skipped with -short")
	}
	rag2 := sharedDir(t, "data/rag2_filter/medqa_llama3_cot_5pct-train.json")
	spm := sharedDir(t, "fixtures/tokenizer/spiece.model")
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	db := filepath.Join(dir, "runs.db")
	t5 := filepath.Join(dir, "t5")
	bert := filepath.Join(dir, "bert")
	for _, a := range [][]string{
		{"models", "init", "--arch", "t5", "--size", "tiny", "--tokenizer", spm, "--out", t5},
		{"models", "init", "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert},
	} {
		if out, err := exec.Command(bin, append([]string{"--db", db}, a...)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", a, err, out)
		}
	}
	corpus, qa, err := sample.WriteTo(filepath.Join(dir, "sample"))
	if err != nil {
		t.Fatal(err)
	}
	trainArgs := func(out string, extra ...string) []string {
		return append([]string{"--db", db, "train", "filter", "--model", t5, "--train", rag2, "--valid-frac", "0", "--out", out,
			"--max-steps", "40", "--save-steps", "2", "--batch-size", "2", "--max-seq-length", "128", "--doc-stride", "32",
			"--lr", "1e-3", "--seed", "7"}, extra...)
	}
	exists := func(p string) func() bool {
		return func() bool { _, err := os.Stat(p); return err == nil }
	}
	wantCode := map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143, syscall.SIGKILL: -1}
	check := func(what string, sig syscall.Signal, r tracker.RunInfo, code int, stderr string) {
		t.Helper()
		want := tracker.StatusInterrupted
		if sig == syscall.SIGKILL {
			want = tracker.StatusStale
		}
		t.Logf("%s, %v: exit %d, run %s %s %q", what, sig, code, r.ID, r.Status, r.Error)
		if r.Status != want || code != wantCode[sig] {
			t.Errorf("%s after %v: run %s, exit %d; want %s, exit %d\nstderr: %s", what, sig, r.Status, code, want, wantCode[sig], stderr)
		}
		if sig != syscall.SIGKILL && !strings.Contains(r.Error, "interrupted by "+sigName(sig)) {
			t.Errorf("%s after %v: error %q does not name the signal", what, sig, r.Error)
		}
	}

	var killed tracker.RunInfo
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		out := filepath.Join(dir, "filter-"+sig.String())
		r, code, stderr := signalRun(t, bin, db, "train-filter", sig, exists(filepath.Join(out, "checkpoint-2")), trainArgs(out)...)
		check("train filter", sig, r, code, stderr)
		if sig == syscall.SIGKILL {
			killed = r
		}
	}
	// Resume the killed training: same run id, metrics continue at the checkpoint's step.
	out, err := exec.Command(bin, trainArgs(filepath.Join(dir, "filter-"+syscall.SIGKILL.String()), "--resume", "--json")...).Output()
	if err != nil {
		t.Fatalf("train filter --resume: %v", err)
	}
	var res struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("train filter --resume --json: %v\n%s", err, out)
	}
	if res.RunID != killed.ID {
		t.Errorf("--resume ran as %s, want the killed run %s", res.RunID, killed.ID)
	}
	show, err := exec.Command(bin, "--db", db, "runs", "show", killed.ID, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var d tracker.RunDetail
	if err := json.Unmarshal(show, &d); err != nil {
		t.Fatal(err)
	}
	steps := map[string]map[int]int{}
	for _, m := range d.Metrics {
		if steps[m.Name] == nil {
			steps[m.Name] = map[int]int{}
		}
		steps[m.Name][m.Step]++
	}
	if d.Status != tracker.StatusDone || len(steps["train/loss"]) != 40 {
		t.Errorf("resumed run: status %s, %d train/loss steps; want done with steps 1..40", d.Status, len(steps["train/loss"]))
	}
	for name, byStep := range steps {
		for step, n := range byStep {
			if n != 1 {
				t.Errorf("metric %s step %d recorded %d times", name, step, n)
			}
		}
	}

	slArgs := func(work string) []string {
		return []string{"--db", db, "selflearn", "--corpus", corpus, "--retriever", bert, "--generator", "ict", "--eval-qa", qa,
			"--eval-limit", "12", "--rounds", "1", "--candidates", "2", "--max-length", "96", "--retriever-batch", "4", "--work", work}
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		work := filepath.Join(dir, "selflearn-"+sig.String())
		r, code, stderr := signalRun(t, bin, db, "selflearn", sig, exists(filepath.Join(work, "run.json")), slArgs(work)...)
		check("selflearn", sig, r, code, stderr)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		r, code, stderr := signalRun(t, bin, db, "label-perplexity", sig, nil,
			"--db", db, "label", "perplexity", "--corpus", corpus, "--qa", qa, "--scorer", "t5:"+t5)
		check("label perplexity", sig, r, code, stderr)
	}

	gc, err := exec.Command(bin, "--db", db, "runs", "gc", "--json").Output()
	if err != nil {
		t.Fatalf("runs gc: %v", err)
	}
	var marked struct {
		IDs []string `json:"marked_failed"`
	}
	json.Unmarshal(gc, &marked)
	if len(marked.IDs) != 2 {
		t.Errorf("runs gc marked %v, want the killed selflearn and label perplexity runs", marked.IDs)
	}
	list, err := exec.Command(bin, "--db", db, "runs", "list", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var all []tracker.RunInfo
	json.Unmarshal(list, &all)
	for _, r := range all {
		if r.Status == tracker.StatusRunning || r.Status == tracker.StatusStale {
			t.Errorf("after gc, run %s (%s) reads %s", r.ID, r.Kind, r.Status)
		}
	}
}

// label import of a large file: SIGINT or SIGTERM stops it before its
// labels are committed (or, while it parses the file, the grace period runs
// out) and its run reads interrupted with exit 130 or 143; SIGKILL leaves it
// stale.
func TestLabelImportSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and imports a large file; skipped with -short")
	}
	rag2 := sharedDir(t, "data/rag2_filter/medqa_llama3_cot_5pct-train.json")
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	db := filepath.Join(dir, "runs.db")
	var src []map[string]string
	b, err := os.ReadFile(rag2)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &src); err != nil {
		t.Fatal(err)
	}
	// Enough distinct labels that the import outlasts the signal's grace period.
	var big bytes.Buffer
	for i := 0; i < 40000; i++ {
		e := src[i%len(src)]
		q := strings.Replace(e["question"], "Evidence: ", fmt.Sprintf("Evidence: (%d) ", i), 1)
		line, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("big_%d", i), "question": q, "answer": e["answer"], "dataset_name": "big"})
		big.Write(append(line, '\n'))
	}
	file := filepath.Join(dir, "big.jsonl")
	if err := os.WriteFile(file, big.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		r, code, stderr := signalRun(t, bin, db, "label-import", sig, nil, "--db", db, "label", "import", file)
		t.Logf("label import, %v: exit %d, run %s %s %q", sig, code, r.ID, r.Status, r.Error)
		want := 128 + int(sig)
		switch {
		case sig == syscall.SIGKILL:
			if r.Status != tracker.StatusStale {
				t.Errorf("after SIGKILL the run reads %s, want stale", r.Status)
			}
		case r.Status == tracker.StatusDone && code == 0:
			t.Logf("the import finished within the grace period")
		case r.Status != tracker.StatusInterrupted || code != want:
			t.Errorf("after %v: run %s, exit %d; want interrupted, %d\n%s", sig, r.Status, code, want, stderr)
		}
	}
}

// Acceptance 6: --db is a file path ('#' is literal), and a bit-flipped
// database is refused for writes with how to recover, while runs list
// still reads it with a warning.
func TestDBPathAndCorruptStore(t *testing.T) {
	rag2 := sharedDir(t, "data/rag2_filter/medqa_llama3_cot_5pct-train.json")
	dir := t.TempDir()
	db := filepath.Join(dir, "x#y.db")
	run(t, "--db", db, "label", "import", rag2)
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "x#y.db" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("--db %s made %q, want exactly x#y.db", db, names)
	}
	id := strings.TrimSpace(run(t, "--db", db, "runs", "list", "-q"))

	// Flip the bytes of the labels table's root page header.
	st, err := tracker.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	var root, pageSize int
	st.DB().QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = 'labels'`).Scan(&root)
	st.DB().QueryRow(`PRAGMA page_size`).Scan(&pageSize)
	st.Close()
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	f.ReadAt(buf, int64((root-1)*pageSize))
	for i := range buf {
		buf[i] ^= 0xa5
	}
	f.WriteAt(buf, int64((root-1)*pageSize))
	f.Close()
	before, _ := os.ReadFile(db)

	code, stderr := runErr("--db", db, "label", "import", rag2)
	t.Logf("label import into the corrupt file: exit %d: %s", code, stderr)
	if code == 0 || !strings.Contains(stderr, "database is corrupt") || !strings.Contains(stderr, ".recover | sqlite3 fixed.db") || !strings.Contains(stderr, "restore") {
		t.Errorf("write to a corrupt store: exit %d, stderr %q; want a refusal naming .recover and restore", code, stderr)
	}
	var out, errb bytes.Buffer
	if code := execute([]string{"--db", db, "runs", "list", "-q"}, &out, &errb); code != 0 || strings.TrimSpace(out.String()) != id ||
		!strings.Contains(errb.String(), "warning") {
		t.Errorf("runs list on the corrupt store: exit %d, out %q, stderr %q; want the run and a warning", code, out.String(), errb.String())
	}
	after, _ := os.ReadFile(db)
	if !bytes.Equal(before, after) {
		t.Error("the corrupt database file changed")
	}
}

// runs mark refuses a run whose process (this test) is alive unless --force.
func TestRunsMarkLiveRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	st, err := tracker.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Start("train-filter", nil, "v", "go")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, stderr := runErr("--db", db, "runs", "mark", r.ID, "--status", "failed")
	if code == 0 || !strings.Contains(stderr, "still running") || !strings.Contains(stderr, "--force") {
		t.Errorf("marking a live run: exit %d, %q", code, stderr)
	}
	run(t, "--db", db, "runs", "mark", r.ID, "--status", "failed", "--force", "--message", "test")
	if show := run(t, "--db", db, "runs", "show", r.ID); !strings.Contains(show, "status   failed") || !strings.Contains(show, "error    test") {
		t.Errorf("runs show after mark:\n%s", show)
	}
}

// epipeWriter fails every write as a pipe whose reader exited.
type epipeWriter struct{}

func (epipeWriter) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}
}

// A closed stdout ends the command with exit 141 and its run done (the
// work is stored; only printing failed), not running.
func TestBrokenStdoutFinishesRun(t *testing.T) {
	rag2 := sharedDir(t, "data/rag2_filter/medqa_llama3_cot_5pct-train.json")
	db := filepath.Join(t.TempDir(), "runs.db")
	var errb bytes.Buffer
	if code := execute([]string{"--db", db, "label", "import", rag2, "--json"}, epipeWriter{}, &errb); code != 141 {
		t.Errorf("exit %d, want 141; stderr %q", code, errb.String())
	}
	r := runOf(t, db, "label-import")
	if r == nil || r.Status != tracker.StatusDone {
		t.Fatalf("run after a broken stdout: %+v", r)
	}
}
