package tracker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Run is a handle on one stored run, returned by Start or Attach.
type Run struct {
	ID string
	s  *Store
}

// newID returns "YYYYMMDD-HHMMSS-<kind>-<4 hex>", kind lower-cased with
// characters outside [a-z0-9] turned to '-' and cut to 24 bytes.
func newID(t time.Time, kind string) (string, error) {
	var b strings.Builder
	for _, r := range strings.ToLower(kind) {
		if b.Len() >= 24 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	var rnd [2]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%s-%s", t.Format("20060102-150405"), b.String(), hex.EncodeToString(rnd[:])), nil
}

// Start records a new run with status "running", owned by this process
// (PID, host name and process start time, so readers can tell a stale run).
// config is stored as JSON
// (json.Marshal); version is the ragforge version string and backend names
// the compute backend (e.g. "simplego", "xla:cuda"). The id is
// "YYYYMMDD-HHMMSS-<kind>-<4 hex>" in UTC; a rare id clash is retried.
func (s *Store) Start(kind string, config any, version, backend string) (*Run, error) {
	if kind == "" {
		return nil, fmt.Errorf("start run: field %q: empty", "kind")
	}
	cfg, err := json.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("start run %s: field %q: %w", kind, "config", err)
	}
	now := s.now()
	for attempt := 0; ; attempt++ {
		id, err := newID(now, kind)
		if err != nil {
			return nil, fmt.Errorf("start run %s: id: %w", kind, err)
		}
		res, err := s.db.Exec(`INSERT INTO runs (id, kind, config, status, started_at, version, backend, pid, host, proc_token)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`, id, kind, string(cfg), StatusRunning, now.Format(timeFormat), version, backend,
			s.self.PID, s.self.Host, s.self.Token)
		if err != nil {
			return nil, fmt.Errorf("start run %s: %w", kind, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			s.setOpen(id, true)
			return &Run{ID: id, s: s}, nil
		}
		if attempt > 16 {
			return nil, fmt.Errorf("start run %s: could not find a free id", kind)
		}
	}
}

// Attach returns a handle on an existing run (id or unique id prefix) without
// changing it, e.g. to resume a stage from its stored items.
func (s *Store) Attach(id string) (*Run, error) {
	full, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	return &Run{ID: full, s: s}, nil
}

// Resume reopens an existing run (id or unique id prefix) to continue it in
// this process: status running again, error and finished_at cleared, this
// process recorded as its owner. Errors wrap ErrNotFound, ErrAmbiguous, or
// ErrLive when the run is running in a live process (or on another host);
// close that one first (MarkRun with force).
func (s *Store) Resume(id string) (*Run, error) {
	full, err := s.resolve(id)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	tx, err := s.db.Begin()
	if err != nil {
		return nil, fmt.Errorf("resume run %s: %w", full, err)
	}
	defer tx.Rollback()
	var status string
	var o owner
	if err := tx.QueryRow(`SELECT status, pid, host, proc_token FROM runs WHERE id = ?`, full).Scan(&status, &o.PID, &o.Host, &o.Token); err != nil {
		return nil, fmt.Errorf("resume run %s: %w", full, err)
	}
	if status == StatusRunning && o != s.self {
		if live, known := alive(o, s.self.Host); live {
			return nil, fmt.Errorf("resume run %s: %w (pid %d on host %s%s); stop it, or close it with `ragforge runs mark %s --status interrupted --force`",
				full, ErrLive, o.PID, o.Host, unknownNote(known), full)
		}
	}
	if _, err := tx.Exec(`UPDATE runs SET status = ?, error = '', finished_at = NULL, pid = ?, host = ?, proc_token = ? WHERE id = ?`,
		StatusRunning, s.self.PID, s.self.Host, s.self.Token, full); err != nil {
		return nil, fmt.Errorf("resume run %s: %w", full, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("resume run %s: %w", full, err)
	}
	s.setOpen(full, true)
	return &Run{ID: full, s: s}, nil
}

func unknownNote(known bool) string {
	if known {
		return ""
	}
	return ", liveness unknown from this host"
}

func (s *Store) setOpen(id string, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if open {
		s.open[id] = true
	} else {
		delete(s.open, id)
	}
}

// Finish marks the run done when runErr is nil, interrupted when runErr
// wraps context.Canceled or ErrInterrupted, failed otherwise (error =
// runErr's text), and sets finished_at. Errors: the run is unknown or
// already finished.
func (r *Run) Finish(runErr error) error {
	status, msg := StatusDone, ""
	switch {
	case runErr == nil:
	case errors.Is(runErr, context.Canceled) || errors.Is(runErr, ErrInterrupted):
		status, msg = StatusInterrupted, runErr.Error()
	default:
		status, msg = StatusFailed, runErr.Error()
	}
	return r.s.end(context.Background(), r.ID, status, msg)
}

// end moves the running run id to status with msg.
func (s *Store) end(ctx context.Context, id, status, msg string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE id = ? AND status = ?`,
		status, msg, s.now().Format(timeFormat), id, StatusRunning)
	if err != nil {
		return fmt.Errorf("run %s: finish: %w", id, err)
	}
	s.setOpen(id, false)
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("run %s: finish: %w", id, ErrNotRunning)
	}
	return nil
}

// ErrNotRunning is returned (wrapped) by Finish for a run that is unknown
// or already finished.
var ErrNotRunning = errors.New("not a running run")

// StartShared records the run id, chosen by the caller (a job name that
// worker processes on several machines are started with), as running with no
// owner process: its workers come and go, so it never reads as stale, and it
// stays running until a worker finishes it (Finish; the others then get
// ErrNotRunning). When id is already stored it returns that run, after
// checking that it is of kind with the same config; created tells which.
// Errors: an invalid id (letters, digits, '-', '_' and '.' only), a stored run
// of another kind or config (workers started with other flags).
func (s *Store) StartShared(id, kind string, config any, version, backend string) (r *Run, created bool, err error) {
	if id == "" || strings.Trim(strings.ToLower(id), "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
		return nil, false, fmt.Errorf("start shared run: id %q: use letters, digits, '-', '_' and '.'", id)
	}
	cfg, err := json.Marshal(config)
	if err != nil {
		return nil, false, fmt.Errorf("start shared run %s: field %q: %w", id, "config", err)
	}
	res, err := s.db.Exec(`INSERT INTO runs (id, kind, config, status, started_at, version, backend, pid, host, proc_token)
		VALUES (?, ?, ?, ?, ?, ?, ?, 0, '', '') ON CONFLICT (id) DO NOTHING`, id, kind, string(cfg), StatusRunning,
		s.now().Format(timeFormat), version, backend)
	if err != nil {
		return nil, false, fmt.Errorf("start shared run %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return &Run{ID: id, s: s}, true, nil
	}
	var k, c string
	if err := s.db.QueryRow(`SELECT kind, config FROM runs WHERE id = ?`, id).Scan(&k, &c); err != nil {
		return nil, false, fmt.Errorf("start shared run %s: %w", id, err)
	}
	if k != kind || c != string(cfg) {
		return nil, false, fmt.Errorf("start shared run %s: stored as kind %q with config %s; this worker has kind %q and config %s (start every worker of a job with the same flags)",
			id, k, c, kind, cfg)
	}
	return &Run{ID: id, s: s}, false, nil
}

// OpenRuns returns the ids of the runs this Store started or resumed and has
// not finished, sorted.
func (s *Store) OpenRuns() []string {
	s.mu.Lock()
	ids := make([]string, 0, len(s.open))
	for id := range s.open {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	sort.Strings(ids)
	return ids
}

// InterruptOpen marks every run this Store started or resumed and has not
// finished as interrupted with msg, for a process that must exit before its
// commands return (a second signal, a command that ignores cancellation).
// ctx bounds the wait for the database. It returns the ids it marked.
func (s *Store) InterruptOpen(ctx context.Context, msg string) ([]string, error) {
	var done []string
	for _, id := range s.OpenRuns() {
		if err := s.end(ctx, id, StatusInterrupted, msg); err != nil {
			return done, err
		}
		done = append(done, id)
	}
	return done, nil
}

// MarkRun closes run id (or unique prefix) by hand with status done, failed
// or interrupted and message msg (the error text; empty for done), setting
// finished_at when it was unset. A run that is running in a live process,
// or on another host, is refused with ErrLive unless force. It returns the
// full id. Errors also wrap ErrNotFound and ErrAmbiguous.
func (s *Store) MarkRun(id, status, msg string, force bool) (string, error) {
	switch status {
	case StatusDone, StatusFailed, StatusInterrupted:
	default:
		return "", fmt.Errorf("mark run %s: status %q: want %s, %s or %s", id, status, StatusDone, StatusFailed, StatusInterrupted)
	}
	full, err := s.resolve(id)
	if err != nil {
		return "", fmt.Errorf("mark: %w", err)
	}
	ri, err := s.info(full)
	if err != nil {
		return "", fmt.Errorf("mark run %s: %w", full, err)
	}
	if ri.Status == StatusRunning && !force {
		return "", fmt.Errorf("mark run %s: %w (pid %d on host %s%s); pass --force to mark it anyway",
			full, ErrLive, ri.PID, ri.Host, unknownNote(ri.Host == s.self.Host))
	}
	if status == StatusDone {
		msg = ""
	}
	if _, err := s.db.Exec(`UPDATE runs SET status = ?, error = ?, finished_at = COALESCE(finished_at, ?) WHERE id = ?`,
		status, msg, s.now().Format(timeFormat), full); err != nil {
		return "", fmt.Errorf("mark run %s: %w", full, err)
	}
	s.setOpen(full, false)
	return full, nil
}

// MarkStale marks every stale run (see RunInfo.Status) failed with a message
// naming its lost process, and returns their ids, oldest first.
func (s *Store) MarkStale() ([]string, error) {
	rs, err := s.List(ListOptions{Status: StatusStale})
	if err != nil {
		return nil, fmt.Errorf("mark stale runs: %w", err)
	}
	var ids []string
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		msg := fmt.Sprintf("stale: process %d on host %s is gone (marked failed by runs gc)", r.PID, r.Host)
		res, err := s.db.Exec(`UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE id = ? AND status = ? AND pid = ? AND proc_token = ?`,
			StatusFailed, msg, s.now().Format(timeFormat), r.ID, StatusRunning, r.PID, r.procToken)
		if err != nil {
			return ids, fmt.Errorf("mark stale run %s: %w", r.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}
