package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/runs"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/retrieval/bm25"
)

func init() { register(newLabelCmd) }

func newLabelCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "label", Short: "Make, review, export and compare RAG² [HELPFUL]/[NOT_HELPFUL] labels"}
	cmd.AddCommand(newLabelEvidenceCmd(g), newLabelPerplexityCmd(g), newLabelReviewCmd(g),
		newLabelExportCmd(g), newLabelCountsCmd(g), newLabelDiffCmd(g), newLabelImportCmd(g), newLabelICTCmd(g))
	return cmd
}

// openLabels opens the run store and the label tables inside it.
func openLabels(g *globals) (*runs.Store, *label.Store, error) {
	st, err := openStore(g)
	if err != nil {
		return nil, nil, err
	}
	ls, err := label.NewStore(st.DB())
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, ls, nil
}

// candidateFlags build BM25 candidates for questions of a QA CSV.
type candidateFlags struct {
	Corpus corpusFlags `json:"corpus"`
	QA     string      `json:"qa"`
	TopN   int         `json:"top_n"`
	Limit  int         `json:"limit"` // 0: all
	Out    string      `json:"out,omitempty"`
}

func (c *candidateFlags) add(cmd *cobra.Command) {
	c.Corpus.add(cmd)
	f := cmd.Flags()
	f.StringVar(&c.QA, "qa", "", "questions with reference answers and contexts: AP QA CSV or BEIR dir (required)")
	f.IntVar(&c.TopN, "top-n", 10, "BM25 candidates per question")
	f.IntVar(&c.Limit, "limit", 0, "label only the first N questions (0 = all)")
	minInt(f, 1, "top-n")
	minInt(f, 0, "limit")
	f.StringVar(&c.Out, "out", "", "also write the labels in the RAG² filter schema (.json or .jsonl)")
}

func (c *candidateFlags) load(g *globals) ([]data.Query, data.Qrels, *bm25.Index, error) {
	if c.QA == "" {
		return nil, nil, nil, fmt.Errorf("--qa is required")
	}
	queries, qrels, err := data.OpenQueries(c.QA, "test")
	if err != nil {
		return nil, nil, nil, err
	}
	if c.Limit > 0 && c.Limit < len(queries) {
		queries = queries[:c.Limit]
	}
	_, chunks, err := c.Corpus.load(g)
	if err != nil {
		return nil, nil, nil, err
	}
	idx, err := bm25.NewMemory(chunks, bm25.DefaultConfig())
	if err != nil {
		return nil, nil, nil, err
	}
	return queries, qrels, idx, nil
}

type labelResult struct {
	RunID string `json:"run_id"`
	// Labels is what the run stores; Merged the labels made for a (question,
	// snippet) pair already labeled in this run (duplicate questions), which
	// replace the earlier one instead of adding a row.
	Labels int            `json:"labels"`
	Merged int            `json:"duplicates_merged"`
	Counts map[string]int `json:"counts"`
	Out    string         `json:"out,omitempty"`
}

func (r labelResult) print(g *globals) error {
	if g.JSON {
		return printJSON(g.Out, r)
	}
	fmt.Fprintf(g.Out, "run %s: %d labels stored (%s %d, %s %d)", r.RunID, r.Labels, label.Helpful, r.Counts[label.Helpful], label.NotHelpful, r.Counts[label.NotHelpful])
	if r.Merged > 0 {
		fmt.Fprintf(g.Out, "; %d duplicate (question, snippet) pairs merged", r.Merged)
	}
	fmt.Fprintln(g.Out)
	if r.Out != "" {
		fmt.Fprintf(g.Out, "wrote %s\n", r.Out)
	}
	return nil
}

// datasetName is flag, or else the corpus's name: its base name without
// extension ("ap_protocols" for ../shared/data/ap_protocols, "corpus" for
// corpus.jsonl), the name a Hugging Face dataset directory carries.
func datasetName(flag, corpus string) string {
	if flag != "" {
		return flag
	}
	base := filepath.Base(strings.TrimRight(corpus, "/"))
	return strings.TrimSuffix(base, filepath.Ext(base))
}

func finishLabels(g *globals, run *runs.Run, ls *label.Store, out string, n int) (labelResult, error) {
	counts, err := ls.Counts(run.ID)
	if err != nil {
		return labelResult{}, err
	}
	for k, v := range counts {
		if err := run.Metric("labels_"+strings.Trim(strings.ToLower(k), "[]"), 0, float64(v)); err != nil {
			return labelResult{}, err
		}
	}
	if out != "" {
		format, err := label.FormatOf("", out)
		if err != nil {
			return labelResult{}, err
		}
		if _, err := ls.Export(run.ID, out, format); err != nil {
			return labelResult{}, err
		}
		if err := run.Artifact("labels", out); err != nil {
			return labelResult{}, err
		}
	}
	stored := counts[label.Helpful] + counts[label.NotHelpful]
	return labelResult{RunID: run.ID, Labels: stored, Merged: max(n-stored, 0), Counts: counts, Out: out}, nil
}

