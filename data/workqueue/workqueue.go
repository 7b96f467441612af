// Package workqueue splits a job into batches that worker processes claim
// from the run store's database (PostgreSQL for workers on several
// machines; SQLite works for processes of one machine), so labeling and
// encoding run on many workers with no batch lost or done twice.
//
// A claim is a lease: a worker that stops renewing it (killed, its machine
// gone) loses the batch when the lease expires, and the next Claim returns
// it to another worker. On PostgreSQL claims use SELECT … FOR UPDATE SKIP
// LOCKED, so concurrent claimers never wait on each other's rows; on SQLite
// write transactions are serialized, which gives the same exclusivity.
// A batch is done once, by the worker holding its lease: Complete by a
// worker whose lease was taken over fails with ErrLeaseLost, so what it
// wrote must be idempotent (labels are upserts keyed by (run, pair), encoded
// parts are files renamed into place).
//
// Worker runs that loop (claim, renew while working, complete or release)
// around a Do; Pool runs several Workers of one job in a process; Shard and
// ParseShard split items statically for processes that share no queue.
package workqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ragforge/ragforge/data/storedb"
)

// ErrLeaseLost is returned (wrapped) by Renew and Complete when the batch is
// no longer claimed by the caller (its lease expired and another worker
// claimed it, or it was completed).
var ErrLeaseLost = errors.New("lease lost")

var migrations = []storedb.Migration{
	{SQLite: `CREATE TABLE work_batches (
		job         TEXT NOT NULL,
		batch       INTEGER NOT NULL,
		payload     TEXT NOT NULL,
		status      TEXT NOT NULL CHECK (status IN ('pending', 'claimed', 'done')),
		owner       TEXT NOT NULL DEFAULT '',
		lease_until INTEGER NOT NULL DEFAULT 0,
		attempts    INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (job, batch)
	);
	CREATE INDEX work_batches_claim ON work_batches (job, status, lease_until);`,
		Postgres: `CREATE TABLE work_batches (
		job         TEXT NOT NULL,
		batch       BIGINT NOT NULL,
		payload     TEXT NOT NULL,
		status      TEXT NOT NULL CHECK (status IN ('pending', 'claimed', 'done')),
		owner       TEXT NOT NULL DEFAULT '',
		lease_until BIGINT NOT NULL DEFAULT 0,
		attempts    BIGINT NOT NULL DEFAULT 0,
		PRIMARY KEY (job, batch)
	);
	CREATE INDEX work_batches_claim ON work_batches (job, status, lease_until);`},
}

// Queue is the batch table of a store database. Safe for concurrent use.
type Queue struct {
	db  *storedb.DB
	now func() time.Time
}

// Open migrates the queue's table in db (the run store's, data/tracker
// Store.DB) and returns the queue.
func Open(db *storedb.DB) (*Queue, error) {
	if _, err := db.Migrate("workqueue_schema_version", migrations); err != nil {
		return nil, fmt.Errorf("work queue %s: %w", db.Name, err)
	}
	return &Queue{db: db, now: time.Now}, nil
}

// Batch is a claimed batch: its number in the job (0-based, in Enqueue
// order) and payload.
type Batch struct {
	Job      string
	N        int
	Payload  string
	Attempts int // claims so far, this one included (>1: a lease expired before)
	owner    string
}

// Enqueue adds the batches of job, numbered 0, 1, … in order, unless the job
// already has them: every worker of a job may call it with the same batches,
// the first one stores them, the others find them (it reports whether this
// call stored them). Errors: a job already stored with other batches (the
// worker was started with other flags or inputs).
func (q *Queue) Enqueue(ctx context.Context, job string, payloads []string) (bool, error) {
	stored, err := q.payloads(ctx, job)
	if err != nil {
		return false, fmt.Errorf("enqueue %s: %w", job, err)
	}
	if len(stored) > 0 {
		return false, same(job, stored, payloads)
	}
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("enqueue %s: %w", job, err)
	}
	defer tx.Rollback()
	added := int64(0)
	for i, p := range payloads {
		// A worker enqueuing at the same time stores the same rows: the
		// conflict leaves them, and the check below compares.
		res, err := tx.ExecContext(ctx, `INSERT INTO work_batches (job, batch, payload, status) VALUES (?, ?, ?, 'pending')
			ON CONFLICT (job, batch) DO NOTHING`, job, i, p)
		if err != nil {
			return false, fmt.Errorf("enqueue %s: batch %d: %w", job, i, err)
		}
		n, _ := res.RowsAffected()
		added += n
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("enqueue %s: %w", job, err)
	}
	if stored, err = q.payloads(ctx, job); err != nil {
		return false, fmt.Errorf("enqueue %s: %w", job, err)
	}
	return added > 0, same(job, stored, payloads)
}

