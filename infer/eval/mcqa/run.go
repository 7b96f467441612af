package mcqa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ragforge/ragforge/models/openai"
)

// Conditions: the settings run side by side on the same questions with the
// same answerer.
const (
	// CondCoT: no retrieval, MedRAG's chain-of-thought template (MIRAGE "cot").
	CondCoT = "cot"
	// CondRAG: question-only retrieval of the top k (the options are never
	// given to the retriever), MedRAG's RAG template (MIRAGE "rag_k").
	CondRAG = "rag"
	// CondRAG2: RAG² (§3): the answerer's chain-of-thought rationale is the
	// query; retrieval balanced across corpora, rerank and the filter
	// keeping [HELPFUL] snippets, all as ragforge serve's /v1/pipeline runs
	// them; the kept snippets go into MedRAG's RAG template.
	CondRAG2 = "rag2"
	// CondRAG2NoFilter is CondRAG2 without the filter (RAG²'s ablation).
	CondRAG2NoFilter = "rag2-nofilter"
)

// AllConditions lists the conditions in report order.
var AllConditions = []string{CondCoT, CondRAG, CondRAG2, CondRAG2NoFilter}

// Answerer answers one prompt with the model's raw output.
type Answerer interface {
	Answer(ctx context.Context, p Prompt) (string, error)
}

// Retriever runs the retrieval of the rag and rag2 conditions.
type Retriever interface {
	// Search returns the top k snippets for query (rag: the question alone).
	Search(ctx context.Context, query string, k int) ([]Snippet, error)
	// Pipeline runs RAG²'s retrieval for question with rationale as the
	// query: balanced retrieval of k, rerank, and the filter when filter is
	// true.
	Pipeline(ctx context.Context, question, rationale string, k int, filter bool) (Retrieval, error)
}

// Retrieval is what Retriever.Pipeline found and kept.
type Retrieval struct {
	Retrieved []Snippet `json:"retrieved"`
	Kept      []Snippet `json:"kept"`
	// Filtered is false when no filter ran (none loaded, or turned off).
	Filtered bool `json:"filtered"`
}

// Recorder stores items and metrics; *tracker.Run implements it.
type Recorder interface {
	PutItem(kind, key string, v any) error
	GetItem(kind, key string, v any) (bool, error)
	LogMetrics(values map[string]float64, step int) error
}

// ItemKind is the run store kind of per-(condition, question) items, keyed
// ItemKey.
const ItemKind = "mcqa"

// ItemKey is "<condition>/<dataset>/<id>".
func ItemKey(cond string, q Question) string { return cond + "/" + q.Key() }

// Item is the stored result of one question under one condition.
type Item struct {
	Condition string  `json:"condition"`
	Dataset   string  `json:"dataset"`
	ID        string  `json:"id"`
	Prompt    *Prompt `json:"prompt,omitempty"` // nil for re-scored outputs
	Raw       string  `json:"raw"`
	// Query is the retrieval query (rag: the question; rag2: the rationale).
	Query string `json:"query,omitempty"`
	// Retrieved and Kept hold the snippets' ids and filter scores (their
	// texts are in Prompt); Kept is set when the filter ran.
	Retrieved []Snippet `json:"retrieved,omitempty"`
	Kept      []Snippet `json:"kept,omitempty"`
	Filtered  bool      `json:"filtered,omitempty"`

	Answer         string  `json:"answer"` // the gold letter
	Parsed         Parsed  `json:"parsed"` // the strict parser's reading
	Correct        bool    `json:"correct"`
	MIRAGEChoice   string  `json:"mirage_choice"`
	MIRAGEFallback bool    `json:"mirage_fallback,omitempty"` // MIRAGE found no letter and took A
	CorrectMIRAGE  bool    `json:"correct_mirage"`
	LogLik         *LogLik `json:"loglik,omitempty"`
}

// Score fills the parse and correctness fields of it from it.Raw.
func (it *Item) Score(q Question) {
	it.Answer = q.Answer
	it.Parsed = ParseAnswer(it.Raw, q)
	it.Correct = it.Parsed.Choice == q.Answer
	it.MIRAGEChoice, it.MIRAGEFallback = MIRAGEAnswer(it.Raw)
	it.CorrectMIRAGE = it.MIRAGEChoice == q.Answer
}

// Config configures Run.
type Config struct {
	Conditions  []string `json:"conditions"`
	K           int      `json:"k"`            // snippets retrieved; MedRAG's default 32
	Parse       string   `json:"parse"`        // ParseStrict or ParseMIRAGE: which accuracy leads the report
	Concurrency int      `json:"concurrency"`  // questions answered at once; default 4
	MaxFailures int      `json:"max_failures"` // failed questions that stop the run; default DefaultMaxFailures
}

