package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ragforge/ragforge/data/tracker"
)

// How a command's process ends, whatever stops it: SIGINT and SIGTERM
// cancel the command's context, and the command finishes its run as
// interrupted (finishRun) and returns. A command that has not returned
// within interruptGrace (or the longer grace it asked for with
// graceAtLeast), or a second signal, marks the open runs of every store the
// command opened interrupted and exits at once (exit 128+signal).
// SIGKILL cannot be caught: its run reads as stale (data/tracker derives it
// from the recorded PID). A broken stdout pipe fails writes with EPIPE
// instead of killing the process, so runs end and the exit is 141.

// interruptGrace is how long a cancelled command may take to stop on its own.
const interruptGrace = 10 * time.Second

// life is process-wide because signals are.
var life lifecycle

type lifecycle struct {
	mu     sync.Mutex
	depth  int             // nested execute calls (the demo runs stages in-process)
	ctx    context.Context // the outermost call's
	grace  time.Duration   // how long a signalled command may take to return
	sig    os.Signal
	stores map[*tracker.Store]bool
}

// watch installs the signal handling for an execute call; stop undoes it.
// A nested call shares the outermost call's context and handler.
func (l *lifecycle) watch(parent context.Context, stderr io.Writer) (ctx context.Context, stop func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.depth++
	if l.depth > 1 {
		return l.ctx, func() {
			l.mu.Lock()
			l.depth--
			l.mu.Unlock()
		}
	}
	l.sig, l.stores, l.grace = nil, map[*tracker.Store]bool{}, interruptGrace
	ctx, cancel := context.WithCancelCause(parent)
	l.ctx = ctx
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	done := make(chan struct{})
	go func() {
		var grace <-chan time.Time
		for {
			select {
			case <-done:
				return
			case <-grace:
				l.abort(stderr, fmt.Sprintf("did not stop within %s", l.graceTime()))
			case s := <-ch:
				if s == syscall.SIGPIPE {
					continue // the write that caused it fails with EPIPE
				}
				l.mu.Lock()
				first := l.sig == nil
				if first {
					l.sig = s
				}
				l.mu.Unlock()
				if !first {
					l.abort(stderr, "second signal") // exits
				}
				fmt.Fprintf(stderr, "ragforge: %s: stopping (send it again to exit at once)\n", sigName(s))
				cancel(fmt.Errorf("%w by %s", tracker.ErrInterrupted, sigName(s)))
				grace = time.After(l.graceTime())
			}
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
		l.mu.Lock()
		l.depth--
		l.mu.Unlock()
	}
}

// graceAtLeast lets a command with its own shutdown (serve waits for
// in-flight requests) take d to return after a signal.
func (l *lifecycle) graceAtLeast(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grace = max(l.grace, d)
}

func (l *lifecycle) graceTime() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grace
}

// track registers a store whose open runs abort must close.
func (l *lifecycle) track(st *tracker.Store) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stores != nil {
		l.stores[st] = true
	}
}

// signal returns the first SIGINT/SIGTERM received, or nil.
func (l *lifecycle) signal() os.Signal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sig
}

// abort marks the open runs interrupted (waiting at most 3 s for the
// database) and exits with 128+signal.
func (l *lifecycle) abort(stderr io.Writer, why string) {
	s := l.signal()
	l.mu.Lock()
	stores := make([]*tracker.Store, 0, len(l.stores))
	for st := range l.stores {
		stores = append(stores, st)
	}
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	msg := fmt.Sprintf("%v by %s (%s; exited before the command returned)", tracker.ErrInterrupted, sigName(s), why)
	for _, st := range stores {
		ids, err := st.InterruptOpen(ctx, msg)
		for _, id := range ids {
			fmt.Fprintf(stderr, "ragforge: run %s marked interrupted\n", id)
		}
		if err != nil {
			fmt.Fprintf(stderr, "ragforge: could not mark runs interrupted (they read as stale): %v\n", err)
		}
	}
	fmt.Fprintf(stderr, "ragforge: %s: exiting (%s)\n", sigName(s), why)
	os.Exit(exitCode(s))
}

// interrupted rewrites the error a command returns after a signal, so its
// run is finished as interrupted (tracker.ErrInterrupted) naming the signal.
func (l *lifecycle) interrupted(err error) error {
	if err == nil {
		return nil
	}
	if s := l.signal(); s != nil && !errors.Is(err, tracker.ErrInterrupted) {
		return fmt.Errorf("%w by %s: %w", tracker.ErrInterrupted, sigName(s), err)
	}
	return err
}

func sigName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case nil:
		return "signal"
	}
	return s.String()
}

// exitCode is the shell's 128+signal number.
func exitCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// errStdoutClosed wraps the EPIPE of a write to a stdout whose reader went
// away (`ragforge ... | head`): the run's work is done and stored, so
// finishRun records it as done; the process exits 141 as if SIGPIPE had
// killed it.
var errStdoutClosed = errors.New("stdout closed")

// outWriter remembers whether a write failed on a broken pipe.
type outWriter struct {
	w      io.Writer
	mu     sync.Mutex
	broken bool
}

func (o *outWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil && errors.Is(err, syscall.EPIPE) {
		o.mu.Lock()
		o.broken = true
		o.mu.Unlock()
		err = fmt.Errorf("%w: %w", errStdoutClosed, err)
	}
	return n, err
}

func (o *outWriter) isBroken() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.broken
}
