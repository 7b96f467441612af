package mcqa

import (
	"context"
	"fmt"
	"math"
)

// Scorer returns the natural-log probabilities of target's tokens given
// prompt: the method of the scorers `label perplexity --scorer` builds, a
// local T5 (encoder input, labels with </s>) or an OpenAI-compatible server
// (echo + logprobs, or ragforge serve's encoder_input).
type Scorer interface {
	TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error)
}

// LogLik is the option log-likelihood reading of one question (the
// multiple-choice scoring of lm-evaluation-harness): Sums[i] is
// Σ log p(option i's continuation tokens | prompt), Bytes[i] the
// option text's length in bytes (without the delimiter); Choice maximises Sums (acc), ChoiceNorm
// maximises Sums[i]/Bytes[i] (acc_norm; the harness divides by the
// continuation's length, which is its byte length for ASCII text). Ties go
// to the first option, as numpy's argmax.
type LogLik struct {
	Sums        []float64 `json:"sums"`
	Bytes       []int     `json:"bytes"`
	Choice      string    `json:"choice"`
	ChoiceNorm  string    `json:"choice_norm"`
	Correct     bool      `json:"correct"`
	CorrectNorm bool      `json:"correct_norm"`
}

// Continuation is the scored text of an option: its text after a space
// (the harness's target_delimiter).
func Continuation(o Option) string { return " " + o.Text }

// ScoreOptions scores every option of q after LogLikTemplate filled with
// snips (the prompt's system part is empty). Errors: the scorer's, or a
// non-finite sum, naming the option.
func ScoreOptions(ctx context.Context, sc Scorer, q Question, snips []Snippet) (*LogLik, error) {
	prompt := LogLikTemplate.Fill(q, snips).User
	ll := &LogLik{}
	for _, o := range q.Options {
		cont := Continuation(o)
		lps, err := sc.TargetLogProbs(ctx, prompt, cont)
		if err != nil {
			return nil, fmt.Errorf("option %s: %w", o.Letter, err)
		}
		var sum float64
		for _, v := range lps {
			sum += v
		}
		if math.IsNaN(sum) || math.IsInf(sum, 0) {
			return nil, fmt.Errorf("option %s: log-likelihood %v", o.Letter, sum)
		}
		ll.Sums = append(ll.Sums, sum)
		ll.Bytes = append(ll.Bytes, len(o.Text)) // the choice without its delimiter, as the harness
	}
	best, bestNorm := 0, 0
	for i := range ll.Sums {
		if ll.Sums[i] > ll.Sums[best] {
			best = i
		}
		if ll.Sums[i]/float64(ll.Bytes[i]) > ll.Sums[bestNorm]/float64(ll.Bytes[bestNorm]) {
			bestNorm = i
		}
	}
	ll.Choice, ll.ChoiceNorm = q.Options[best].Letter, q.Options[bestNorm].Letter
	ll.Correct, ll.CorrectNorm = ll.Choice == q.Answer, ll.ChoiceNorm == q.Answer
	return ll, nil
}
