package serve

import (
	"context"
	"sync"
	"time"
)

// RemoteHealthTTL is how long /healthz reuses a remote server's answer: a
// health poller every second costs the remote one GET per TTL, not one per
// poll.
const RemoteHealthTTL = 5 * time.Second

// remoteHealthTimeout bounds one check, so /healthz answers within seconds
// even when the remote hangs (openai.Client.Preflight has its own 3 s bound).
const remoteHealthTimeout = 2 * time.Second

// RemoteCheck is /healthz's view of a remote part that may go down after
// start-up (the --llm openai: server): start-up cannot probe it, as it may
// start after this server, so /healthz asks it, at most once per TTL.
type RemoteCheck struct {
	Check func(ctx context.Context) error // e.g. openai.Client.Preflight (GET /v1/models)
	TTL   time.Duration                   // 0: RemoteHealthTTL

	mu  sync.Mutex
	at  time.Time // of the last check; zero before the first
	err error
}

// Err is the remote's state: the cached result when younger than TTL,
// otherwise a fresh check. Concurrent callers share one check.
func (r *RemoteCheck) Err(ctx context.Context) error {
	ttl := r.TTL
	if ttl <= 0 {
		ttl = RemoteHealthTTL
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() && time.Since(r.at) < ttl {
		return r.err
	}
	ctx, cancel := context.WithTimeout(ctx, remoteHealthTimeout)
	defer cancel()
	r.err, r.at = r.Check(ctx), time.Now()
	return r.err
}
