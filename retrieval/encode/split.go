package encode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/npy"
	"github.com/ragforge/ragforge/data/workqueue"
)

// DefaultSplitRows is Split.BatchRows's default: 4 blocks of CorpusBlock.
const DefaultSplitRows = 4 * CorpusBlock

// Split encodes a corpus in batches of consecutive rows that workers do
// apart (workqueue batches, or static shards of them), each writing its
// vectors to a part file in Dir; Merge reads them back in row order.
//
// A batch starts at a multiple of CorpusBlock, so it hands EncodeDocs the
// same blocks of texts as a one-process EncodeCorpus does, and the encoder
// batches each block alone: the merged vectors are those of EncodeCorpus,
// bit for bit (given the same encoder, backend and machine). A batch done
// twice (its lease lost, a worker killed after writing) rewrites the same
// part file atomically, so what Merge reads is whole.
type Split struct {
	// Dir holds the part files part-<batch>.npy, float32 [rows, dim];
	// every worker of a job must see it (a shared file system for workers
	// on several machines).
	Dir string
	// BatchRows is the chunks per batch, a positive multiple of
	// CorpusBlock (DefaultSplitRows when 0).
	BatchRows int
}

// splitBatch is a batch's payload: its rows [Lo, Hi) and the ids of its
// first and last chunks, so workers that chunked another corpus disagree
// with the stored batches (workqueue.Enqueue refuses them).
type splitBatch struct {
	Lo    int    `json:"lo"`
	Hi    int    `json:"hi"`
	First string `json:"first"`
	Last  string `json:"last"`
}

func (s Split) rows() (int, error) {
	r := s.BatchRows
	if r == 0 {
		r = DefaultSplitRows
	}
	if r < 0 || r%CorpusBlock != 0 {
		return 0, fmt.Errorf("encode split: batch of %d rows: want a positive multiple of %d (the encoder's block, so the vectors equal a one-process run's)", r, CorpusBlock)
	}
	return r, nil
}

// Payloads returns the batch payloads of chunks, in row order.
func (s Split) Payloads(chunks []data.Chunk) ([]string, error) {
	r, err := s.rows()
	if err != nil {
		return nil, err
	}
	var out []string
	for lo := 0; lo < len(chunks); lo += r {
		hi := min(lo+r, len(chunks))
		b, _ := json.Marshal(splitBatch{Lo: lo, Hi: hi, First: chunks[lo].ID, Last: chunks[hi-1].ID})
		out = append(out, string(b))
	}
	return out, nil
}

// Part is the path of batch n's part file.
func (s Split) Part(n int) string { return filepath.Join(s.Dir, fmt.Sprintf("part-%06d.npy", n)) }

// Do returns the workqueue.Do that encodes a batch of chunks with enc and
// writes its part file; done, when set, is told the rows of each finished
// batch. Errors: a payload that does not name rows of chunks with the same
// first and last ids (a worker started with other flags or inputs), enc's,
// I/O errors naming the file.
func (s Split) Do(enc Encoder, chunks []data.Chunk, done func(rows int)) workqueue.Do {
	return func(ctx context.Context, b *workqueue.Batch) error {
		var p splitBatch
		if err := json.Unmarshal([]byte(b.Payload), &p); err != nil {
			return fmt.Errorf("encode batch %d: payload %.80q: %w", b.N, b.Payload, err)
		}
		if p.Lo < 0 || p.Lo >= p.Hi || p.Hi > len(chunks) || chunks[p.Lo].ID != p.First || chunks[p.Hi-1].ID != p.Last {
			return fmt.Errorf("encode batch %d: rows [%d, %d) with ids %q..%q are not this worker's chunks (%d of them; other flags or inputs?)",
				b.N, p.Lo, p.Hi, p.First, p.Last, len(chunks))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		vecs, dim, err := EncodeCorpus(enc, chunks[p.Lo:p.Hi], nil)
		if err != nil {
			return fmt.Errorf("encode batch %d (rows %d..%d): %w", b.N, p.Lo, p.Hi-1, err)
		}
		if err := ctx.Err(); err != nil {
			return err // a lost lease: the new owner writes the part
		}
		if err := writePart(s.Part(b.N), vecs, p.Hi-p.Lo, dim); err != nil {
			return fmt.Errorf("encode batch %d: %w", b.N, err)
		}
		if done != nil {
			done(p.Hi - p.Lo)
		}
		return nil
	}
}

// writePart writes the .npy through a temporary file renamed over path, so
// a reader (Merge, Missing) never sees half a part.
func writePart(path string, vecs []float32, n, dim int) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write part: %w", err)
	}
	tmp.Close()
	if err := npy.Write(tmp.Name(), vecs, n, dim); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write part: %w", err)
	}
	return nil
}

// Missing returns the batches of payloads whose part file is absent.
func (s Split) Missing(payloads []string) ([]int, error) {
	var out []int
	for n := range payloads {
		switch _, err := os.Stat(s.Part(n)); {
		case errors.Is(err, os.ErrNotExist):
			out = append(out, n)
		case err != nil:
			return nil, fmt.Errorf("encode split: %w", err)
		}
	}
	return out, nil
}

