package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
)

// cmdRun is the run a library call started through the Starter of
// runStarter: the command finishes it (finishRun: signals, a closed stdout)
// and closes its store once the call has returned and the result is printed.
type cmdRun struct {
	st  *tracker.Store
	run *tracker.Run
}

// runStarter returns a Starter that starts the run with open (startRun, or
// startOrResumeRun for a command that resumes) and keeps it in the
// returned cmdRun; defer its finish right after.
func runStarter(open func(kind string, config any) (*tracker.Store, *tracker.Run, error)) (*cmdRun, tracker.Starter) {
	r := &cmdRun{}
	return r, func(kind string, config any) (*tracker.Run, error) {
		st, run, err := open(kind, config)
		if err != nil {
			return nil, err
		}
		r.st, r.run = st, run
		return run, nil
	}
}

// startRunOf is the Starter of a command whose runs start fresh (startRun).
func startRunOf(g *globals) (*cmdRun, tracker.Starter) {
	return runStarter(func(kind string, config any) (*tracker.Store, *tracker.Run, error) { return startRun(g, kind, config) })
}

// finish records how the command's run ended (finishRun; a panic as
// failed, re-panicking) and closes its store; nothing when no run started.
func (r *cmdRun) finish(err *error) {
	if p := recover(); p != nil {
		if r.run != nil {
			_ = r.run.Finish(fmt.Errorf("panic: %v", p))
			r.st.Close()
		}
		panic(p)
	}
	if r.run == nil {
		return
	}
	finishRun(r.run, err)
	r.st.Close()
}

// changedFlags are the flags of cmd given on the command line, for the
// options of commands whose explicit flags override a recipe or a model's
// settings.
func changedFlags(cmd *cobra.Command) map[string]bool {
	m := map[string]bool{}
	cmd.Flags().Visit(func(f *pflag.Flag) { m[f.Name] = true })
	return m
}

// barOnStart wraps start so that *bar is created (progress.New) once the
// run has started, where the commands have always created it: a call
// refused before its run prints no bar, and notes printed while checking
// inputs come before it. The bar's methods do nothing while it is nil.
func barOnStart(start tracker.Starter, bar **progress.Bar, w io.Writer, total int, desc string) tracker.Starter {
	return func(kind string, config any) (*tracker.Run, error) {
		run, err := start(kind, config)
		if err == nil {
			*bar = progress.New(w, total, desc)
		}
		return run, err
	}
}
