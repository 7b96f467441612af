package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Admission control. The models are CPU-bound and micro-batches run one at
// a time, so requests admitted together share the model evenly: without a
// bound, n heavy requests each take n times longer, and past
// request-timeout / (time of one) every one of them times out and none is
// served. As vLLM, TGI (--max-concurrent-requests) and llama.cpp (slots)
// do, the server admits model work up to a bound and refuses the rest
// before it uses any model time:
//   - at most MaxConcurrentRequests requests do model work at once, and
//     fewer when requests are heavy: the bound in force is the number that,
//     sharing the model, still finish within the request timeout (its
//     timeout over 1.25 times a request's model time alone, estimated from
//     the last 8 as service time / requests running), at least 1;
//   - up to MaxQueue more wait for a slot, first come first served; the
//     request timeout counts from arrival, so a queued request waits only
//     while it can still expect to finish: until its deadline less 1.25
//     times the mean service time of the last 8 requests, then it is
//     answered 503 (a slot granted too late is given back unused);
//   - a request finding the queue full is answered 429 at once;
//   - once the server drains (SIGTERM), queued and new requests are
//     answered 503 at once and the running ones finish.
//
// Every refusal carries Retry-After in seconds: the service time per
// running request (when the next one should end), at least 1, at most 60.

// admission is the slot pool of model routes.
type admission struct {
	max, maxQueue int
	timeout       time.Duration // the request timeout, for the bound in force

	drainOnce sync.Once
	draining  chan struct{} // closed when the server drains

	mu      sync.Mutex
	running int
	waiters []*waiter // FIFO
	recent  [8]sample // the last requests' service, a ring
	next    int       // ring position of the next one
}

// waiter is a queued request; ready is closed when it is granted a slot.
type waiter struct {
	ready   chan struct{}
	granted bool
}

// sample is one finished request: its service seconds and the most
// requests running during it (at its start or end).
type sample struct {
	sec     float64
	running int
}

func newAdmission(concurrent, queue int, timeout time.Duration) *admission {
	return &admission{max: concurrent, maxQueue: queue, timeout: timeout, draining: make(chan struct{})}
}

// overloadError is a refusal by admission control: 429 or 503 with
// Retry-After.
type overloadError struct {
	requestError
	retryAfter int // seconds
}

// admit takes a slot or waits for one, at most until ctx's deadline less
// 1.25 estimated service times. It returns the function that frees the
// slot (it records the service time), or an *overloadError, or ctx's error
// when the client went away while queued.
func (a *admission) admit(ctx context.Context) (release func(), err error) {
	a.mu.Lock()
	select {
	case <-a.draining:
		a.mu.Unlock()
		return nil, a.refuse(503, "shutting_down", "the server is shutting down: no new requests are admitted")
	default:
	}
	if len(a.waiters) == 0 && a.running < a.boundLocked() {
		a.running++
		n := a.running
		a.mu.Unlock()
		return a.releaser(ctx, n), nil
	}
	if len(a.waiters) >= a.maxQueue {
		running := a.running
		a.mu.Unlock()
		return nil, a.refuse(429, "overloaded", fmt.Sprintf("server overloaded: %d requests running and %d waiting, the most allowed (max-concurrent-requests, max-queue)", running, a.maxQueue))
	}
	w := &waiter{ready: make(chan struct{})}
	a.waiters = append(a.waiters, w)
	a.mu.Unlock()

	// The wait is re-estimated every recheck: the service time changes as
	// requests finish (and is unknown before the first one does).
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		wait, known := a.maxWait(ctx)
		if wait <= 0 {
			a.leave(w)
			return nil, a.queueTimeout()
		}
		t.Reset(min(wait, recheck))
		select {
		case <-w.ready:
			if wait, known := a.maxWait(ctx); known && wait <= 0 {
				a.leave(w)
				return nil, a.queueTimeout()
			}
			a.mu.Lock()
			n := a.running
			a.mu.Unlock()
			return a.releaser(ctx, n), nil
		case <-t.C:
			if known && wait <= recheck {
				a.leave(w)
				return nil, a.queueTimeout()
			}
		case <-a.draining:
			a.leave(w)
			return nil, a.refuse(503, "shutting_down", "the server is shutting down: queued requests are not started")
		case <-ctx.Done():
			a.leave(w)
			return nil, ctx.Err()
		}
	}
}

// recheck is how often a queued request re-estimates its wait.
const recheck = 50 * time.Millisecond