// Merge reads the part files of payloads in row order and returns the
// vectors row-major [rows, dim], as EncodeCorpus returns them. Errors: a
// missing part, a part whose shape disagrees with its batch or with dim.
func (s Split) Merge(payloads []string, dim int) ([]float32, error) {
	bs := make([]splitBatch, len(payloads))
	for n, pl := range payloads {
		if err := json.Unmarshal([]byte(pl), &bs[n]); err != nil {
			return nil, fmt.Errorf("merge encode parts: batch %d: payload: %w", n, err)
		}
	}
	var vecs []float32
	if len(bs) > 0 {
		vecs = make([]float32, 0, bs[len(bs)-1].Hi*dim)
	}
	for n, p := range bs {
		x, rows, d, err := npy.Read(s.Part(n))
		if err != nil {
			return nil, fmt.Errorf("merge encode parts: batch %d: %w", n, err)
		}
		if rows != p.Hi-p.Lo || d != dim {
			return nil, fmt.Errorf("merge encode parts: %s holds [%d, %d], batch %d is rows %d..%d of dim %d", s.Part(n), rows, d, n, p.Lo, p.Hi-1, dim)
		}
		vecs = append(vecs, x...)
	}
	return vecs, nil
}

// Workers says how this process takes part in a split encoding: Workers
// workers claiming the batches of Job from Queue (processes on several
// machines join the same Job), or, with Queue nil, the static shard Shard
// of Shards (every Shards-th batch from the Shard-th).
type Workers struct {
	Queue   *workqueue.Queue
	Job     string
	Workers int           // at least 1
	Lease   time.Duration // workqueue.DefaultLease when 0
	Log     func(format string, args ...any)

	Shard, Shards int
}

// Run encodes this process's batches of chunks with enc into Dir (created
// when absent), then lets exactly one process merge the parts once all are
// written: with a queue, the one claiming the job's merge batch (Job +
// "#merge"; a merger that dies loses its lease like any worker); with
// shards, the one whose exclusive create of Dir/merge.lock succeeds after
// finding no part missing. The merger calls publish with the merged vectors
// [len(chunks), dim] and removes Dir. Run returns the batches this process
// encoded and whether it published; with shards, a process that finds parts
// missing returns with published false (the last shard to finish merges).
// done, when set, is told the rows of each batch this process encodes.
func (s Split) Run(ctx context.Context, enc Encoder, chunks []data.Chunk, w Workers, done func(rows int),
	publish func(vecs []float32, dim int) error) (batches int, published bool, err error) {
	payloads, err := s.Payloads(chunks)
	if err != nil {
		return 0, false, err
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return 0, false, fmt.Errorf("encode split: %w", err)
	}
	do := s.Do(enc, chunks, done)
	merge := func(context.Context, *workqueue.Batch) error {
		vecs, err := s.Merge(payloads, enc.Dim())
		if err != nil {
			return err
		}
		if err := publish(vecs, enc.Dim()); err != nil {
			return err
		}
		published = true
		return os.RemoveAll(s.Dir)
	}
	if w.Queue == nil {
		return s.runShard(ctx, payloads, w, do, merge)
	}
	if _, err := w.Queue.Enqueue(ctx, w.Job, payloads); err != nil {
		return 0, false, err
	}
	pool := workqueue.Pool{Queue: w.Queue, Job: w.Job, Workers: w.Workers, Lease: w.Lease, Log: w.Log}
	if batches, err = pool.Run(ctx, func(int) workqueue.Do { return do }); err != nil {
		return batches, false, err
	}
	mj := w.Job + "#merge"
	if _, err := w.Queue.Enqueue(ctx, mj, []string{"merge"}); err != nil {
		return batches, false, err
	}
	mw := &workqueue.Worker{Queue: w.Queue, Job: mj, Owner: workqueue.Owner(0), Lease: w.Lease, Log: w.Log}
	_, err = mw.Run(ctx, merge)
	if !published {
		os.Remove(s.Dir) // a late process's empty directory (the merger removed the parts)
	}
	return batches, published, err
}

func (s Split) runShard(ctx context.Context, payloads []string, w Workers, do, merge workqueue.Do) (batches int, published bool, err error) {
	if w.Shards < 1 || w.Shard < 0 || w.Shard >= w.Shards {
		return 0, false, fmt.Errorf("encode split: shard %d/%d: want 0 ≤ i < N", w.Shard, w.Shards)
	}
	for n := w.Shard; n < len(payloads); n += w.Shards {
		if err := do(ctx, &workqueue.Batch{Job: w.Job, N: n, Payload: payloads[n], Attempts: 1}); err != nil {
			return batches, false, err
		}
		batches++
	}
	missing, err := s.Missing(payloads)
	if err != nil || len(missing) > 0 {
		return batches, false, err
	}
	lock, err := os.OpenFile(filepath.Join(s.Dir, "merge.lock"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return batches, false, nil // another shard merges
	} else if err != nil {
		return batches, false, fmt.Errorf("encode split: %w", err)
	}
	lock.Close()
	err = merge(ctx, nil)
	return batches, err == nil, err
}
