package answers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ragforge/ragforge/models/openai"
)

// Metric names of the LLM-judged metrics (RAGAS naming).
const (
	Faithfulness    = "faithfulness"
	AnswerRelevance = "answer_relevance"
	ContextRecall   = "context_recall"
)

// Error kinds of a Call.
const (
	ErrRequest = "request" // the server failed, timed out after retries, or answered empty
	ErrParse   = "parse"   // the answer is not the requested JSON (malformed, refusal, missing fields)
	ErrEncode  = "encode"  // the embedding model failed (answer relevance)
)

// Causes of parse failures (request failures take openai.Cause's names:
// "timeout", "unreachable", "http_<code>", "malformed_json", ...).
const (
	CauseRefusal      = "refusal"        // the answer holds no JSON object (prose, "I cannot ...")
	CauseMalformed    = "malformed_json" // a JSON object that does not parse (cut off, broken)
	CauseMissingField = "missing_field"  // valid JSON without the requested fields
	CauseEncode       = "encode"         // the embedding model failed
)

// Sentinels of ParseJSON, for ErrorCause.
var (
	ErrNoJSON  = errors.New("no JSON object in answer")
	ErrBadJSON = errors.New("invalid JSON in answer")
)

// ErrorCause names the cause of a per-item failure for the report's
// summary: a *JudgeError's Cause, openai.Cause of a request error (the
// answerer's too), CauseRefusal/CauseMalformed for ParseJSON errors.
func ErrorCause(err error) string {
	var je *JudgeError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &je) && je.Cause != "":
		return je.Cause
	case errors.Is(err, ErrNoJSON):
		return CauseRefusal
	case errors.Is(err, ErrBadJSON):
		return CauseMalformed
	}
	return openai.Cause(err)
}

// Call records one judge request: the prompts sent, the raw answer and, on
// failure, the error and its kind. Every Call is stored with its item.
type Call struct {
	Metric    string `json:"metric"`
	System    string `json:"system"`
	Prompt    string `json:"prompt"`
	Raw       string `json:"raw"`
	Error     string `json:"error,omitempty"`
	ErrorKind string `json:"error_kind,omitempty"`
	// Cause refines ErrorKind for summaries: "timeout", "unreachable",
	// "http_<code>", "malformed_json", "refusal", "missing_field", ...
	Cause string `json:"cause,omitempty"`
}

// JudgeError is the error of a failed judged metric; Kind is ErrRequest,
// ErrParse or ErrEncode, Cause as Call.Cause.
type JudgeError struct {
	Metric, Kind, Cause string
	Err                 error
}

func (e *JudgeError) Error() string { return fmt.Sprintf("%s: %s error: %v", e.Metric, e.Kind, e.Err) }
func (e *JudgeError) Unwrap() error { return e.Err }

// QueryEmbedder embeds texts as queries, one vector [dim] per text; every
// ragforge encoder (retrieval/encode.Encoder) implements it.
type QueryEmbedder interface {
	EncodeQueries(texts []string) ([][]float32, error)
}

// JudgeSystem is the system message of every judge request.
const JudgeSystem = "You are a strict evaluator of question-answering systems. Reply with one JSON object only, no prose, no code fences."

// Judge prompts. Each asks for strict JSON; %s are filled in order.
const (
	// FaithfulnessPrompt: RAGAS faithfulness in one request (statement
	// extraction and verification together): |supported| / |statements|.
	FaithfulnessPrompt = `Break the ANSWER into short standalone factual statements. For each statement decide whether it can be directly inferred from the CONTEXT.
Return JSON: {"statements": [{"statement": "...", "supported": true or false}]}

QUESTION: %s

CONTEXT:
%s

ANSWER: %s`
	// RelevancePrompt: RAGAS answer relevance: questions the answer would
	// answer, and whether the answer is noncommittal ("I don't know").
	RelevancePrompt = `Write %d different questions that the ANSWER below answers, in the language of the answer. Also say whether the answer is noncommittal (evasive, vague or "I don't know").
Return JSON: {"questions": ["...", "..."], "noncommittal": true or false}

ANSWER: %s`
	// RecallPrompt: RAGAS context recall: |reference statements attributable
	// to the context| / |reference statements|.
	RecallPrompt = `Break the REFERENCE ANSWER into short standalone factual statements. For each statement decide whether it can be attributed to the CONTEXT.
Return JSON: {"statements": [{"statement": "...", "attributed": true or false}]}

QUESTION: %s

CONTEXT:
%s

REFERENCE ANSWER: %s`
)

