package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/retrieval/evalrun"
)

// corpusFlags are the flags of every command that reads and chunks a
// corpus: evalrun.Corpus, whose json tags name the run config fields.
type corpusFlags struct {
	evalrun.Corpus

	// encoded is the pre-encoded corpus load read, for --corpus rag2:DIR.
	encoded *data.Encoded
}

func (c *corpusFlags) add(cmd *cobra.Command) { addCorpusFlags(cmd, &c.Corpus) }

func addCorpusFlags(cmd *cobra.Command, c *evalrun.Corpus) {
	f := cmd.Flags()
	f.StringVar(&c.Path, "corpus", "", "corpus: HF save_to_disk dir, BEIR dir, .jsonl, .csv, or rag2:DIR[#name] (pre-encoded by ragforge encode, RAG² layout) (required)")
	f.StringVar(&c.TextField, "text-field", "", "text field name (default \"text\")")
	f.StringVar(&c.IDField, "id-field", "", "id field name (default \"_id\"/\"id\", else the record index)")
	f.StringVar(&c.TitleField, "title-field", "", "title field name (default \"title\")")
	f.BoolVar(&c.SkipEmpty, "skip-empty", false, "skip records with empty text instead of stopping")
	f.IntVar(&c.ChunkSize, "chunk-size", 512, "chunk size in characters (0: whole documents)")
	f.IntVar(&c.Overlap, "chunk-overlap", 128, "chunk overlap in characters")
	f.IntVar(&c.MaxField, "max-field-bytes", data.DefaultMaxFieldBytes, "largest field of a corpus record in bytes; a longer one is an error")
	c.Given = f.Changed
	minInt(f, 0, "chunk-size", "chunk-overlap")
	minInt(f, 1, "max-field-bytes")
}

// load loads and chunks the corpus (evalrun.Corpus.Load, progress on
// stderr); c.encoded keeps a pre-encoded corpus's vectors.
func (c *corpusFlags) load(g *globals) ([]data.Document, []data.Chunk, error) {
	ld, err := c.Load(g.Err)
	if err != nil {
		return nil, nil, err
	}
	c.encoded = ld.Encoded
	return ld.Docs, ld.Chunks, nil
}

// parseInts parses "1,2,4,8".
func parseInts(s, flag string) ([]int, error) { return evalrun.ParseInts(s, flag) }

// startRun opens the store and records a run of kind with config.
func startRun(g *globals, kind string, config any) (*tracker.Store, *tracker.Run, error) {
	if err := notInterrupted(kind); err != nil {
		return nil, nil, err
	}
	st, err := openStore(g)
	if err != nil {
		return nil, nil, err
	}
	run, err := st.Start(kind, config, version.Version, backend.Name(g.Backend))
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, run, nil
}

// notInterrupted refuses to start or resume a run after SIGINT/SIGTERM (a
// command that was loading its inputs when the signal came).
func notInterrupted(kind string) error {
	if s := life.signal(); s != nil {
		return fmt.Errorf("%w by %s before the %s run started", tracker.ErrInterrupted, sigName(s), kind)
	}
	return nil
}

// startOrResumeRun is startRun for a command that writes into dir and can
// resume: without resume it starts a run and records its id in
// dir/run.json; with resume it reopens the run recorded there (tracker.Store.Resume:
// refused while that run's process is alive), or starts a new one, with a
// note on stderr, when dir names no run of this store.
func startOrResumeRun(g *globals, kind string, config any, dir string, resume bool) (*tracker.Store, *tracker.Run, error) {
	if err := notInterrupted(kind); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, tracker.DirRunFile)
	if resume {
		var rf struct {
			RunID string `json:"run_id"`
		}
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &rf); err != nil || rf.RunID == "" {
				return nil, nil, fmt.Errorf("%s: field %q: not a run id (%v)", path, "run_id", err)
			}
		case !errors.Is(err, os.ErrNotExist):
			return nil, nil, err
		}
		if rf.RunID != "" {
			st, err := openStore(g)
			if err != nil {
				return nil, nil, err
			}
			run, err := st.Resume(rf.RunID)
			if err == nil {
				return st, run, nil
			}
			st.Close()
			if !errors.Is(err, tracker.ErrNotFound) {
				return nil, nil, fmt.Errorf("%s: %w", path, err)
			}
			fmt.Fprintf(g.Err, "ragforge: %s names run %s, which is not in %s; starting a new run\n", path, rf.RunID, st.Path())
		}
	}
	st, run, err := startRun(g, kind, config)
	if err != nil {
		return nil, nil, err
	}
	if err = tracker.RecordInDir(dir, run, kind); err != nil {
		run.Finish(err)
		st.Close()
		return nil, nil, err
	}
	return st, run, nil
}

// runDir is where a run's files go by default: runs/<id> beside the SQLite
// database, or in the working directory when the store is a PostgreSQL server.
func runDir(g *globals, runID, override string) (string, error) {
	dir := override
	if dir == "" {
		dir = tracker.RunDir(g.DB, runID)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// finishRun records how a command's run ended, on every exit path when
// deferred right after startRun: done (also when only writing the result to
// a closed stdout failed); interrupted after SIGINT/SIGTERM
// (*err is rewritten to name the signal); failed with *err; failed with the
// panic's value, re-panicking. A failure to record it is returned when the
// command itself succeeded.
func finishRun(run *tracker.Run, err *error) {
	if p := recover(); p != nil {
		_ = run.Finish(fmt.Errorf("panic: %v", p))
		panic(p)
	}
	*err = life.interrupted(*err)
	runErr := *err
	if errors.Is(runErr, errStdoutClosed) {
		runErr = nil // only printing the result failed
	}
	if ferr := run.Finish(runErr); *err == nil && ferr != nil {
		*err = ferr
	}
}