func newLabelEvidenceCmd(g *globals) *cobra.Command {
	var (
		c          candidateFlags
		negatives  int
		balanced   bool
		seed       uint64
		datasetNam string
	)
	cmd := &cobra.Command{
		Use:   "evidence",
		Short: "Label BM25 top-N candidates [HELPFUL] when they contain the question's reference context",
		Long: `For each question, retrieves the BM25 top-N chunks and labels a chunk
[HELPFUL] when it contains the reference context by the AP paper's rule (the
normalized context is a substring of the chunk or shares >= 5 consecutive
tokens), or, for BEIR data, when qrels judge its document relevant.`,
		Example: `  ragforge label evidence --corpus ../shared/data/ap_protocols --qa ../shared/data/ap_protocols_qa/dev.csv --top-n 10 --out labels.jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			queries, qrels, idx, err := c.load(g)
			if err != nil {
				return err
			}
			defer idx.Close()
			st, run, err := startRun(g, "label-evidence", map[string]any{"flags": c, "negatives": negatives, "balanced": balanced, "seed": seed})
			if err != nil {
				return err
			}
			defer st.Close()
			defer finishRun(run, &err)
			ls, err := label.NewStore(st.DB())
			if err != nil {
				return err
			}
			bar := progress.New(g.Err, len(queries), "evidence labels")
			l := &label.EvidenceLabeler{Retriever: idx, Lookup: idx.Doc, TopN: c.TopN, NegativesPerQuestion: negatives, Balanced: balanced,
				Seed: seed, DatasetName: datasetName(datasetNam, c.Corpus.Path), Store: ls, RunID: run.ID, Progress: label.Progress(bar.Func())}
			if qrels != nil {
				l.Qrels = qrels
			}
			labels, err := l.Label(cmdContext(cmd), queries)
			bar.Finish()
			if err != nil {
				return err
			}
			res, err := finishLabels(g, run, ls, c.Out, len(labels))
			if err != nil {
				return err
			}
			return res.print(g)
		},
	}
	c.add(cmd)
	f := cmd.Flags()
	f.IntVar(&negatives, "negatives", 0, "keep at most N [NOT_HELPFUL] candidates per question (0 = all)")
	f.BoolVar(&balanced, "balanced", false, "keep as many negatives as positives per question")
	minInt(f, 0, "negatives")
	f.Uint64Var(&seed, "seed", 42, "negative sampling seed")
	f.StringVar(&datasetNam, "dataset-name", "", "dataset_name written to each example (default: the corpus name, e.g. ap_protocols for .../ap_protocols)")
	return cmd
}

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// newScorer builds a perplexity scorer from "t5:DIR" or "openai:URL[#model]".
func newScorer(g *globals, spec string, timeout time.Duration, retries, concurrency int) (label.Scorer, error) {
	kind, target, model, err := splitSpec(spec, "scorer")
	if err != nil {
		return nil, err
	}
	switch kind {
	case "t5":
		m, tok, err := loadT5(g, target)
		if err != nil {
			return nil, err
		}
		return label.NewLocalT5Scorer(target, m, tok), nil
	case "openai":
		sc := label.NewHTTPScorer(openai.New(target, openai.Options{Model: model, Timeout: timeout, MaxRetries: retries, Concurrency: concurrency}))
		// An encoder-decoder server (ragforge serve) scores (prompt, target)
		// as encoder input and labels, like t5:DIR; others use echo.
		if err := sc.Detect(context.Background()); err != nil {
			return nil, err
		}
		return sc, nil
	}
	return nil, fmt.Errorf("--scorer %q: want t5:DIR or openai:URL[#model]", spec)
}

func newLabelPerplexityCmd(g *globals) *cobra.Command {
	var (
		c           candidateFlags
		scorer      string
		margin      float64
		relative    bool
		timeout     time.Duration
		retries     int
		concurrency int
		resume      string
		datasetNam  string
	)
	cmd := &cobra.Command{
		Use:   "perplexity",
		Short: "Label BM25 candidates by whether they lower the scorer's perplexity of the reference answer (RAG²)",
		Long: `For each question and each BM25 candidate, computes the scorer LM's
perplexity of the reference answer (Ground_Truth) given the question without
the snippet and with it (templates in label.DefaultPromptTemplate). The snippet
is [HELPFUL] when it lowers perplexity by at least --margin (absolute, or
relative with --relative). Scorers: t5:DIR (local, teacher-forced) or
openai:URL[#model], a server returning prompt log-probabilities with
echo=true (vLLM, ragforge serve); llama.cpp server and Ollama return only
generated-token log-probabilities and are refused with a clear error.
Scores are cached in the run database, so --resume RUN continues an
interrupted run without rescoring finished pairs.`,
		Example: `  ragforge label perplexity --corpus ../shared/data/ap_protocols --qa ../shared/data/ap_protocols_qa/dev.csv --scorer t5:work/t5-tiny --limit 10`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if scorer == "" {
				return fmt.Errorf("--scorer is required")
			}
			sc, err := newScorer(g, scorer, timeout, retries, concurrency)
			if err != nil {
				return err
			}
			queries, _, idx, err := c.load(g)
			if err != nil {
				return err
			}
			defer idx.Close()
			var tasks []label.Task
			for _, q := range queries {
				if strings.TrimSpace(q.Answer) == "" {
					return fmt.Errorf("%s: question %s: field %q: empty (perplexity labels need a reference answer)", c.QA, q.ID, "Ground_Truth")
				}
				hits, err := idx.Search(q.Text, c.TopN)
				if err != nil {
					return err
				}
				t := label.Task{QueryID: q.ID, Question: q.Text, Target: q.Answer}
				for _, h := range hits {
					if ch, ok := idx.Doc(h.ID); ok {
						t.Candidates = append(t.Candidates, ch)
					}
				}
				tasks = append(tasks, t)
			}
			var st *runs.Store
			var run *runs.Run
			if resume != "" {
				if st, err = openStore(g); err != nil {
					return err
				}
				if run, err = st.Resume(resume); err != nil { // running again, owned by this process
					st.Close()
					return err
				}
			} else if st, run, err = startRun(g, "label-perplexity", map[string]any{"flags": c, "scorer": sc.Name(), "margin": margin, "relative": relative}); err != nil {
				return err
			}
			defer st.Close()
			defer finishRun(run, &err)
			ls, err := label.NewStore(st.DB())
			if err != nil {
				return err
			}
			bar := progress.New(g.Err, -1, "perplexity labels")
			l := &label.PerplexityLabeler{Scorer: sc, Margin: margin, Relative: relative, DatasetName: datasetName(datasetNam, c.Corpus.Path),
				Concurrency: concurrency, Store: ls, RunID: run.ID, Progress: label.Progress(bar.Func())}
			labels, err := l.Label(cmdContext(cmd), tasks)
			bar.Finish()
			if err != nil {
				return err
			}
			res, err := finishLabels(g, run, ls, c.Out, len(labels))
			if err != nil {
				return err
			}
			return res.print(g)
		},
	}
	c.add(cmd)
	f := cmd.Flags()
	f.StringVar(&scorer, "scorer", "", "scorer LM: t5:DIR or openai:URL[#model] (required)")
	f.Float64Var(&margin, "margin", 0, "minimum perplexity reduction for [HELPFUL]")
	f.BoolVar(&relative, "relative", false, "margin is relative: (ppl_without - ppl_with) / ppl_without")
	f.DurationVar(&timeout, "timeout", 120*time.Second, "per-request timeout (HTTP scorer)")
	f.IntVar(&retries, "retries", 3, "retries with exponential backoff (HTTP scorer)")
	f.IntVar(&concurrency, "concurrency", 4, "pairs scored at once")
	minInt(f, 1, "concurrency")
	f.StringVar(&resume, "resume", "", "continue the labeling run with this id (finished pairs come from the score cache)")
	f.StringVar(&datasetNam, "dataset-name", "", "dataset_name written to each example (default: the corpus name, e.g. ap_protocols for .../ap_protocols)")
	return cmd
}

func newLabelReviewCmd(g *globals) *cobra.Command {
	var (
		f        label.Filter
		reviewer string
		flip     int64
		confirm  int64
		undo     int64
	)
	cmd := &cobra.Command{
		Use:   "review",
		Short: "List labels, or flip/confirm/undo one (stored with provenance human; the machine label is kept)",
		Example: `  ragforge label review --run RUN --class "[HELPFUL]" --limit 20
  ragforge label review --flip 17 --reviewer ana
  ragforge label review --undo 17`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, ls, err := openLabels(g)
			if err != nil {
				return err
			}
			defer st.Close()
			var rec label.Record
			switch {
			case flip > 0:
				rec, err = ls.Review(flip, label.ReviewFlip, reviewer)
			case confirm > 0:
				rec, err = ls.Review(confirm, label.ReviewConfirm, reviewer)
			case undo > 0:
				rec, err = ls.Undo(undo)
			default:
				recs, err := ls.List(f)
				if err != nil {
					return err
				}
				if g.JSON {
					return printJSON(g.Out, recs)
				}
				tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tLABEL\tMACHINE\tMETHOD\tPPL w/o→with\tQUESTION\tSNIPPET")
				for _, r := range recs {
					ppl := "-"
					if r.Method == label.MethodPerplexity {
						ppl = fmt.Sprintf("%.2f→%.2f", r.PPLWithout, r.PPLWith)
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Effective, r.Label.Label, r.Method, ppl, clip(r.Question, 50), clip(r.Snippet, 60))
				}
				return tw.Flush()
			}
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.Out, rec)
			}
			fmt.Fprintf(g.Out, "label %d: %s (machine %s, provenance %s)\n", rec.ID, rec.Effective, rec.Label.Label, rec.Provenance)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.RunID, "run", "", "only labels of this run")
	fl.StringVar(&f.Class, "class", "", "only this effective label ([HELPFUL] or [NOT_HELPFUL])")
	fl.StringVar(&f.Method, "method", "", "only this method (perplexity, evidence, import)")
	fl.BoolVar(&f.Disagreement, "disagreement", false, "only pairs where perplexity and evidence labels differ")
	fl.Float64Var(&f.LowConfidence, "low-confidence", 0, "only perplexity labels with |ppl_with - ppl_without| below this")
	fl.IntVar(&f.Limit, "limit", 50, "at most this many labels")
	minInt(fl, 0, "limit")
	fl.StringVar(&reviewer, "reviewer", "", "reviewer name stored with the change")
	fl.Int64Var(&flip, "flip", 0, "flip label ID")
	fl.Int64Var(&confirm, "confirm", 0, "confirm label ID")
	fl.Int64Var(&undo, "undo", 0, "undo the latest human review of label ID")
	return cmd
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func newLabelExportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "export RUN FILE",
		Short:   "Write a run's effective labels in the RAG² filter schema (.json list or .jsonl)",
		Example: `  ragforge label export 20261129-170000-label-evidence-ab12 train.jsonl`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, ls, err := openLabels(g)
			if err != nil {
				return err
			}
			defer st.Close()
			id, err := resolveRun(st, args[0])
			if err != nil {
				return err
			}
			format, err := label.FormatOf("", args[1])
			if err != nil {
				return err
			}
			n, err := ls.Export(id, args[1], format)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.Out, "wrote %d examples to %s\n", n, args[1])
			return nil
		},
	}
}

func resolveRun(st *runs.Store, id string) (string, error) {
	d, err := st.Get(id)
	if err != nil {
		return "", err
	}
	return d.ID, nil
}

func newLabelCountsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "counts RUN",
		Short: "Count a run's effective labels by class",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, ls, err := openLabels(g)
			if err != nil {
				return err
			}
			defer st.Close()
			id, err := resolveRun(st, args[0])
			if err != nil {
				return err
			}
			counts, err := ls.Counts(id)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.Out, counts)
			}
			for _, k := range sortedKeys(counts) {
				fmt.Fprintf(g.Out, "%-14s %d\n", k, counts[k])
			}
			return nil
		},
	}
}

func newLabelDiffCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "diff RUN_A RUN_B",
		Short: "Compare two label runs by (question, snippet): changed, only in A, only in B",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, ls, err := openLabels(g)
			if err != nil {
				return err
			}
			defer st.Close()
			a, err := resolveRun(st, args[0])
			if err != nil {
				return err
			}
			b, err := resolveRun(st, args[1])
			if err != nil {
				return err
			}
			d, err := ls.Diff(a, b)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.Out, d)
			}
			fmt.Fprintf(g.Out, "same %d, changed %d, only in A %d, only in B %d\n", d.Same, len(d.Changed), len(d.OnlyA), len(d.OnlyB))
			return nil
		},
	}
}

func newLabelImportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "import FILE",
		Short:   "Store labels from a RAG² filter file (.json or .jsonl) as a new run (method import)",
		Example: `  ragforge label import ../shared/data/rag2_filter/medqa_llama3_cot_5pct-train.json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			st, run, err := startRun(g, "label-import", map[string]string{"file": args[0]})
			if err != nil {
				return err
			}
			defer st.Close()
			defer finishRun(run, &err)
			ls, err := label.NewStore(st.DB())
			if err != nil {
				return err
			}
			labels, err := ls.ImportContext(cmdContext(cmd), run.ID, args[0])
			if err != nil {
				return err
			}
			res, err := finishLabels(g, run, ls, "", len(labels))
			if err != nil {
				return err
			}
			return res.print(g)
		},
	}
}
