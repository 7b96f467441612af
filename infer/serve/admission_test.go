package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sleepModel is a Filter standing for a CPU-bound model: every snippet is
// `steps` model calls of `step` each, run one at a time through a Batcher
// of one item per call, so concurrent requests share the model evenly as
// the T5 filter's micro-batches do. It counts the model calls it ran and
// the time they took (a loaded machine oversleeps).
type sleepModel struct {
	steps int
	step  time.Duration
	calls atomic.Int64
	busy  atomic.Int64 // ns
	b     *Batcher[int, float64]
}

func newSleepModel(steps int, step time.Duration) *sleepModel {
	m := &sleepModel{steps: steps, step: step}
	m.b = NewBatcher(func(items []int) ([]float64, error) {
		t0 := time.Now()
		time.Sleep(time.Duration(len(items)) * m.step)
		m.busy.Add(int64(time.Since(t0)))
		m.calls.Add(int64(len(items)))
		return make([]float64, len(items)), nil
	}, 1, 0, nil)
	return m
}

func (m *sleepModel) Predict(ctx context.Context, q string, snippets []string) ([]float64, error) {
	if _, err := m.b.Do(ctx, make([]int, m.steps*len(snippets))); err != nil {
		return nil, err
	}
	return make([]float64, len(snippets)), nil
}

// loopbackServer serves comps with filter f and opt on a loopback port
// until the returned cancel is called; done yields Serve's error.
func loopbackServer(t *testing.T, comps Components, f Filter, opt Options) (url string, s *Server, cancel func(), done <-chan error) {
	t.Helper()
	comps.Filter = f
	s, err := New(opt, &comps)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		errc <- s.Serve(ctx, ln)
		close(finished)
	}()
	t.Cleanup(func() {
		stop()
		<-finished
	})
	return "http://" + ln.Addr().String(), s, stop, errc
}

// outcome is one client's view of a request.
type outcome struct {
	code       int
	retryAfter string
	errCode    string
	took       time.Duration
	err        error
}

// burst sends n /v1/filter requests of one snippet at once and returns
// their outcomes.
func burst(url string, n int) []outcome {
	out := make([]outcome, n)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			resp, err := client.Post(url+"/v1/filter", "application/json", strings.NewReader(fmt.Sprintf(`{"question":"q%d","snippets":["s"]}`, i)))
			if err != nil {
				out[i] = outcome{err: err, took: time.Since(t0)}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			o := outcome{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), took: time.Since(t0)}
			var eb ErrorBody
			if json.Unmarshal(b, &eb) == nil && eb.Error.Code != nil {
				o.errCode = *eb.Error.Code
			}
			out[i] = o
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// Acceptance 1 of issue 30: 32 concurrent heavy requests against a real
// server on loopback. With admission bounded, each ends within the 2 s
// request timeout (the 1 s with model calls of twice the length, so
// a loaded test machine's scheduling jitter weighs half as much), served or refused with 429/503 and Retry-After; the
// refused ones use no model time, and about as many are served as the
// model can finish in that time. Without the bound (the control: every
// request admitted), requests share the model evenly and time out
// together.
func TestOverloadAdmission(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: timed load run in -short mode")
	}
	f := newFixture(t, Options{})
	const (
		clients = 32
		steps   = 5 // model calls per request: 100 ms of model time alone
		step    = 20 * time.Millisecond
		timeout = 2 * time.Second
		slots   = 4
	)
	run := func(t *testing.T, concurrent, queue int) (served int, m *sleepModel, outs []outcome) {
		m = newSleepModel(steps, step)
		defer m.b.Close()
		url, _, _, _ := loopbackServer(t, *f.comps, m, Options{RequestTimeout: timeout, MaxConcurrentRequests: concurrent, MaxQueue: queue, MaxBatch: 1})
		outs = burst(url, clients)
		for _, o := range outs {
			if o.code == 200 {
				served++
			}
		}
		return served, m, outs
	}

	t.Run("bounded", func(t *testing.T) {
		served, m, outs := run(t, slots, 16)
		refused := map[string]int{}
		for i, o := range outs {
			switch {
			case o.err != nil:
				t.Errorf("request %d: %v", i, o.err)
			case o.code == 200:
			case (o.code == 429 || o.code == 503) && o.retryAfter != "":
				if s, err := strconv.Atoi(o.retryAfter); err != nil || s < 1 {
					t.Errorf("request %d: Retry-After %q", i, o.retryAfter)
				}
				refused[fmt.Sprint(o.code, " ", o.errCode)]++
				if o.code == 429 && o.took > time.Second {
					t.Errorf("request %d: refused with 429 only after %v", i, o.took)
				}
			default:
				t.Errorf("request %d: HTTP %d (%s) Retry-After %q: neither served nor refused by admission", i, o.code, o.errCode, o.retryAfter)
			}
			// The timeout bounds every request; a little slack for the
			// loopback round trip on a loaded machine.
			if o.took > timeout+200*time.Millisecond {
				t.Errorf("request %d: HTTP %d after %v, over the %v request timeout", i, o.code, o.took, timeout)
			}
		}
		// The model finishes timeout/alone requests in the timeout, alone
		// being a request's model time as measured during the burst (a
		// loaded machine oversleeps). Those admitted run in rounds of
		// `slots` sharing the model, a round taking slots×alone, and a
		// queued request starts only while it can still finish, so at most
		// one round of that is lost.
		alone := time.Duration(m.busy.Load() / m.calls.Load() * steps)
		capacity := int(timeout / alone)
		if served < capacity-slots {
			t.Errorf("served %d of %d, want ≥ %d (the model finishes %d requests of %v in %v; refused: %v)", served, clients, capacity-slots, capacity, alone, timeout, refused)
		}
		if refused["429 overloaded"] != clients-slots-16 {
			t.Errorf("refused %v: want %d at once with 429 (queue full)", refused, clients-slots-16)
		}
		// Refused work uses no model time: every model call belongs to a
		// served request.
		if got, want := m.calls.Load(), int64(served*steps); got != want {
			t.Errorf("%d model calls, want %d (%d served × %d): refused or timed-out requests used the model", got, want, served, steps)
		}
		t.Logf("served %d, refused %v", served, refused)
	})

	t.Run("unbounded control", func(t *testing.T) {
		// Every request admitted: 32 × 100 ms of model time shared evenly
		// ends after the 2 s timeout for all of them.
		served, m, _ := run(t, clients, 1)
		if served >= int(timeout/(steps*step))-slots {
			t.Errorf("control served %d: the overload this test guards against did not happen", served)
		}
		if m.calls.Load() == int64(served*steps) {
			t.Errorf("control: no model time wasted on timed-out requests (%d calls)", m.calls.Load())
		}
		t.Logf("control served %d, %d model calls (%d wasted)", served, m.calls.Load(), m.calls.Load()-int64(served*steps))
	})
}

