package tracker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/storedb"
	"github.com/ragforge/ragforge/data/storedb/storedbtest"
)

// deadPID returns the PID of a child process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	return cmd.Process.Pid
}

// setOwner rewrites the owner columns of run id, as another process would have stored them.
func setOwner(t *testing.T, s *Store, id string, pid int, host, token string) {
	t.Helper()
	if _, err := s.db.Exec(`UPDATE runs SET pid = ?, host = ?, proc_token = ? WHERE id = ?`, pid, host, token, id); err != nil {
		t.Fatal(err)
	}
}

func TestStaleStatus(t *testing.T) { storedbtest.Each(t, testStaleStatus) }

func testStaleStatus(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	host := s.self.Host
	dead := deadPID(t)
	tests := []struct {
		name  string
		owner func(id string)
		want  string
	}{
		{"this process", func(string) {}, StatusRunning},
		{"dead pid on this host", func(id string) { setOwner(t, s, id, dead, host, "") }, StatusStale},
		{"pid reused by another process", func(id string) { setOwner(t, s, id, os.Getpid(), host, "boot/1") }, StatusStale},
		{"dead pid on another host", func(id string) { setOwner(t, s, id, dead, host+"-elsewhere", "") }, StatusRunning},
		{"recorded before owners were", func(id string) { setOwner(t, s, id, 0, "", "") }, StatusRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := s.Start("train", nil, "v", "cpu")
			if err != nil {
				t.Fatal(err)
			}
			tt.owner(r.ID)
			d, err := s.Get(r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != tt.want {
				t.Errorf("Get: status %q, want %q (pid %d host %s)", d.Status, tt.want, d.PID, d.Host)
			}
			for _, st := range []string{StatusRunning, StatusStale} {
				l, err := s.List(ListOptions{Status: st})
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, ri := range l {
					found = found || ri.ID == r.ID
				}
				if found != (st == tt.want) {
					t.Errorf("List(status %s) lists the run: %v, want %v", st, found, st == tt.want)
				}
			}
			if err := r.Finish(nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := s.List(ListOptions{Status: "bogus"}); err == nil || !strings.Contains(err.Error(), `status "bogus"`) {
		t.Errorf("List(status bogus) err = %v", err)
	}
}

func TestStartRecordsOwner(t *testing.T) { storedbtest.Each(t, testStartRecordsOwner) }

func testStartRecordsOwner(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	r, _ := s.Start("x", nil, "v", "cpu")
	d, err := s.Get(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if d.PID != os.Getpid() || d.Host != host {
		t.Errorf("owner pid %d host %q, want %d %q", d.PID, d.Host, os.Getpid(), host)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && d.procToken == "" {
		t.Error("no process start token recorded although /proc is there")
	}
}

func TestFinishStatuses(t *testing.T) { storedbtest.Each(t, testFinishStatuses) }

func testFinishStatuses(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	tests := []struct {
		err  error
		want string
	}{
		{nil, StatusDone},
		{errors.New("loss is NaN"), StatusFailed},
		{fmt.Errorf("train: stopped at step 3: %w", context.Canceled), StatusInterrupted},
		{fmt.Errorf("%w by SIGTERM", ErrInterrupted), StatusInterrupted},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), StatusFailed},
	}
	for _, tt := range tests {
		r, _ := s.Start("x", nil, "v", "cpu")
		if err := r.Finish(tt.err); err != nil {
			t.Fatal(err)
		}
		d, _ := s.Get(r.ID)
		wantMsg := ""
		if tt.err != nil {
			wantMsg = tt.err.Error()
		}
		if d.Status != tt.want || d.Error != wantMsg || d.FinishedAt == nil {
			t.Errorf("Finish(%v): status %q error %q, want %q %q", tt.err, d.Status, d.Error, tt.want, wantMsg)
		}
	}
}

func TestMarkRunAndMarkStale(t *testing.T) { storedbtest.Each(t, testMarkRunAndMarkStale) }

func testMarkRunAndMarkStale(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	live, _ := s.Start("live", nil, "v", "cpu")
	gone, _ := s.Start("gone", nil, "v", "cpu")
	gone2, _ := s.Start("gone2", nil, "v", "cpu")
	done, _ := s.Start("done", nil, "v", "cpu")
	done.Finish(nil)
	dead := deadPID(t)
	setOwner(t, s, gone.ID, dead, s.self.Host, "")
	setOwner(t, s, gone2.ID, dead, s.self.Host, "")

	if _, err := s.MarkRun(live.ID, StatusFailed, "x", false); !errors.Is(err, ErrLive) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("marking a live run: err = %v, want ErrLive naming --force", err)
	}
	if _, err := s.MarkRun(live.ID, "stale", "", true); err == nil || !strings.Contains(err.Error(), `status "stale"`) {
		t.Errorf("marking status stale: err = %v", err)
	}
	if _, err := s.MarkRun("nope", StatusFailed, "", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("marking an unknown run: err = %v", err)
	}
	if _, err := s.MarkRun(gone.ID, StatusInterrupted, "killed by hand", false); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Get(gone.ID); d.Status != StatusInterrupted || d.Error != "killed by hand" || d.FinishedAt == nil {
		t.Errorf("marked run = %+v", d.RunInfo)
	}
	ids, err := s.MarkStale()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != gone2.ID {
		t.Errorf("MarkStale marked %v, want only %s", ids, gone2.ID)
	}
	d, _ := s.Get(gone2.ID)
	if d.Status != StatusFailed || !strings.Contains(d.Error, fmt.Sprintf("process %d", dead)) {
		t.Errorf("gc'd run = %+v", d.RunInfo)
	}
	if d, _ := s.Get(live.ID); d.Status != StatusRunning {
		t.Errorf("gc touched the live run: %s", d.Status)
	}
	if _, err := s.MarkRun(live.ID, StatusDone, "ignored", true); err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Get(live.ID); d.Status != StatusDone || d.Error != "" {
		t.Errorf("forced mark = %+v", d.RunInfo)
	}
}

func TestResume(t *testing.T) { storedbtest.Each(t, testResume) }

func testResume(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	r, _ := s.Start("train", nil, "v", "cpu")
	r.Metric("loss", 1, 1)
	r.Metric("loss", 2, 0.9)
	r.Metric("loss", 3, 0.8)
	setOwner(t, s, r.ID, deadPID(t), s.self.Host, "")
	s.setOpen(r.ID, false)

	again, err := s.Resume(r.ID[:20])
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != r.ID {
		t.Fatalf("resumed id %s, want %s", again.ID, r.ID)
	}
	if err := again.TruncateMetrics(2); err != nil {
		t.Fatal(err)
	}
	again.Metric("loss", 3, 0.7)
	d, _ := s.Get(r.ID)
	if d.Status != StatusRunning || d.PID != os.Getpid() || d.FinishedAt != nil {
		t.Errorf("resumed run = %+v", d.RunInfo)
	}
	var steps []int
	for _, m := range d.Metrics {
		steps = append(steps, m.Step)
	}
	if fmt.Sprint(steps) != "[1 2 3]" || d.Metrics[2].Value != 0.7 {
		t.Errorf("metrics after resume = %+v, want steps 1 2 3 with the new step 3", d.Metrics)
	}
	again.Finish(errors.New("boom"))
	if _, err := s.Resume(r.ID); err != nil {
		t.Errorf("resuming a failed run: %v", err)
	}

	// A run owned by a live process elsewhere is not taken over.
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Skipf("sleep: %v", err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	tok, _ := procToken(sleep.Process.Pid)
	setOwner(t, s, r.ID, sleep.Process.Pid, s.self.Host, tok)
	if _, err := s.Resume(r.ID); !errors.Is(err, ErrLive) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", sleep.Process.Pid)) {
		t.Errorf("resuming a live run: err = %v, want ErrLive naming the pid", err)
	}
	if d, _ := s.Get(r.ID); d.Status != StatusRunning {
		t.Errorf("run of a live process reads %s", d.Status)
	}
	sleep.Process.Kill()
	sleep.Wait()
	if d, _ := s.Get(r.ID); d.Status != StatusStale {
		t.Errorf("run of a killed process reads %s, want stale", d.Status)
	}
}

func TestInterruptOpen(t *testing.T) { storedbtest.Each(t, testInterruptOpen) }

func testInterruptOpen(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	a, _ := s.Start("a", nil, "v", "cpu")
	b, _ := s.Start("b", nil, "v", "cpu")
	b.Finish(nil)
	ids, err := s.InterruptOpen(context.Background(), "interrupted by SIGTERM")
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != a.ID {
		t.Errorf("InterruptOpen marked %v, want [%s]", ids, a.ID)
	}
	if d, _ := s.Get(a.ID); d.Status != StatusInterrupted || d.Error != "interrupted by SIGTERM" {
		t.Errorf("run = %+v", d.RunInfo)
	}
	if d, _ := s.Get(b.ID); d.Status != StatusDone {
		t.Errorf("finished run changed to %s", d.Status)
	}
}

// A version-1 file (before owners and interrupted) migrates without losing
// metrics to the table rebuild's cascade.
func TestMigrateFromV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	s := openAt(t, path, t0)
	r, _ := s.Start("old", nil, "v", "cpu")
	r.Metric("loss", 1, 0.5)
	// Turn the file back into version 1.
	for _, q := range []string{`PRAGMA foreign_keys = OFF`,
		`CREATE TABLE runs_v1 (id TEXT PRIMARY KEY, kind TEXT NOT NULL, config TEXT NOT NULL,
			status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')), error TEXT NOT NULL DEFAULT '',
			started_at TEXT NOT NULL, finished_at TEXT, version TEXT NOT NULL, backend TEXT NOT NULL)`,
		`INSERT INTO runs_v1 SELECT id, kind, config, status, error, started_at, finished_at, version, backend FROM runs`,
		`DROP TABLE runs`, `ALTER TABLE runs_v1 RENAME TO runs`, `UPDATE schema_version SET version = 1`} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = openAt(t, path, t0)
	defer s.Close()
	d, err := s.Get(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Metrics) != 1 || d.Status != StatusRunning || d.PID != 0 {
		t.Errorf("migrated run = %+v, metrics %v", d.RunInfo, d.Metrics)
	}
	if _, err := s.MarkRun(r.ID, StatusInterrupted, "", true); err != nil {
		t.Errorf("status interrupted after migration: %v", err)
	}
	if err := s.Check(); err != nil {
		t.Error(err)
	}
}

// The migration list brings a version-1 schema to the current one on both
// engines (on PostgreSQL by ALTER, on SQLite by a table rebuild that must not
// cascade into metrics), keeping runs, metrics and items.
func TestMigrateV1Both(t *testing.T) { storedbtest.Each(t, testMigrateV1Both) }

func testMigrateV1Both(t *testing.T, target string) {
	db, err := storedb.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate("schema_version", migrations[:1]); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO runs (id, kind, config, status, started_at, version, backend) VALUES ('r1', 'old', '{}', 'running', '2026-01-01T00:00:00Z', 'v', 'cpu')`,
		`INSERT INTO metrics (run_id, name, step, value, created) VALUES ('r1', 'loss', 1, 0.5, '2026-01-01T00:00:00Z')`,
		`INSERT INTO items (run_id, kind, key, json, updated) VALUES ('r1', 'k', 'a', '1', '2026-01-01T00:00:00Z')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s := openAt(t, target, t0)
	defer s.Close()
	d, err := s.Get("r1")
	if err != nil {
		t.Fatal(err)
	}
	items, err := s.Items("r1", "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Metrics) != 1 || d.Metrics[0].Value != 0.5 || d.Status != StatusRunning || d.PID != 0 || len(items) != 1 {
		t.Errorf("migrated run = %+v, metrics %v, items %v", d.RunInfo, d.Metrics, items)
	}
	if _, err := s.MarkRun("r1", StatusInterrupted, "", true); err != nil {
		t.Errorf("status interrupted after migration: %v", err)
	}
	if _, err := s.db.Exec(`UPDATE runs SET status = 'bogus' WHERE id = 'r1'`); err == nil {
		t.Error("status CHECK lost in migration: 'bogus' accepted")
	}
}

// A shared run is created once, joined by workers with the same kind and
// config, refused to others, never stale, and finished once.
func TestStartShared(t *testing.T) { storedbtest.Each(t, testStartShared) }

func testStartShared(t *testing.T, target string) {
	s := openAt(t, target, t0)
	defer s.Close()
	cfg := map[string]any{"top_n": 2}
	a, created, err := s.StartShared("job-7", "label-perplexity", cfg, "v", "cpu")
	if err != nil || !created {
		t.Fatalf("first = %v, %v", created, err)
	}
	b, created, err := s.StartShared("job-7", "label-perplexity", cfg, "v", "cpu")
	if err != nil || created || b.ID != a.ID {
		t.Fatalf("join = %v, %v, %v", b, created, err)
	}
	if _, _, err := s.StartShared("job-7", "label-perplexity", map[string]any{"top_n": 3}, "v", "cpu"); err == nil {
		t.Error("joined with another config")
	}
	if _, _, err := s.StartShared("job 7/x", "label-perplexity", cfg, "v", "cpu"); err == nil {
		t.Error("accepted an id with a space and a slash")
	}
	if ri, _ := s.Get("job-7"); ri.Status != StatusRunning || ri.PID != 0 {
		t.Errorf("shared run = %+v, want running without owner", ri.RunInfo)
	}
	if err := a.Finish(nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Finish(nil); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second Finish err = %v, want ErrNotRunning", err)
	}
}
