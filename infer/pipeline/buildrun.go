package pipeline

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/evalrun"
	"github.com/ragforge/ragforge/retrieval/search"
)

// RunKind is the run kind a pipeline build is recorded as (FromRun finds
// its directory).
const RunKind = "pipeline"

// BuildConfig is a pipeline build as `ragforge pipeline build` records it
// (its JSON is the run config).
type BuildConfig struct {
	Corpora   []string       `json:"corpora"` // path, name=path, or rag2:DIR[#name]
	Chunk     evalrun.Corpus `json:"chunk"`   // chunking and fields (Path unused)
	Retriever string         `json:"retriever,omitempty"`
	Filter    string         `json:"filter,omitempty"`
	Generator string         `json:"generator,omitempty"`
	Reranker  string         `json:"reranker,omitempty"`
	Mode      string         `json:"mode,omitempty"` // "": hybrid with a retriever, else bm25
	K         int            `json:"k,omitempty"`    // 0: DefaultManifest's 5
	Out       string         `json:"out"`            // the directory to create
	Factory   string         `json:"faiss,omitempty"`
	Nprobe    int            `json:"nprobe,omitempty"`
	EfSearch  int            `json:"ef_search,omitempty"`
	BM25      evalrun.BM25   `json:"bm25"`
	// FromRun is an evalrun.Kind run whose settings the pipeline serves.
	FromRun string `json:"from_run,omitempty"`

	// Given reports which settings (by flag name) were set explicitly; a
	// given one that disagrees with FromRun is an error. nil: none.
	Given func(name string) bool `json:"-"`
	// ResolveModel, when set, maps a model directory (by flag: filter,
	// retriever, generator) to the checkpoint to ship (a training output's
	// best or last); nil keeps the directories as given.
	ResolveModel func(flag, dir string) (string, error) `json:"-"`
	// FilterWindows, when set, gives the windows the filter directory is to
	// be read at and where they came from (train/filtertrain's
	// CheckpointWindows also reads a training checkpoint's arguments); nil:
	// its config.json's (an export's), else the defaults.
	FilterWindows func(dir string) (filter.Windowing, string, error) `json:"-"`
	Backend       string                                             `json:"-"`
	Log           io.Writer                                          `json:"-"` // progress (nil: nowhere)
}

// DefaultBuildConfig is the CLI's defaults: chunks of 512 characters with
// 128 overlap, a Flat FAISS index, the default BM25.
func DefaultBuildConfig(out string, corpora ...string) BuildConfig {
	return BuildConfig{Corpora: corpora, Chunk: evalrun.DefaultCorpus(""), Out: out, Factory: "Flat", BM25: evalrun.DefaultBM25()}
}

func (c *BuildConfig) given(name string) bool { return c.Given != nil && c.Given(name) }

// Plan is a checked build: its config with the evaluated settings applied
// (what a run records), the manifest and the corpora loaded.
type Plan struct {
	Config    BuildConfig
	Manifest  Manifest
	Evaluated *Evaluated // of FromRun, else nil
	parts     Parts
}

// BuildResult is a finished build (what `pipeline build --json` prints:
// run_id, dir).
type BuildResult struct {
	RunID    string   `json:"run_id"`
	Dir      string   `json:"dir"`
	Manifest Manifest `json:"-"`
	// Evaluated is the FromRun evaluation served, else nil.
	Evaluated *Evaluated `json:"-"`
}

// BuildRun builds the pipeline directory cfg.Out and records it as a
// RunKind run in st (with FromRun read from st).
func BuildRun(ctx context.Context, st *tracker.Store, cfg BuildConfig) (res *BuildResult, err error) {
	var ev *Evaluated
	if cfg.FromRun != "" {
		if ev, err = ReadEvaluated(st, cfg.FromRun); err != nil {
			return nil, err
		}
	}
	plan, err := Prepare(cfg, ev)
	if err != nil {
		return nil, err
	}
	defer plan.Close()
	err = st.Record(version.Version, backend.Name(cfg.Backend), func(start tracker.Starter) error {
		run, err := start(RunKind, plan.Config)
		if err != nil {
			return err
		}
		res, err = plan.Build(ctx, run)
		return err
	})
	return res, err
}

