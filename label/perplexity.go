package label

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/lm"
)

// PromptTemplate builds the scorer prompts of PerplexityLabeler. "{question}"
// and "{snippet}" are replaced by the question and the snippet text.
type PromptTemplate struct {
	Without string // prompt without the snippet
	With    string // prompt with the snippet
}

// DefaultPromptTemplate follows RAG²'s labeling setup (§3.1: perplexity of the
// rationale given the question, with and without the snippet prepended):
//
//	without: "Question: {question}\nAnswer:"
//	with:    "Context: {snippet}\nQuestion: {question}\nAnswer:"
//
// The target (rationale or reference answer) is scored as the continuation.
func DefaultPromptTemplate() PromptTemplate {
	return PromptTemplate{
		Without: "Question: {question}\nAnswer:",
		With:    "Context: {snippet}\nQuestion: {question}\nAnswer:",
	}
}

func (t PromptTemplate) fill(tmpl, question, snippet string) string {
	return strings.NewReplacer("{question}", question, "{snippet}", snippet).Replace(tmpl)
}

// Task is one question to label: its rationale or reference answer (Target)
// and the candidate snippets.
type Task struct {
	QueryID    string
	Question   string
	Target     string
	Candidates []data.Chunk // ID may be empty; Text is the snippet
}

// Progress reports done of total labeling steps (pairs or questions).
type Progress func(done, total int)

// PerplexityLabeler labels snippets by RAG²'s perplexity rule: with
// pW = PPL(target | prompt without snippet) and pS = PPL(target | prompt with
// snippet), both exp(-mean natural-log token probability), the reduction is
//
//	absolute: d = pW - pS        relative: d = (pW - pS) / pW
//
// and the snippet is [HELPFUL] when pS < pW and d >= Margin (default 0: any
// strict reduction). Both perplexities are recorded with the label.
type PerplexityLabeler struct {
	Scorer      lm.Scorer
	Margin      float64
	Relative    bool
	Template    PromptTemplate // zero: DefaultPromptTemplate
	DatasetName string         // written to every example
	Concurrency int            // pairs scored at once; default 4 (an HTTP client has its own limit too)
	// Store, when set, caches scores (Store.Cached) and receives every label
	// under RunID as soon as its pair is finished, so an interrupted run
	// resumes without rescoring finished pairs.
	Store    *labelstore.Store
	RunID    string
	Progress Progress // called after each pair; may be nil
}

// Decide applies the labeler's rule to two perplexities and returns the label
// and the reduction d it compared with Margin.
func (l *PerplexityLabeler) Decide(pplWithout, pplWith float64) (string, float64) {
	d := pplWithout - pplWith
	if l.Relative {
		d /= pplWithout
	}
	if pplWith < pplWithout && d >= l.Margin {
		return filter.Helpful, d
	}
	return filter.NotHelpful, d
}

// Label scores and labels every (task, candidate) pair and returns the labels
// in task and candidate order. Example ids are "<QueryID>#<chunk id>" (or the
// candidate's position when it has no id; a task without QueryID uses its
// position, 1-based, as "q<N>").
//
// Errors stop the run: a scorer error (an HTTP server without prompt
// log-probabilities among them, wrapping openai.ErrNoPromptLogprobs), a
// cancelled ctx, or a store error. Labels finished before the error are
// already stored (with a Store), and their scores cached.
func (l *PerplexityLabeler) Label(ctx context.Context, tasks []Task) ([]labelstore.Label, error) {
	if l.Scorer == nil {
		return nil, errors.New("perplexity labeler: no scorer")
	}
	if l.Store != nil && l.RunID == "" {
		return nil, errors.New("perplexity labeler: a Store needs a RunID")
	}
	tmpl := l.Template
	if tmpl.Without == "" && tmpl.With == "" {
		tmpl = DefaultPromptTemplate()
	}
	if !strings.Contains(tmpl.With, "{snippet}") {
		return nil, fmt.Errorf("perplexity labeler: template %q has no {snippet}", tmpl.With)
	}
	scorer := labelstore.Memoize(l.Scorer)
	if l.Store != nil {
		scorer = l.Store.Cached(l.Scorer)
	}
	type job struct{ t, c int }
	var jobs []job
	for ti, t := range tasks {
		if strings.TrimSpace(t.Target) == "" {
			return nil, fmt.Errorf("perplexity labeler: task %d (query %q): field %q: empty", ti+1, t.QueryID, "target")
		}
		for ci := range t.Candidates {
			jobs = append(jobs, job{ti, ci})
		}
	}
	out := make([]labelstore.Label, len(jobs))
	conc := l.Concurrency
	if conc <= 0 {
		conc = 4
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
		next = make(chan int)
	)
	work := func(j int) error {
		t := tasks[jobs[j].t]
		c := t.Candidates[jobs[j].c]
		pw, err := l.ppl(ctx, scorer, tmpl.fill(tmpl.Without, t.Question, c.Text), t.Target)
		if err != nil {
			return fmt.Errorf("task %d (query %q) without snippet: %w", jobs[j].t+1, t.QueryID, err)
		}
		ps, err := l.ppl(ctx, scorer, tmpl.fill(tmpl.With, t.Question, c.Text), t.Target)
		if err != nil {
			return fmt.Errorf("task %d (query %q) candidate %d (chunk %q): %w", jobs[j].t+1, t.QueryID, jobs[j].c+1, c.ID, err)
		}
		lab, d := l.Decide(pw, ps)
		qid := t.QueryID
		if qid == "" {
			qid = fmt.Sprintf("q%d", jobs[j].t+1)
		}
		cid := c.ID
		if cid == "" {
			cid = fmt.Sprint(jobs[j].c + 1)
		}
		out[j] = labelstore.Label{RunID: l.RunID, Key: labelstore.Key(t.Question, c.ID, c.Text), ExampleID: qid + "#" + cid,
			QueryID: t.QueryID, Question: t.Question, Target: t.Target, Snippet: c.Text, ChunkID: c.ID,
			DatasetName: l.DatasetName, Label: lab, Method: labelstore.MethodPerplexity, Scorer: l.Scorer.Name(),
			PPLWithout: pw, PPLWith: ps, Score: d}
		if l.Store != nil {
			if err := l.Store.Put(out[j : j+1]); err != nil {
				return err
			}
		}
		mu.Lock()
		done++
		if l.Progress != nil {
			l.Progress(done, len(jobs))
		}
		mu.Unlock()
		return nil
	}
	for range min(conc, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				if err := work(j); err != nil {
					cancel(err)
				}
			}
		}()
	}
feed:
	for j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("perplexity labeler: %w", err)
	}
	return out, nil
}

func (l *PerplexityLabeler) ppl(ctx context.Context, s lm.Scorer, prompt, target string) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, context.Cause(ctx)
	}
	lp, err := s.TargetLogProbs(ctx, prompt, target)
	if err != nil {
		return 0, err
	}
	p, err := lm.Perplexity(lp)
	if err != nil {
		return 0, fmt.Errorf("scorer %s: %w", s.Name(), err)
	}
	return p, nil
}