func (q *Queue) payloads(ctx context.Context, job string) ([]string, error) {
	rows, err := q.db.QueryContext(ctx, `SELECT payload FROM work_batches WHERE job = ? ORDER BY batch`, job)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func same(job string, stored, mine []string) error {
	if len(stored) != len(mine) {
		return fmt.Errorf("enqueue %s: the job has %d batches stored, this worker made %d (other flags or inputs?)", job, len(stored), len(mine))
	}
	for i := range stored {
		if stored[i] != mine[i] {
			return fmt.Errorf("enqueue %s: batch %d is stored as %.80q, this worker made %.80q (other flags or inputs?)", job, i, stored[i], mine[i])
		}
	}
	return nil
}

// Claim leases the lowest-numbered batch of job that is pending, or claimed
// with an expired lease, to owner for lease. It returns nil when none is
// claimable now, with pending telling whether some batch is not done yet
// (claimed by a live lease: wait and claim again, it returns if that worker
// dies).
func (q *Queue) Claim(ctx context.Context, job, owner string, lease time.Duration) (b *Batch, pending bool, err error) {
	now := q.now().UnixMilli()
	lock := ""
	if q.db.Dialect == storedb.Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	b = &Batch{Job: job, owner: owner}
	err = q.db.QueryRowContext(ctx, `UPDATE work_batches SET status = 'claimed', owner = ?, lease_until = ?, attempts = attempts + 1
		WHERE job = ? AND batch = (SELECT batch FROM work_batches WHERE job = ?
			AND (status = 'pending' OR (status = 'claimed' AND lease_until < ?)) ORDER BY batch LIMIT 1`+lock+`)
		RETURNING batch, payload, attempts`, owner, now+lease.Milliseconds(), job, job, now).Scan(&b.N, &b.Payload, &b.Attempts)
	if err == nil {
		return b, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, fmt.Errorf("claim a batch of %s: %w", job, err)
	}
	var open int
	if err := q.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM work_batches WHERE job = ? AND status <> 'done'`, job).Scan(&open); err != nil {
		return nil, false, fmt.Errorf("claim a batch of %s: %w", job, err)
	}
	return nil, open > 0, nil
}

// Renew extends b's lease by lease from now. Errors wrap ErrLeaseLost when
// b is no longer claimed by its owner.
func (q *Queue) Renew(ctx context.Context, b *Batch, lease time.Duration) error {
	return q.update(ctx, b, `UPDATE work_batches SET lease_until = ? WHERE job = ? AND batch = ? AND owner = ? AND status = 'claimed'`,
		q.now().UnixMilli()+lease.Milliseconds())
}

// Complete marks b done. Errors wrap ErrLeaseLost when b is no longer
// claimed by its owner (another worker redoes or did it).
func (q *Queue) Complete(ctx context.Context, b *Batch) error {
	return q.update(ctx, b, `UPDATE work_batches SET status = 'done', lease_until = 0 WHERE job = ? AND batch = ? AND owner = ? AND status = 'claimed'`)
}

// Release returns b to the queue at once (a worker that stops on an error).
func (q *Queue) Release(ctx context.Context, b *Batch) error {
	return q.update(ctx, b, `UPDATE work_batches SET status = 'pending', owner = '', lease_until = 0 WHERE job = ? AND batch = ? AND owner = ? AND status = 'claimed'`)
}

func (q *Queue) update(ctx context.Context, b *Batch, stmt string, lead ...any) error {
	res, err := q.db.ExecContext(ctx, stmt, append(lead, b.Job, b.N, b.owner)...)
	if err != nil {
		return fmt.Errorf("job %s batch %d: %w", b.Job, b.N, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("job %s batch %d (owner %s): %w", b.Job, b.N, b.owner, ErrLeaseLost)
	}
	return nil
}

// Counts returns how many batches of job are pending, claimed and done.
func (q *Queue) Counts(ctx context.Context, job string) (map[string]int, error) {
	rows, err := q.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM work_batches WHERE job = ? GROUP BY status`, job)
	if err != nil {
		return nil, fmt.Errorf("count batches of %s: %w", job, err)
	}
	defer rows.Close()
	out := map[string]int{"pending": 0, "claimed": 0, "done": 0}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count batches of %s: %w", job, err)
		}
		out[s] = n
	}
	return out, rows.Err()
}