// Judge computes the LLM-judged metrics through an OpenAI-compatible chat
// server (timeouts, retries and backoff are the Client's, as in the
// labeler). Zero fields take defaults.
type Judge struct {
	Client      Chat
	Embedder    QueryEmbedder // for answer relevance; nil disables that metric
	MaxTokens   int           // per request; default 1024
	Temperature float64       // default 0
	NQuestions  int           // questions regenerated for answer relevance; default 3 (RAGAS)
}

func (j *Judge) ask(ctx context.Context, metric, prompt string, out any, check func() error) Call {
	c := Call{Metric: metric, System: JudgeSystem, Prompt: prompt}
	mt := j.MaxTokens
	if mt <= 0 {
		mt = 1024
	}
	raw, err := j.Client.ChatText(ctx, JudgeSystem, prompt, mt, j.Temperature)
	c.Raw = raw
	if err != nil {
		c.Error, c.ErrorKind, c.Cause = err.Error(), ErrRequest, ErrorCause(err)
		return c
	}
	if err := ParseJSON(raw, out); err != nil {
		c.Error, c.ErrorKind, c.Cause = err.Error(), ErrParse, ErrorCause(err)
		return c
	}
	if err := check(); err != nil {
		c.Error, c.ErrorKind, c.Cause = err.Error(), ErrParse, CauseMissingField
	}
	return c
}

func callErr(c Call) error {
	if c.Error == "" {
		return nil
	}
	return &JudgeError{Metric: c.Metric, Kind: c.ErrorKind, Cause: c.Cause, Err: errors.New(c.Error)}
}