// DefaultK is MedRAG's default number of retrieved snippets (medrag.py k=32).
const DefaultK = 32

// Validate checks cfg and fills its defaults.
func (c *Config) Validate(withRetriever bool) error {
	if len(c.Conditions) == 0 {
		return errors.New("conditions: none")
	}
	seen := map[string]bool{}
	for _, cond := range c.Conditions {
		if !slices.Contains(AllConditions, cond) {
			return fmt.Errorf("conditions: unknown %q (want %s)", cond, strings.Join(AllConditions, ", "))
		}
		if seen[cond] {
			return fmt.Errorf("conditions: %q repeated", cond)
		}
		seen[cond] = true
		if cond != CondCoT && !withRetriever {
			return fmt.Errorf("conditions: %q needs retrieval (a pipeline)", cond)
		}
	}
	if c.K == 0 {
		c.K = DefaultK
	}
	if c.K < 1 {
		return fmt.Errorf("k: %d, want ≥ 1", c.K)
	}
	if c.Parse == "" {
		c.Parse = ParseStrict
	}
	if err := ValidParse(c.Parse); err != nil {
		return err
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("concurrency: %d, want ≥ 1", c.Concurrency)
	}
	if c.MaxFailures == 0 {
		c.MaxFailures = DefaultMaxFailures
	}
	if c.MaxFailures < 1 {
		return fmt.Errorf("max failures: %d, want ≥ 1", c.MaxFailures)
	}
	return nil
}

// Deps are the models a run calls; Retriever may be nil for cot alone and
// Scorer is optional (option log-likelihood).
type Deps struct {
	Answerer  Answerer
	Retriever Retriever
	Scorer    Scorer
}

// Run answers every question of datasets under each condition and returns
// the report. A question's item already in rec (a resumed run) is read, not
// asked again; every new item is stored as soon as it is scored, so a killed
// run resumes with no question answered twice and none lost. rag2 and
// rag2-nofilter take the cot item's rationale (asked once, stored as a cot
// item even when cot is not reported). Requests run cfg.Concurrency
// questions at a time (the answerer's client does timeouts and retries);
// a question whose requests still fail is not stored, and Run returns the
// report of the stored items with an error counting the failures, so that
// resuming asks them again; after cfg.MaxFailures failures no new question
// is started. progress, when set, gets (done, total)
// questions.
func Run(ctx context.Context, cfg Config, datasets []Dataset, deps Deps, rec Recorder, progress func(done, total int)) (*Report, error) {
	if err := cfg.Validate(deps.Retriever != nil); err != nil {
		return nil, err
	}
	var qs []Question
	for _, d := range datasets {
		qs = append(qs, d.Questions...)
	}
	if len(qs) == 0 {
		return nil, ErrNoQuestions
	}
	r := &runner{cfg: cfg, deps: deps, rec: rec, items: map[string]map[string]Item{}}
	for _, c := range cfg.Conditions {
		r.items[c] = map[string]Item{}
	}
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	done, stopped := 0, false
	for _, q := range qs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		mu.Lock()
		stopped = stopped || len(failed) >= cfg.MaxFailures
		stop := stopped
		mu.Unlock()
		if ctx.Err() != nil || stop {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := r.question(ctx, q)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", q.Key(), err))
			}
			done++
			if progress != nil {
				progress(done, len(qs))
			}
		}()
	}
	wg.Wait()
	rep := BuildReport(cfg, datasets, r.items)
	if err := rec.LogMetrics(rep.Metrics(), 0); err != nil {
		return rep, fmt.Errorf("mcqa: log metrics: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if len(failed) > 0 {
		slices.Sort(failed)
		what := fmt.Sprintf("%d of %d questions failed", len(failed), len(qs))
		if stopped {
			what = fmt.Sprintf("stopped after %d failed questions (%d of %d answered)", len(failed), done-len(failed), len(qs))
		}
		return rep, fmt.Errorf("mcqa: %s and were not stored (resume the run to ask them again); first: %s", what, failed[0])
	}
	return rep, nil
}

// DefaultMaxFailures is Config.MaxFailures' default: that many questions
// failing after their retries mean a dead server or a setup error rather
// than bad luck, and every further question would cost its retries too.
const DefaultMaxFailures = 10

// runner holds one run's state; items is guarded by mu.
type runner struct {
	cfg   Config
	deps  Deps
	rec   Recorder
	mu    sync.Mutex
	items map[string]map[string]Item // condition → question key → item
}

