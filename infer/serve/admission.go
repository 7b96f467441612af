package serve

import (
	"context"
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
//   - at most MaxConcurrentRequests requests do model work at once;
//   - up to MaxQueue more wait for a slot, first come first served; the
//     request timeout counts from arrival, so a queued request waits only
//     while it can still expect to finish: until its deadline less 1.25
//     times the mean service time of the last 8 requests, then it is
//     answered 503;
//   - a request finding the queue full is answered 429 at once;
//   - once the server drains (SIGTERM), queued and new requests are
//     answered 503 at once and the running ones finish.
//
// Every refusal carries Retry-After in seconds: that service time per
// slot (when the next running request should end), at least 1, at most 60.

// admission is the slot pool of model routes.
type admission struct {
	slots chan struct{} // a token per running request
	queue chan struct{} // a token per waiting request

	drainOnce sync.Once
	draining  chan struct{} // closed when the server drains

	mu     sync.Mutex
	recent [8]float64 // service seconds of the last requests, a ring
	next   int        // ring position of the next one
}

func newAdmission(concurrent, queue int) *admission {
	return &admission{slots: make(chan struct{}, concurrent), queue: make(chan struct{}, queue), draining: make(chan struct{})}
}

// overloadError is a refusal by admission control: 429 or 503 with
// Retry-After.
type overloadError struct {
	requestError
	retryAfter int // seconds
}

// admit waits for a slot, at most until ctx's deadline less 1.25
// estimated service times. It returns the function that frees the slot (it records
// the service time), or an *overloadError, or ctx's error when the client
// went away while queued.
func (a *admission) admit(ctx context.Context) (release func(), err error) {
	select {
	case <-a.draining:
		return nil, a.refuse(503, "shutting_down", "the server is shutting down: no new requests are admitted")
	default:
	}
	select {
	case a.slots <- struct{}{}:
		return a.releaser(), nil
	default:
	}
	select {
	case a.queue <- struct{}{}:
	default:
		return nil, a.refuse(429, "overloaded", fmt.Sprintf("server overloaded: %d requests running and %d waiting, the most allowed (max-concurrent-requests, max-queue)", cap(a.slots), cap(a.queue)))
	}
	defer func() { <-a.queue }()
	// The wait is re-estimated every recheck: the service time changes as
	// requests finish (and is unknown before the first one does), and a
	// slot taken when the request could no longer finish is given back.
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		wait, known := a.maxWait(ctx)
		if wait <= 0 {
			return nil, a.queueTimeout()
		}
		t.Reset(min(wait, recheck))
		select {
		case a.slots <- struct{}{}:
			if wait, known := a.maxWait(ctx); known && wait <= 0 {
				<-a.slots
				return nil, a.queueTimeout()
			}
			return a.releaser(), nil
		case <-t.C:
			if known && wait <= recheck {
				return nil, a.queueTimeout()
			}
		case <-a.draining:
			return nil, a.refuse(503, "shutting_down", "the server is shutting down: queued requests are not started")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// recheck is how often a queued request re-estimates its wait.
const recheck = 50 * time.Millisecond

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

func (a *admission) releaser() func() {
	start := time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.observe(time.Since(start).Seconds())
			<-a.slots
		})
	}
}

// observe records one service time.
func (a *admission) observe(sec float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recent[a.next] = sec
	a.next = (a.next + 1) % len(a.recent)
}

// serviceTime estimates how long a request admitted now will take: the
// mean of the last 8 (0: none yet). A plain mean over a short window
// follows a rise in load within a few requests (a request admitted on a
// low estimate is caught by the 1.25 margin and the check when it gets its
// slot), and one slow request among them does not refuse the next ones.
func (a *admission) serviceTime() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	sum, n := 0.0, 0
	for _, s := range a.recent {
		if s > 0 {
			sum += s
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// retryAfter estimates the seconds until the next running request ends,
// which frees a place in the queue: the service time per slot, at least 1,
// at most 60. Not the time until the whole queue drains: clients told that
// come back after the queue has emptied, and the model idles meanwhile.
func (a *admission) retryAfter() int {
	s := int(math.Ceil(a.serviceTime() / float64(cap(a.slots))))
	return min(max(s, 1), 60)
}

func (a *admission) refuse(code int, errCode, msg string) *overloadError {
	return &overloadError{requestError: requestError{code: code, errCode: errCode, msg: msg}, retryAfter: a.retryAfter()}
}

// drain refuses queued and new requests from now on; running ones go on.
func (a *admission) drain() { a.drainOnce.Do(func() { close(a.draining) }) }

// Load returns the requests running and waiting.
func (a *admission) load() (running, queued int) { return len(a.slots), len(a.queue) }

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
