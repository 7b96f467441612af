package label

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ragforge/ragforge/data/workqueue"
)

// BatchPayloads splits tasks, in order, into batches of size questions; a
// batch's payload is the JSON list of its tasks' query ids, so workers that
// built the same tasks agree on the batches (workqueue.Enqueue compares them).
// Errors: size < 1, a task without QueryID, a QueryID used twice.
func BatchPayloads(tasks []Task, size int) ([]string, error) {
	if size < 1 {
		return nil, fmt.Errorf("batch size %d: want ≥ 1", size)
	}
	seen := make(map[string]bool, len(tasks))
	var out []string
	for i := 0; i < len(tasks); i += size {
		var ids []string
		for _, t := range tasks[i:min(i+size, len(tasks))] {
			switch {
			case t.QueryID == "":
				return nil, fmt.Errorf("batches: a task without query id (question %q)", t.Question)
			case seen[t.QueryID]:
				return nil, fmt.Errorf("batches: query id %q appears twice", t.QueryID)
			}
			seen[t.QueryID] = true
			ids = append(ids, t.QueryID)
		}
		b, _ := json.Marshal(ids)
		out = append(out, string(b))
	}
	return out, nil
}

// LabelBatches returns the workqueue.Do that labels a batch of tasks (its
// payload a JSON list of query ids, as BatchPayloads makes them) with l,
// which stores each label under its RunID as soon as the pair is done, so a
// batch redone after a lost lease upserts the same rows. Errors: a payload
// that is not such a list, a query id not among tasks (the worker was
// started with other flags or inputs), l's.
func LabelBatches(l *PerplexityLabeler, tasks []Task) workqueue.Do {
	byID := make(map[string]Task, len(tasks))
	for _, t := range tasks {
		byID[t.QueryID] = t
	}
	return func(ctx context.Context, b *workqueue.Batch) error {
		var ids []string
		if err := json.Unmarshal([]byte(b.Payload), &ids); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
		batch := make([]Task, len(ids))
		for i, id := range ids {
			t, ok := byID[id]
			if !ok {
				return fmt.Errorf("query %q is not among this worker's questions (other flags or inputs?)", id)
			}
			batch[i] = t
		}
		_, err := l.Label(ctx, batch)
		return err
	}
}