// question answers q under every condition, cot first (rag2's rationale).
func (r *runner) question(ctx context.Context, q Question) error {
	var cot *Item
	for _, cond := range r.cfg.Conditions {
		if cond == CondRAG2 || cond == CondRAG2NoFilter || cond == CondCoT {
			if cot == nil {
				it, err := r.item(ctx, CondCoT, q, nil)
				if err != nil {
					return fmt.Errorf("%s: %w", CondCoT, err)
				}
				cot = &it
			}
			if cond == CondCoT {
				r.keep(cond, q, *cot)
				continue
			}
		}
		it, err := r.item(ctx, cond, q, cot)
		if err != nil {
			return fmt.Errorf("%s: %w", cond, err)
		}
		r.keep(cond, q, it)
	}
	return nil
}

func (r *runner) keep(cond string, q Question, it Item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.items[cond]; ok {
		m[q.Key()] = it
	}
}

// item returns the stored item of (cond, q), or asks the models and stores it.
func (r *runner) item(ctx context.Context, cond string, q Question, cot *Item) (Item, error) {
	var it Item
	key := ItemKey(cond, q)
	if found, err := r.rec.GetItem(ItemKind, key, &it); err != nil {
		return it, fmt.Errorf("read stored item %s: %w", key, err)
	} else if found {
		return it, nil
	}
	it = Item{Condition: cond, Dataset: q.Dataset, ID: q.ID}
	var snips []Snippet
	tmpl := RAGTemplate
	switch cond {
	case CondCoT:
		tmpl = CoTTemplate
	case CondRAG:
		it.Query = q.Question
		s, err := r.deps.Retriever.Search(ctx, q.Question, r.cfg.K)
		if err != nil {
			return it, fmt.Errorf("retrieve: %w", err)
		}
		snips, it.Retrieved = s, idsOnly(s)
	case CondRAG2, CondRAG2NoFilter:
		if it.Query = Rationale(cot.Raw); it.Query == "" {
			it.Query = q.Question // never let the server write its own rationale
		}
		res, err := r.deps.Retriever.Pipeline(ctx, q.Question+"\n"+OptionsText(q), it.Query, r.cfg.K, cond == CondRAG2)
		if err != nil {
			return it, fmt.Errorf("pipeline: %w", err)
		}
		snips, it.Retrieved, it.Filtered = res.Kept, idsOnly(res.Retrieved), res.Filtered
		if res.Filtered {
			it.Kept = idsOnly(res.Kept)
		}
	}
	p := tmpl.Fill(q, snips)
	it.Prompt = &p
	raw, err := r.deps.Answerer.Answer(ctx, p)
	overContext := openai.IsContextLength(err)
	if err != nil && !overContext {
		return it, fmt.Errorf("answer: %w", err)
	}
	it.Raw = raw
	it.Score(q)
	if overContext {
		// A prompt over the answerer's context is that answerer's answer,
		// not a failed request: asking again cannot change it, so it is
		// stored, scored wrong by the strict parser and counted by cause
		// (MIRAGE's scorer reads the empty output as it reads any output
		// without a letter).
		it.Parsed.Failure = FailOverContext
	}
	if r.deps.Scorer != nil {
		ll, err := ScoreOptions(ctx, r.deps.Scorer, q, snips)
		if err != nil {
			return it, fmt.Errorf("option log-likelihood: %w", err)
		}
		it.LogLik = ll
	}
	// A complete item is stored even when the run is being cancelled: its
	// answer was paid for, and resuming must not ask it again.
	if err := r.rec.PutItem(ItemKind, key, it); err != nil {
		return it, fmt.Errorf("store item %s: %w", key, err)
	}
	return it, nil
}

// idsOnly keeps the snippets' ids, corpora and scores (texts are in the
// prompt).
func idsOnly(s []Snippet) []Snippet {
	out := make([]Snippet, len(s))
	for i, x := range s {
		out[i] = Snippet{ID: x.ID, Corpus: x.Corpus, PHelpful: x.PHelpful}
	}
	return out
}

// Rationale is the retrieval query RAG² takes from a chain-of-thought
// output: its JSON "step_by_step_thinking" when there is one, else the
// whole output; the question is used when both are blank (as
// /v1/pipeline does with an empty rationale).
func Rationale(raw string) string {
	s := strings.TrimSpace(raw)
	if i, j := strings.Index(s, "{"), strings.LastIndex(s, "}"); i >= 0 && j > i {
		var obj struct {
			Thinking string `json:"step_by_step_thinking"`
		}
		if json.Unmarshal([]byte(s[i:j+1]), &obj) == nil && strings.TrimSpace(obj.Thinking) != "" {
			return strings.TrimSpace(obj.Thinking)
		}
	}
	return s
}
