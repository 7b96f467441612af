package label

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/retrieval/bm25"
)

// Result is what a labeling run stored; `label … --json` prints it.
type Result struct {
	RunID string `json:"run_id"`
	// Labels is what the run stores; Merged the labels made for a (question,
	// snippet) pair already labeled in this run (duplicate questions), which
	// replace the earlier one instead of adding a row.
	Labels int            `json:"labels"`
	Merged int            `json:"duplicates_merged"`
	Counts map[string]int `json:"counts"`
	Out    string         `json:"out,omitempty"`
}

// Summarize counts the labels run stored in ls (made: n, duplicates
// included), records the counts as metrics labels_helpful and
// labels_not_helpful, and, when out is set, exports the labels there in
// the RAG² filter schema (format by extension) as the run's artifact.
func Summarize(run *tracker.Run, ls *labelstore.Store, out string, n int) (Result, error) {
	counts, err := ls.Counts(run.ID)
	if err != nil {
		return Result{}, err
	}
	for k, v := range counts {
		if err := run.Metric("labels_"+strings.Trim(strings.ToLower(k), "[]"), 0, float64(v)); err != nil {
			return Result{}, err
		}
	}
	if out != "" {
		format, err := filter.FormatOf("", out)
		if err != nil {
			return Result{}, err
		}
		if _, err := ls.Export(run.ID, out, format); err != nil {
			return Result{}, err
		}
		if err := run.Artifact("labels", out); err != nil {
			return Result{}, err
		}
	}
	stored := counts[filter.Helpful] + counts[filter.NotHelpful]
	return Result{RunID: run.ID, Labels: stored, Merged: max(n-stored, 0), Counts: counts, Out: out}, nil
}

// EvidenceJob is one `ragforge label evidence`: the questions, their BM25
// candidates and how they are sampled; Labeler's Retriever, Lookup, Store,
// RunID and Progress are set by RunEvidence.
type EvidenceJob struct {
	Queries []data.Query
	Qrels   data.Qrels // BEIR judgments; nil: the AP rule on each query's context
	Index   *bm25.Index
	Labeler EvidenceLabeler
	Out     string // also export the labels here (.json or .jsonl); "": not
	// Flags is the description of the inputs recorded with the run (the
	// CLI's corpus, QA, BM25 and top-N flags).
	Flags    any
	Progress Progress
}

// RunEvidence starts a run of kind "label-evidence", labels the queries'
// BM25 candidates into the run's label tables (models/labelstore beside
// the runs) and summarizes them (Summarize). A run is required: the labels
// are stored under it.
func RunEvidence(ctx context.Context, j EvidenceJob, start tracker.Starter) (Result, error) {
	if start == nil {
		return Result{}, errors.New("label evidence: a run store is required (the labels are stored in it)")
	}
	if j.Index == nil {
		return Result{}, errors.New("label evidence: no BM25 index of the candidates")
	}
	l := j.Labeler
	run, err := start("label-evidence", map[string]any{"flags": j.Flags, "negatives": l.NegativesPerQuestion, "balanced": l.Balanced, "seed": l.Seed})
	if err != nil {
		return Result{}, err
	}
	ls, err := labelstore.NewStore(run.Store().DB())
	if err != nil {
		return Result{}, err
	}
	l.Retriever, l.Lookup, l.Store, l.RunID, l.Progress = j.Index, j.Index.Doc, ls, run.ID, j.Progress
	if j.Qrels != nil {
		l.Qrels = j.Qrels
	}
	labels, err := l.Label(ctx, j.Queries)
	if err != nil {
		return Result{}, err
	}
	return Summarize(run, ls, j.Out, len(labels))
}

// ICTJob is one `ragforge label ict`: pseudo-questions drawn from the
// chunks (ICTExamples), written to Out.
type ICTJob struct {
	ICT ICTOptions // Negatives is set by RunICT
	// RandomNegatives takes a random chunk of another document as the
	// negative evidence instead of the best BM25 hit.
	RandomNegatives bool
	Out             string // .json or .jsonl
	Corpus          any    // the corpus description recorded with the run
}

// Check validates the options and Out.
func (j ICTJob) Check() error {
	if j.Out == "" {
		return errors.New("label ict: no output file")
	}
	if err := j.ICT.Validate(); err != nil {
		return fmt.Errorf("label ict: %w", err)
	}
	_, err := filter.FormatOf("", j.Out)
	return err
}

// RunICT draws the pseudo-questions of chunks (ICTExamples; BM25 negatives
// from an in-memory index of the chunks unless RandomNegatives), writes
// them to Out and records a run of kind "label-ict" with Out as its
// artifact and the label counts as metrics.
func RunICT(ctx context.Context, chunks []data.Chunk, j ICTJob, start tracker.Starter) (Result, error) {
	if err := j.Check(); err != nil {
		return Result{}, err
	}
	format, _ := filter.FormatOf("", j.Out)
	o := j.ICT
	if !j.RandomNegatives {
		idx, err := bm25.NewMemory(chunks, bm25.DefaultConfig())
		if err != nil {
			return Result{}, err
		}
		defer idx.Close()
		o.Negatives = idx
	}
	run, err := start.Start("label-ict", map[string]any{"corpus": j.Corpus, "per_chunk": o.PerChunk, "max_chunks": o.MaxChunks, "min_words": o.MinWords,
		"keep": o.Keep, "query_words": o.QueryWords, "drop_words": o.DropWords, "content_words": o.ContentWords, "negatives": o.NumNegatives,
		"random_negatives": j.RandomNegatives, "seed": o.Seed, "out": j.Out})
	if err != nil {
		return Result{}, err
	}
	ex, err := ICTExamples(ctx, chunks, o)
	if err != nil {
		return Result{}, err
	}
	if err := filter.WriteExamples(j.Out, format, ex); err != nil {
		return Result{}, err
	}
	counts := map[string]int{}
	for _, e := range ex {
		counts[e.Answer]++
	}
	res := Result{Labels: len(ex), Counts: counts, Out: j.Out}
	if run == nil {
		return res, nil
	}
	res.RunID = run.ID
	if err := run.Artifact("labels", j.Out); err != nil {
		return Result{}, err
	}
	for k, v := range counts {
		if err := run.Metric("labels_"+map[string]string{filter.Helpful: "helpful", filter.NotHelpful: "not_helpful"}[k], 0, float64(v)); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}
