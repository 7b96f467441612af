package labelstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/ragforge/ragforge/models/lm"
)

// CachedLogProbs returns the cached log-probabilities of (scorer, prompt,
// target), keyed by the SHA-256 of prompt and target.
func (s *Store) CachedLogProbs(ctx context.Context, scorer, prompt, target string) ([]float64, bool, error) {
	var js string
	err := s.db.QueryRowContext(ctx, `SELECT logprobs FROM score_cache WHERE scorer = ? AND prompt_sha = ? AND target_sha = ?`,
		scorer, fullHash(prompt), fullHash(target)).Scan(&js)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("score cache: %w", err)
	}
	var lp []float64
	if err := json.Unmarshal([]byte(js), &lp); err != nil {
		return nil, false, fmt.Errorf("score cache: scorer %q: field %q: %w", scorer, "logprobs", err)
	}
	return lp, true, nil
}

// PutLogProbs caches the log-probabilities of (scorer, prompt, target),
// replacing an earlier entry.
func (s *Store) PutLogProbs(ctx context.Context, scorer, prompt, target string, logprobs []float64) error {
	js, err := json.Marshal(logprobs)
	if err != nil {
		return fmt.Errorf("score cache: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.db.ExecContext(ctx, `INSERT INTO score_cache (scorer, prompt_sha, target_sha, logprobs, created) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (scorer, prompt_sha, target_sha) DO UPDATE SET logprobs = excluded.logprobs, created = excluded.created`,
		scorer, fullHash(prompt), fullHash(target), string(js), s.stamp())
	if err != nil {
		return fmt.Errorf("score cache: %w", err)
	}
	return nil
}

// Cached wraps a Scorer with the Store's score cache: a (Name, prompt, target)
// already scored is answered from the store, anything else is scored and stored
// before it is returned. Concurrent calls for the same triple share one
// scorer call.
func (s *Store) Cached(sc lm.Scorer) lm.Scorer {
	return &cachedScorer{inner: sc, store: s, flight: map[[2]string]*flight{}}
}

type flight struct {
	done chan struct{}
	lp   []float64
	err  error
}

type cachedScorer struct {
	inner  lm.Scorer
	store  *Store // nil: memory only (see Memoize)
	mu     sync.Mutex
	flight map[[2]string]*flight
	memo   map[[2]string][]float64
}

// Memoize wraps sc with an in-memory cache (no Store): each distinct
// (prompt, target) is scored once per labeling run.
func Memoize(sc lm.Scorer) lm.Scorer {
	return &cachedScorer{inner: sc, flight: map[[2]string]*flight{}, memo: map[[2]string][]float64{}}
}

func (c *cachedScorer) Name() string { return c.inner.Name() }

func (c *cachedScorer) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
	key := [2]string{fullHash(prompt), fullHash(target)}
	c.mu.Lock()
	if lp, ok := c.memo[key]; ok {
		c.mu.Unlock()
		return lp, nil
	}
	if f, ok := c.flight[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.lp, f.err
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	f := &flight{done: make(chan struct{})}
	c.flight[key] = f
	c.mu.Unlock()
	f.lp, f.err = c.score(ctx, prompt, target)
	close(f.done)
	c.mu.Lock()
	delete(c.flight, key)
	if f.err == nil && c.memo != nil {
		c.memo[key] = f.lp
	}
	c.mu.Unlock()
	return f.lp, f.err
}

func (c *cachedScorer) score(ctx context.Context, prompt, target string) ([]float64, error) {
	if c.store == nil {
		return c.inner.TargetLogProbs(ctx, prompt, target)
	}
	name := c.inner.Name()
	if lp, ok, err := c.store.CachedLogProbs(ctx, name, prompt, target); err != nil || ok {
		return lp, err
	}
	lp, err := c.inner.TargetLogProbs(ctx, prompt, target)
	if err != nil {
		return nil, err
	}
	// Store with a fresh context: a finished score must survive a cancellation
	// that arrives right after it.
	if err := c.store.PutLogProbs(context.WithoutCancel(ctx), name, prompt, target, lp); err != nil {
		return nil, err
	}
	return lp, nil
}