// leave takes w out of the queue, or gives back the slot it was granted.
func (a *admission) leave(w *waiter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.granted {
		a.running--
		a.grantLocked()
		return
	}
	for i, x := range a.waiters {
		if x == w {
			a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
			break
		}
	}
}

// grantLocked hands free slots to the first waiters.
func (a *admission) grantLocked() {
	for len(a.waiters) > 0 && a.running < a.boundLocked() {
		w := a.waiters[0]
		a.waiters = a.waiters[1:]
		w.granted = true
		a.running++
		close(w.ready)
	}
}

// boundLocked is the concurrency bound in force: the requests that,
// sharing the model, each finish within the timeout with a margin of 1.25,
// from the model time of one alone (mean of service / running over the
// last requests); MaxConcurrentRequests before any has finished.
func (a *admission) boundLocked() int {
	sum, n := 0.0, 0
	for _, s := range a.recent {
		if s.sec > 0 {
			sum += s.sec / float64(s.running)
			n++
		}
	}
	if n == 0 || sum == 0 {
		return a.max
	}
	alone := sum / float64(n)
	return min(max(int(a.timeout.Seconds()/(1.25*alone)), 1), a.max)
}

func (a *admission) queueTimeout() *overloadError {
	return a.refuse(503, "queue_timeout", "server overloaded: no model slot freed while this request could still finish before its request-timeout (max-concurrent-requests, request-timeout)")
}

// maxWait is how long a request may still queue: until ctx's deadline less
// 1.25 estimated service times (known), or half the time left while no
// request has finished yet (not known).
func (a *admission) maxWait(ctx context.Context) (wait time.Duration, known bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Hour, true // callers always set a deadline; a bound all the same
	}
	left := time.Until(dl)
	est := a.serviceTime()
	if est == 0 {
		return left / 2, false
	}
	return left - time.Duration(1.25*est*float64(time.Second)), true
}

// releaser returns the function that frees the slot of a request admitted
// with n requests running. A request that ran into its deadline did not
// finish, so its service time is only a lower bound: it is counted twice
// over, which brings the bound in force down within one round of requests
// too heavy for it instead of several.
func (a *admission) releaser(ctx context.Context, n int) func() {
	start := time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			sec := time.Since(start).Seconds()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				sec *= 2
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			a.recent[a.next] = sample{sec: sec, running: max(n, a.running)}
			a.next = (a.next + 1) % len(a.recent)
			a.running--
			a.grantLocked()
		})
	}
}

// serviceTime estimates how long a request admitted now will take: the
// mean of the last 8 (0: none yet). A plain mean over a short window
// follows a rise in load within a few requests (a request admitted on a
// low estimate is caught by the 1.25 margin and the check when it gets its
// slot), and one slow request among them does not refuse the next ones.
func (a *admission) serviceTime() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.serviceTimeLocked()
}

func (a *admission) serviceTimeLocked() float64 {
	sum, n := 0.0, 0
	for _, s := range a.recent {
		if s.sec > 0 {
			sum += s.sec
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// retryAfter estimates the seconds until the next running request ends,
// which frees a place in the queue: the service time per running request,
// at least 1, at most 60. Not the time until the whole queue drains:
// clients told that come back after the queue has emptied, and the model
// idles meanwhile.
func (a *admission) retryAfter() int {
	a.mu.Lock()
	est, running := a.serviceTimeLocked(), max(a.running, 1)
	a.mu.Unlock()
	s := int(math.Ceil(est / float64(running)))
	return min(max(s, 1), 60)
}

func (a *admission) refuse(code int, errCode, msg string) *overloadError {
	return &overloadError{requestError: requestError{code: code, errCode: errCode, msg: msg}, retryAfter: a.retryAfter()}
}

// drain refuses queued and new requests from now on; running ones go on.
func (a *admission) drain() { a.drainOnce.Do(func() { close(a.draining) }) }

// load returns the requests running and waiting.
func (a *admission) load() (running, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running, len(a.waiters)
}

// admit wraps a model route: the request timeout starts here, the request
// waits for a slot (see admission) or is refused with 429/503 and
// Retry-After before any of its work.
func (s *Server) admit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.opt.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		release, err := s.adm.admit(ctx)
		if err != nil {
			if oe, ok := err.(*overloadError); ok {
				w.Header().Set("Retry-After", strconv.Itoa(oe.retryAfter))
				writeError(w, &oe.requestError)
			}
			// Otherwise the client is gone.
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}
