package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/data/runs"
	"github.com/ragforge/ragforge/infer/retrieve"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/models/backend"
)

// corpusFlags are the flags of every command that reads and chunks a corpus.
// The json tags name the run config fields stored with every run.
type corpusFlags struct {
	Path       string `json:"corpus"`
	TextField  string `json:"text_field,omitempty"`
	IDField    string `json:"id_field,omitempty"`
	TitleField string `json:"title_field,omitempty"`
	SkipEmpty  bool   `json:"skip_empty"`
	ChunkSize  int    `json:"chunk_size"` // 0: whole documents
	Overlap    int    `json:"chunk_overlap"`
}

func (c *corpusFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.Path, "corpus", "", "corpus: HF save_to_disk dir, BEIR dir, .jsonl or .csv (required)")
	f.StringVar(&c.TextField, "text-field", "", "text field name (default \"text\")")
	f.StringVar(&c.IDField, "id-field", "", "id field name (default \"_id\"/\"id\", else the record index)")
	f.StringVar(&c.TitleField, "title-field", "", "title field name (default \"title\")")
	f.BoolVar(&c.SkipEmpty, "skip-empty", false, "skip records with empty text instead of stopping")
	f.IntVar(&c.ChunkSize, "chunk-size", 512, "chunk size in characters (0: whole documents)")
	f.IntVar(&c.Overlap, "chunk-overlap", 128, "chunk overlap in characters")
	minInt(f, 0, "chunk-size", "chunk-overlap")
}

func (c *corpusFlags) options() (retrieve.CorpusOptions, error) {
	if c.Path == "" {
		return retrieve.CorpusOptions{}, fmt.Errorf("--corpus is required")
	}
	cfg := chunk.DefaultConfig()
	cfg.Size, cfg.Overlap = c.ChunkSize, c.Overlap
	if c.ChunkSize > 0 {
		if err := cfg.Validate(); err != nil {
			return retrieve.CorpusOptions{}, fmt.Errorf("--chunk-size/--chunk-overlap: %w", err)
		}
	} else {
		cfg.Size = 0
	}
	return retrieve.CorpusOptions{
		Path:   c.Path,
		Fields: data.FieldOptions{TextField: c.TextField, IDField: c.IDField, TitleField: c.TitleField, SkipEmpty: c.SkipEmpty},
		Chunk:  cfg,
	}, nil
}

// load loads and chunks the corpus with a progress bar.
func (c *corpusFlags) load(g *globals) ([]data.Document, []data.Chunk, error) {
	opt, err := c.options()
	if err != nil {
		return nil, nil, err
	}
	bar := progress.New(g.Err, -1, "chunk")
	defer bar.Finish()
	return retrieve.LoadChunks(opt, bar.Func())
}

// parseInts parses "1,2,4,8".
func parseInts(s, flag string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, err := strconv.Atoi(part)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("--%s: %q is not a positive integer", flag, part)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--%s: empty", flag)
	}
	return out, nil
}

// startRun opens the store and records a run of kind with config.
func startRun(g *globals, kind string, config any) (*runs.Store, *runs.Run, error) {
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

// runDir is where a run's files go by default: runs/<id> beside the database.
func runDir(g *globals, runID, override string) (string, error) {
	dir := override
	if dir == "" {
		dir = filepath.Join(filepath.Dir(g.DB), "runs", runID)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// finishRun records how a command's run ended: done, or failed with *err.
// A failure to record it is returned when the command itself succeeded.
func finishRun(run *runs.Run, err *error) {
	if ferr := run.Finish(*err); *err == nil && ferr != nil {
		*err = ferr
	}
}