// Prepare checks cfg, applies the evaluation ev (nil: none), fills the
// manifest (retriever and filter settings from their directories, the
// chunking used) and loads the corpora.
func Prepare(cfg BuildConfig, ev *Evaluated) (*Plan, error) {
	if cfg.Out == "" || len(cfg.Corpora) == 0 {
		return nil, fmt.Errorf("--corpus and --out are required")
	}
	p := &Plan{Config: cfg, Manifest: DefaultManifest(), Evaluated: ev}
	c, man := &p.Config, &p.Manifest
	if ev != nil {
		if err := ev.applyTo(c, man); err != nil {
			return nil, err
		}
	} else {
		var err error
		if man.BM25, err = c.BM25.Config(); err != nil {
			return nil, err
		}
	}
	if err := p.settings(); err != nil {
		return nil, err
	}
	if err := p.models(); err != nil {
		return nil, err
	}
	if err := p.loadCorpora(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// settings sets the manifest's mode, k and faiss settings.
func (p *Plan) settings() error {
	c, man := &p.Config, &p.Manifest
	if c.Mode != "" {
		man.Retrieval.Mode = search.Mode(c.Mode)
	} else if c.Retriever == "" {
		man.Retrieval.Mode = search.BM25
	}
	if c.K > 0 {
		man.Retrieval.K = c.K
	}
	man.FAISSFactory = c.Factory
	man.FAISSSearch = dense.SearchParams{Nprobe: c.Nprobe, EfSearch: c.EfSearch}
	if c.Retriever == "" && (c.Factory != "Flat" || man.FAISSSearch != (dense.SearchParams{})) {
		return fmt.Errorf("--faiss, --nprobe and --ef-search configure the dense indexes, which need --retriever")
	}
	if err := man.FAISSSearch.Validate(); err != nil {
		return fmt.Errorf("--nprobe/--ef-search: %w", err)
	}
	return nil
}

// models resolves the model directories and takes the retriever's encoder
// settings and the filter's windows into the manifest.
func (p *Plan) models() error {
	c, man := &p.Config, &p.Manifest
	if c.ResolveModel != nil {
		for _, m := range []struct {
			flag string
			dir  *string
		}{{"filter", &c.Filter}, {"retriever", &c.Retriever}, {"generator", &c.Generator}} {
			var err error
			if *m.dir, err = c.ResolveModel(m.flag, *m.dir); err != nil {
				return err
			}
		}
	}
	if err := CheckParts(Parts{Retriever: c.Retriever, Filter: c.Filter, Generator: c.Generator, Reranker: c.Reranker}); err != nil {
		return fmt.Errorf("--%w", err) // names the flag: "--filter DIR: ..."
	}
	if c.Retriever != "" {
		// The retriever's own settings (sentence-transformers files), not 512 defaults.
		es, src, err := encode.DirSettings(c.Retriever)
		if err != nil {
			return err
		}
		r := &man.Retrieval
		r.Pooling, r.Normalize, r.MaxLength, r.QueryInstruction, r.DocInstruction = string(es.Pooling), es.Normalize, es.MaxLength, es.QueryPrefix, es.PassagePrefix
		r.Sources = src
		if p.Evaluated != nil {
			p.Evaluated.applyEncoder(r)
		}
	}
	if c.Filter != "" {
		// The windows the filter was evaluated at (its export's config.json).
		w, from, err := c.filterWindows(c.Filter)
		if err != nil {
			return err
		}
		man.Filter.MaxSeqLength, man.Filter.DocStride, man.Filter.WindowsFrom = w.MaxSeqLength, w.DocStride, from
	}
	// Record the chunking actually used (the effective settings).
	if c.Chunk.ChunkSize > 0 {
		man.Chunk = ChunkInfo{Size: c.Chunk.ChunkSize, Overlap: c.Chunk.Overlap, Separators: chunk.DefaultSeparators(), Unit: "runes"}
	} else {
		man.Chunk = ChunkInfo{Unit: "document"}
	}
	return nil
}

// loadCorpora loads and chunks every corpus; a pre-encoded one brings its
// dense index.
func (p *Plan) loadCorpora() error {
	c := &p.Config
	preDone := false
	for _, spec := range c.Corpora {
		name, path, named := strings.Cut(spec, "=")
		if !named || data.IsEncodedSpec(spec) {
			path, name, named = spec, data.CorpusName(spec), false
		}
		cf := c.Chunk
		cf.Path = path
		ld, err := cf.Load(c.Log)
		if err != nil {
			return err
		}
		if ld.Encoded != nil && !named {
			name = ld.Encoded.Name
		}
		part := CorpusPart{Name: name, Chunks: ld.Chunks}
		if ld.Encoded != nil {
			if part, err = preEncodedPart(&p.Manifest, &preDone, c.Retriever, name, ld.Chunks, ld.Encoded); err != nil {
				return err
			}
		}
		p.parts.Corpora = append(p.parts.Corpora, part)
	}
	return nil
}

// Close releases the pre-encoded corpora's dense indexes.
func (p *Plan) Close() {
	for _, c := range p.parts.Corpora {
		if c.Dense != nil {
			c.Dense.Close()
		}
	}
}

// Build writes the pipeline directory (Build) and, when run is set,
// records pipeline.json as its artifact.
func (p *Plan) Build(_ context.Context, run *tracker.Run) (*BuildResult, error) {
	c := &p.Config
	parts := p.parts
	parts.Manifest, parts.Retriever, parts.Filter, parts.Generator, parts.Reranker = p.Manifest, c.Retriever, c.Filter, c.Generator, c.Reranker
	stages := progress.NewStages(c.Log, "pipeline")
	parts.Progress = stages.Func()
	err := Build(c.Out, BuildOptions{Parts: parts, Backend: c.Backend})
	stages.Finish()
	if err != nil {
		return nil, err
	}
	res := &BuildResult{Dir: c.Out, Manifest: p.Manifest, Evaluated: p.Evaluated}
	if run != nil {
		res.RunID = run.ID
		if err := run.Artifact(ArtifactKind, filepath.Join(c.Out, "pipeline.json")); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// filterWindows is c.FilterWindows, or the windows of dir's config.json
// ("model"), else filter.DefaultWindows ("default").
func (c *BuildConfig) filterWindows(dir string) (filter.Windowing, string, error) {
	if c.FilterWindows != nil {
		return c.FilterWindows(dir)
	}
	s, err := filter.DirSettings(dir)
	if err != nil {
		return filter.Windowing{}, "", err
	}
	if s.Windows != nil {
		return *s.Windows, "model", nil
	}
	return filter.DefaultWindows(), "default", nil
}
