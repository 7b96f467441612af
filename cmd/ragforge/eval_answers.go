package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/infer/eval/answers"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/encode"
)

type evalAnswersOptions struct {
	Corpus    corpusFlags    `json:"corpus"`
	Retriever retrieverFlags `json:"retriever"`
	QA        string         `json:"qa"`
	Limit     int            `json:"limit"` // 0: all
	Ks        string         `json:"k"`
	Answerer  string         `json:"answerer"`
	Judge     string         `json:"judge,omitempty"`
	JudgeEnc  string         `json:"judge_encoder,omitempty"`
	Timeout   time.Duration  `json:"timeout_ns"`
	Retries   int            `json:"retries"`
}

// splitSpec parses "kind:target[#model]" (e.g. "t5:work/gen", "openai:http://127.0.0.1:8000/v1#qwen").
func splitSpec(spec, flag string) (kind, target, model string, err error) {
	kind, target, model, ok := lm.SplitSpec(spec)
	if !ok {
		return "", "", "", fmt.Errorf("--%s %q: want t5:DIR or openai:URL[#model]", flag, spec)
	}
	return kind, target, model, nil
}

func newEvalAnswersCmd(g *globals) *cobra.Command {
	var o evalAnswersOptions
	cmd := &cobra.Command{
		Use:   "answers",
		Short: "Answer each question at context depths K=1..5 and score BLEU-4, ROUGE-1/2/L and LLM-judged metrics",
		Long: `For each question, retrieves contexts once (fixed across K), answers with the
top K for every K, and scores the answer against the reference:
  BLEU-4     corpus BLEU (sacreBLEU: 13a tokenization, no smoothing) and sentence BLEU
  ROUGE      ROUGE-1/2/L F1 (rouge-score conventions, no stemming)
  judge      faithfulness, answer relevance, context recall through an
             OpenAI-compatible chat server (--judge); parse failures, refusals
             and timeouts are counted per item, never NaN.
Every item (prompts, raw judge output, errors) is stored in the run.`,
		Example: `  ragforge eval answers --corpus ../shared/data/ap_protocols --qa ../shared/data/ap_protocols_qa/dev.csv \
    --limit 20 --answerer t5:work/generator --judge http://127.0.0.1:8000/v1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return runEvalAnswers(ctx, g, o)
		},
	}
	o.Corpus.add(cmd)
	o.Retriever.add(cmd)
	f := cmd.Flags()
	f.StringVar(&o.QA, "qa", "", "AP QA CSV (Question,Ground_Truth,Context) (required)")
	f.IntVar(&o.Limit, "limit", 20, "answer only the first N questions (0 = all)")
	f.StringVar(&o.Ks, "k", "1,2,3,4,5", "context depths K")
	minInt(f, 0, "limit")
	f.StringVar(&o.Answerer, "answerer", "", "answering model: t5:DIR or hf:DIR (a local T5 or Llama/Qwen decoder) or openai:URL[#model] (required)")
	f.StringVar(&o.Judge, "judge", "", "judge: OpenAI-compatible chat server URL[#model] (optional; without it only BLEU/ROUGE)")
	f.StringVar(&o.JudgeEnc, "judge-encoder", "", "BERT encoder directory for answer relevance (optional)")
	f.DurationVar(&o.Timeout, "timeout", 120*time.Second, "per-request timeout for HTTP models")
	f.IntVar(&o.Retries, "retries", 3, "retries with exponential backoff for HTTP models")
	return cmd
}

func runEvalAnswers(ctx context.Context, g *globals, o evalAnswersOptions) (err error) {
	if o.QA == "" || o.Answerer == "" {
		return fmt.Errorf("--qa and --answerer are required")
	}
	ks, err := parseInts(o.Ks, "k")
	if err != nil {
		return err
	}
	if err := o.Retriever.validate(); err != nil {
		return err
	}
	judge, err := openJudge(ctx, g, o)
	if err != nil {
		return err
	}
	answerer, err := openAnswerer(ctx, g, o)
	if err != nil {
		return err
	}
	queries, _, err := data.OpenQueries(o.QA, "")
	if err != nil {
		return err
	}
	if o.Limit > 0 && o.Limit < len(queries) {
		queries = queries[:o.Limit]
	}
	st, run, err := startRun(g, "eval-answers", o)
	if err != nil {
		return err
	}
	defer st.Close()
	defer finishRun(run, &err)
	_, chunks, err := o.Corpus.load(g)
	if err != nil {
		return err
	}
	r, closeR, err := o.Retriever.build(g, chunks)
	if err != nil {
		return err
	}
	defer closeR()
	bar := progress.New(g.Err, len(queries)*len(ks), "answers")
	rep, err := answers.Run(ctx, answers.Config{Ks: ks}, queries, contextsOf(r, chunks, slices.Max(ks)), answerer, judge, run, bar.Func())
	bar.Finish()
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, map[string]any{"run_id": run.ID, "report": rep})
	}
	return printAnswersReport(g, run.ID, rep)
}

// openJudge connects to the --judge server (nil without one), with the
// --judge-encoder for answer relevance.
func openJudge(ctx context.Context, g *globals, o evalAnswersOptions) (*answers.Judge, error) {
	if o.Judge == "" {
		return nil, nil
	}
	url, model, _ := strings.Cut(o.Judge, "#")
	client := openai.New(url, openai.Options{Model: model, Timeout: o.Timeout, MaxRetries: o.Retries})
	// Before any work: a dead judge would otherwise cost every item its retries.
	if err := client.Preflight(ctx); err != nil {
		return nil, fmt.Errorf("--judge %s: %w", o.Judge, err)
	}
	judge := &answers.Judge{Client: client}
	if o.JudgeEnc != "" {
		enc, err := encode.LoadBERT(o.JudgeEnc, g.Backend, "cls")
		if err != nil {
			return nil, err
		}
		judge.Embedder = enc
	}
	return judge, nil
}

// openAnswerer loads or connects to the --answerer model.
func openAnswerer(ctx context.Context, g *globals, o evalAnswersOptions) (answers.Answerer, error) {
	kind, target, model, err := splitSpec(o.Answerer, "answerer")
	if err != nil {
		return nil, err
	}
	switch kind {
	case "t5", "hf":
		m, err := lm.Load(target, g.Backend)
		if err != nil {
			return nil, fmt.Errorf("--answerer %s: %w", o.Answerer, err)
		}
		return &answers.LMAnswerer{LM: m}, nil
	case "openai":
		client := openai.New(target, openai.Options{Model: model, Timeout: o.Timeout, MaxRetries: o.Retries})
		if err := client.Preflight(ctx); err != nil {
			return nil, fmt.Errorf("--answerer %s: %w", o.Answerer, err)
		}
		return &answers.ChatAnswerer{Client: client}, nil
	}
	return nil, fmt.Errorf("--answerer %q: want t5:DIR, hf:DIR or openai:URL", o.Answerer)
}

// contextsOf retrieves the texts of a question's top depth chunks with r.
func contextsOf(r retrieval.Retriever, chunks []data.Chunk, depth int) func(context.Context, data.Query) ([]string, error) {
	text := make(map[string]string, len(chunks))
	for _, c := range chunks {
		text[c.ID] = c.Text
	}
	return func(ctx context.Context, q data.Query) ([]string, error) {
		hits, err := r.Search(q.Text, depth)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(hits))
		for i, h := range hits {
			out[i] = text[h.ID]
		}
		return out, nil
	}
}

// printAnswersReport prints one row of metric means per K, then the
// errors by cause.
func printAnswersReport(g *globals, runID string, rep *answers.Report) error {
	fmt.Fprintf(g.Out, "run %s: %d questions\n\n", runID, rep.Queries)
	tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	metrics := []string{answers.MetricBLEU, answers.MetricSentenceBLEU, answers.MetricROUGE1, answers.MetricROUGE2, answers.MetricROUGEL, "faithfulness", "answer_relevance", "context_recall"}
	fmt.Fprint(tw, "K")
	for _, m := range metrics {
		fmt.Fprintf(tw, "\t%s", m)
	}
	fmt.Fprintln(tw, "\terrors")
	for _, kr := range rep.PerK {
		fmt.Fprintf(tw, "%d", kr.K)
		for _, m := range metrics {
			if m == answers.MetricBLEU {
				fmt.Fprintf(tw, "\t%.2f", kr.BLEU.Score)
				continue
			}
			if v, ok := kr.Means[m]; ok {
				fmt.Fprintf(tw, "\t%.3f", v)
			} else {
				fmt.Fprint(tw, "\t-")
			}
		}
		nerr := 0
		for _, n := range kr.Errors {
			nerr += n
		}
		fmt.Fprintf(tw, "\t%d\n", nerr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, kr := range rep.PerK {
		if len(kr.ErrorCauses) > 0 {
			fmt.Fprintf(g.Out, "errors at K=%d by cause: %s\n", kr.K, formatCounts(kr.ErrorCauses))
		}
	}
	return nil
}