// ParseJSON decodes the first JSON object in raw into out, tolerating
// surrounding prose and ```json fences: it takes the text from the first
// "{" to the last "}". Errors, with a prefix of raw: ErrNoJSON (no "{" at
// all: a refusal or prose), ErrBadJSON (an object that is cut off or does
// not parse).
func ParseJSON(raw string, out any) error {
	i, k := strings.IndexByte(raw, '{'), strings.LastIndexByte(raw, '}')
	if i < 0 {
		return fmt.Errorf("%w %q", ErrNoJSON, clip(raw, 120))
	}
	if k < i {
		return fmt.Errorf("%w %q: object not closed (cut off?)", ErrBadJSON, clip(raw, 120))
	}
	if err := json.Unmarshal([]byte(raw[i:k+1]), out); err != nil {
		return fmt.Errorf("%w %q: %w", ErrBadJSON, clip(raw, 120), err)
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

type verdict struct {
	Statement  string `json:"statement"`
	Supported  *bool  `json:"supported"`
	Attributed *bool  `json:"attributed"`
}

// share is |verdicts with field true| / |verdicts|; errors: no statements,
// a statement without the field.
func share(vs []verdict, field string) (float64, error) {
	if len(vs) == 0 {
		return 0, errors.New(`"statements" is missing or empty`)
	}
	yes := 0
	for i, v := range vs {
		b := v.Supported
		if field == "attributed" {
			b = v.Attributed
		}
		if b == nil {
			return 0, fmt.Errorf("statement %d: field %q missing or not a boolean", i, field)
		}
		if *b {
			yes++
		}
	}
	return float64(yes) / float64(len(vs)), nil
}

func joinContexts(contexts []string) string { return FillTemplate("{context}", "", contexts) }

// Faithfulness is the share of the answer's statements supported by the
// contexts, in [0, 1]. The Call is returned also on error, which is a
// *JudgeError.
func (j *Judge) Faithfulness(ctx context.Context, question, answer string, contexts []string) (float64, Call, error) {
	var out struct {
		Statements []verdict `json:"statements"`
	}
	var score float64
	c := j.ask(ctx, Faithfulness, fmt.Sprintf(FaithfulnessPrompt, question, joinContexts(contexts), answer), &out, func() (err error) {
		score, err = share(out.Statements, "supported")
		return err
	})
	return score, c, callErr(c)
}

// ContextRecall is the share of the reference answer's statements
// attributable to the contexts, in [0, 1]; errors as Faithfulness.
func (j *Judge) ContextRecall(ctx context.Context, question, reference string, contexts []string) (float64, Call, error) {
	var out struct {
		Statements []verdict `json:"statements"`
	}
	var score float64
	c := j.ask(ctx, ContextRecall, fmt.Sprintf(RecallPrompt, question, joinContexts(contexts), reference), &out, func() (err error) {
		score, err = share(out.Statements, "attributed")
		return err
	})
	return score, c, callErr(c)
}

// AnswerRelevance is RAGAS answer relevance: the judge writes NQuestions
// questions the answer answers; the score is the mean cosine similarity
// between the Embedder's vectors of the original question and of each
// generated question, or 0 when the judge marks the answer noncommittal.
// Range [-1, 1] (in practice [0, 1]). Errors (*JudgeError): the request,
// a parse failure (no questions, missing "noncommittal"), the embedder.
func (j *Judge) AnswerRelevance(ctx context.Context, question, answer string) (float64, Call, error) {
	n := j.NQuestions
	if n <= 0 {
		n = 3
	}
	var out struct {
		Questions    []string `json:"questions"`
		Noncommittal *bool    `json:"noncommittal"`
	}
	c := j.ask(ctx, AnswerRelevance, fmt.Sprintf(RelevancePrompt, n, answer), &out, func() error {
		var qs []string
		for _, q := range out.Questions {
			if strings.TrimSpace(q) != "" {
				qs = append(qs, q)
			}
		}
		if len(qs) == 0 {
			return errors.New(`"questions" is missing or empty`)
		}
		if out.Noncommittal == nil {
			return errors.New(`field "noncommittal" missing or not a boolean`)
		}
		out.Questions = qs
		return nil
	})
	if err := callErr(c); err != nil {
		return 0, c, err
	}
	if *out.Noncommittal {
		return 0, c, nil
	}
	if j.Embedder == nil {
		c.Error, c.ErrorKind, c.Cause = "no embedder configured", ErrEncode, CauseEncode
		return 0, c, callErr(c)
	}
	vecs, err := j.Embedder.EncodeQueries(append([]string{question}, out.Questions...))
	if err == nil && len(vecs) != len(out.Questions)+1 {
		err = fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(out.Questions)+1)
	}
	if err != nil {
		c.Error, c.ErrorKind, c.Cause = err.Error(), ErrEncode, CauseEncode
		return 0, c, callErr(c)
	}
	var sum float64
	for _, v := range vecs[1:] {
		cos, err := cosine(vecs[0], v)
		if err != nil {
			c.Error, c.ErrorKind, c.Cause = err.Error(), ErrEncode, CauseEncode
			return 0, c, callErr(c)
		}
		sum += cos
	}
	return sum / float64(len(vecs)-1), c, nil
}

func cosine(a, b []float32) (float64, error) {
	if len(a) != len(b) || len(a) == 0 {
		return 0, fmt.Errorf("vector dims %d and %d", len(a), len(b))
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0, nil
	}
	r := dot / math.Sqrt(na*nb)
	if math.IsNaN(r) {
		return 0, errors.New("cosine is NaN")
	}
	return r, nil
}
