package tracker

// Starter starts the run a library call records its work in. The call
// invokes it once its inputs are checked (a refused call leaves no run);
// the caller owns the run it returns and finishes it (Run.Finish) once the
// call has returned, so that a command can record how it ended (signals,
// output errors). A nil Starter records nothing.
type Starter func(kind string, config any) (*Run, error)

// Record calls call with a Starter that starts runs in s with version and
// backend, then finishes every run it started with call's error: how a
// notebook or another program records a library call as the CLI does.
func (s *Store) Record(version, backend string, call func(start Starter) error) error {
	var runs []*Run
	err := call(func(kind string, config any) (*Run, error) {
		r, err := s.Start(kind, config, version, backend)
		if err == nil {
			runs = append(runs, r)
		}
		return r, err
	})
	for _, r := range runs {
		if ferr := r.Finish(err); err == nil && ferr != nil {
			err = ferr
		}
	}
	return err
}

// Start starts a run with start, or returns nil (nothing recorded) when
// start is nil.
func (start Starter) Start(kind string, config any) (*Run, error) {
	if start == nil {
		return nil, nil
	}
	return start(kind, config)
}

// Store is the store the run is recorded in (e.g. for the label tables
// kept beside the runs).
func (r *Run) Store() *Store { return r.s }