// Acceptance 2 of issue 30: SIGTERM (Serve's context ending) under load
// lets the running requests finish, refuses the queued and new ones at
// once with 503 and Retry-After, and Serve returns once they are done.
func TestDrainUnderLoad(t *testing.T) {
	f := newFixture(t, Options{})
	m := newSleepModel(20, 10*time.Millisecond) // 200 ms alone, 800 ms shared by 4
	defer m.b.Close()
	url, s, stop, done := loopbackServer(t, *f.comps, m, Options{RequestTimeout: 20 * time.Second, ShutdownTimeout: 10 * time.Second, MaxConcurrentRequests: 4, MaxQueue: 8})
	outs := make(chan outcome, 12)
	go func() {
		for _, o := range burst(url, 12) {
			outs <- o
		}
		close(outs)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if r, q := s.adm.load(); r == 4 && q == 8 {
			break
		}
		if time.Now().After(deadline) {
			r, q := s.adm.load()
			t.Fatalf("load never reached 4 running + 8 queued: %d + %d", r, q)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stopped := time.Now()
	stop()
	codes := map[string]int{}
	for o := range outs {
		if o.err != nil {
			t.Fatalf("request: %v", o.err)
		}
		codes[fmt.Sprint(o.code, " ", o.errCode)]++
		if o.code == 503 && o.retryAfter == "" {
			t.Errorf("503 without Retry-After")
		}
	}
	if codes["200 "] != 4 || codes["503 shutting_down"] != 8 {
		t.Errorf("outcomes %v: want the 4 running served and the 8 queued refused", codes)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if d := time.Since(stopped); d > 5*time.Second {
		t.Errorf("drain took %v", d)
	}
	if _, err := http.Post(url+"/v1/filter", "application/json", strings.NewReader(`{"question":"q","snippets":["s"]}`)); err == nil {
		t.Error("a new request was accepted after the drain")
	}
	// Model time of the 4 served only.
	if got := m.calls.Load(); got != 4*20 {
		t.Errorf("%d model calls, want %d", got, 4*20)
	}
}

// The concurrency bound in force shrinks when requests are heavy: as many
// as, sharing the model, still finish within the timeout with the 1.25
// margin, from each finished request's service time per request running.
func TestAdmissionBoundFollowsRequestCost(t *testing.T) {
	for _, c := range []struct {
		name    string
		samples []sample
		want    int
	}{
		{"none finished yet", nil, 4},
		{"light: 0.1 s alone", []sample{{0.4, 4}, {0.4, 4}}, 4},
		{"2 s alone: 4 in 10 s", []sample{{8, 4}}, 4},
		{"3 s alone: 2 in 10 s", []sample{{12, 4}, {6, 2}}, 2},
		{"5 s alone: one at a time", []sample{{20, 4}}, 1},
		{"over the timeout alone: still one", []sample{{30, 1}}, 1},
	} {
		a := newAdmission(4, 16, 10*time.Second)
		copy(a.recent[:], c.samples)
		if got := a.boundLocked(); got != c.want {
			t.Errorf("%s: bound %d, want %d", c.name, got, c.want)
		}
	}
}
