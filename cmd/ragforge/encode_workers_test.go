package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ragforge/ragforge/data/storedb"
	"github.com/ragforge/ragforge/data/storedb/storedbtest"
)

// writeEncodeCorpus writes a JSONL corpus of n short documents.
func writeEncodeCorpus(t *testing.T, path string, n int) {
	t.Helper()
	words := strings.Fields("aspirin blocks cyclooxygenase and reduces fever while ibuprofen relieves pain in adults with arthritis and heart disease")
	var b bytes.Buffer
	for i := range n {
		var sb strings.Builder
		for j := range 3 + (i*7)%29 {
			sb.WriteString(words[(i*5+j*3)%len(words)] + " ")
		}
		line, _ := json.Marshal(map[string]string{"_id": fmt.Sprint("d", i), "text": sb.String()})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sameTree fails t unless the files under a and b are byte-identical.
func sameTree(t *testing.T, a, b string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(a, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		x, _ := os.ReadFile(p)
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s: differs from the one-process file (%v)", rel, err)
		}
		n++
		return nil
	})
	return n
}

// Four `encode --job` processes encode one corpus through PostgreSQL; the
// first is stopped while it holds a batch (checked in the queue) and killed
// with SIGKILL. Its batch returns to the queue when the lease expires, one
// surviving process merges, and every file (the .npy shards, articles,
// ragforge_encode.json) is byte-identical to a one-process encode's.
func TestEncodeWorkersSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts 5 encoding processes")
	}
	pg := storedbtest.Postgres(t)
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	bin := buildBinary(t, dir)
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	corpus := filepath.Join(dir, "corpus.jsonl")
	writeEncodeCorpus(t, corpus, 5*256+40)
	common := []string{"encode", "--corpus", corpus, "--chunk-size", "0", "--encoder", bert, "--shard-size", "500"}
	ref := filepath.Join(dir, "ref")
	if out, err := exec.Command(bin, append([]string{"--db", db}, append(common, "--out", ref)...)...).CombinedOutput(); err != nil {
		t.Fatalf("one-process encode: %v\n%s", err, out)
	}

	sdb, err := storedb.Open(pg)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	out := filepath.Join(dir, "split")
	job := append([]string{"--db", pg}, append(common, "--out", out, "--job", "enc-job", "--queue-batch", "256", "--lease", "2s", "--log-batches")...)
	claimedRe := regexp.MustCompile(`batch (\d+) claimed`)
	var wg sync.WaitGroup
	outs := make([]string, 4)
	errs := make([]error, 4)
	killed := make(chan int, 1)
	victim := -1
	for k := range 4 {
		if k == 1 {
			select {
			case victim = <-killed:
				t.Logf("victim killed holding batch %d", victim)
			case <-time.After(120 * time.Second):
				t.Fatal("the victim was not caught holding a batch within 120s")
			}
		}
		cmd := exec.Command(bin, job...)
		var stdout syncBuffer
		cmd.Stdout = &stdout
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(stderr)
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
				m := claimedRe.FindStringSubmatch(sc.Text())
				if k != 0 || m == nil {
					continue
				}
				// Stopped, it holds the batch unless it finished it already.
				cmd.Process.Signal(syscall.SIGSTOP)
				n, _ := strconv.Atoi(m[1])
				var status string
				if err := sdb.QueryRow(`SELECT status FROM work_batches WHERE job = ? AND batch = ?`, "enc-job", n).Scan(&status); err != nil {
					t.Error(err)
				}
				if status == "claimed" {
					cmd.Process.Signal(syscall.SIGKILL)
					killed <- n
					break
				}
				cmd.Process.Signal(syscall.SIGCONT)
			}
			io.Copy(io.Discard, stderr)
			errs[k] = cmd.Wait()
			outs[k] = stdout.String() + strings.Join(lines, "\n")
		})
	}
	wg.Wait()
	if ee, ok := errs[0].(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("victim: %v, want killed by SIGKILL\n%s", errs[0], outs[0])
	}
	merged := 0
	for k := 1; k < 4; k++ {
		if errs[k] != nil {
			t.Fatalf("worker %d: %v\n%s", k, errs[k], outs[k])
		}
		if strings.Contains(outs[k], "merged them all") {
			merged++
		}
	}
	if merged != 1 {
		t.Errorf("%d processes merged, want 1:\n%s", merged, strings.Join(outs, "\n----\n"))
	}
	var attempts, done, batches int
	if err := sdb.QueryRow(`SELECT COUNT(*) FILTER (WHERE status = 'done'), COUNT(*) FROM work_batches WHERE job = ?`, "enc-job").Scan(&done, &batches); err != nil {
		t.Fatal(err)
	}
	if err := sdb.QueryRow(`SELECT attempts FROM work_batches WHERE job = ? AND batch = ?`, "enc-job", victim).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	// The victim's batch was claimed again after its lease (a survivor
	// slowed past its own lease by the load could add an attempt; the
	// byte-identical files below show nothing was lost or doubled).
	if batches != 6 || done != 6 || attempts < 2 {
		t.Errorf("queue: %d of %d batches done, the victim's batch %d claimed %d times; want 6 of 6, at least 2", done, batches, victim, attempts)
	}
	var status string
	if err := sdb.QueryRow(`SELECT status FROM runs WHERE id = ?`, "enc-job").Scan(&status); err != nil || status != "done" {
		t.Errorf("shared run status %q (%v), want done", status, err)
	}
	if n := sameTree(t, ref, out); n != 7 {
		t.Errorf("%d files compared, want 7 (3 .npy and 3 articles files of 500 rows, ragforge_encode.json)", n)
	}
	if _, err := os.Stat(filepath.Join(out, ".encode-parts")); !os.IsNotExist(err) {
		t.Errorf("parts left after the merge: %v", err)
	}
}

// `encode --workers 3` on the default SQLite store, and two `--shard`
// processes into one --out, write what one process writes; the first shard
// to finish leaves its parts for the second, which merges.
func TestEncodeWorkersAndShardsEqualOneProcess(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	bert := filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bert)
	corpus := filepath.Join(dir, "corpus.jsonl")
	writeEncodeCorpus(t, corpus, 2*256+30)
	common := []string{"encode", "--db", db, "--corpus", corpus, "--chunk-size", "0", "--encoder", bert}
	ref := filepath.Join(dir, "ref")
	run(t, append(common, "--out", ref)...)
	pool := filepath.Join(dir, "pool")
	var res encodeResult
	if err := json.Unmarshal([]byte(run(t, append(common, "--out", pool, "--workers", "3", "--queue-batch", "256", "--json")...)), &res); err != nil || res.Pending || res.Rows != 2*256+30 {
		t.Fatalf("--workers 3: %+v, %v", res, err)
	}
	if n := sameTree(t, ref, pool); n != 3 {
		t.Errorf("--workers 3: %d files compared, want 3", n)
	}
	shards := filepath.Join(dir, "shards")
	for i, want := range []bool{true, false} {
		var res encodeResult
		out := run(t, append(common, "--out", shards, "--shard", fmt.Sprintf("%d/2", i), "--queue-batch", "256", "--json")...)
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Pending != want {
			t.Fatalf("--shard %d/2: %+v (%v), want pending %v", i, res, err, want)
		}
	}
	if n := sameTree(t, ref, shards); n != 3 {
		t.Errorf("--shard: %d files compared, want 3", n)
	}
}
