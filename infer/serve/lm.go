package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// LLM writes a text for a prompt: the rationale, the answer and the HyDE
// documents of the pipeline. An empty text is a valid answer, not an error.
type LLM interface {
	Complete(ctx context.Context, prompt string, maxTokens int) (string, error)
	Name() string
}

// GeneratorLLM adapts a models/generate.Generator (an OpenAI-compatible
// server: Ollama, llama.cpp server, vLLM) to LLM, decoding greedily
// (temperature 0, one text). generate.ErrEmpty becomes "".
type GeneratorLLM struct{ G generate.Generator }

// Complete implements LLM.
func (g GeneratorLLM) Complete(ctx context.Context, prompt string, maxTokens int) (string, error) {
	outs, errs := g.G.Generate(ctx, []string{prompt}, generate.Options{MaxNewTokens: maxTokens, N: 1})
	if errs[0] != nil {
		if errors.Is(errs[0], generate.ErrEmpty) {
			return "", nil
		}
		return "", errs[0]
	}
	return outs[0][0], nil
}

// Name implements LLM.
func (g GeneratorLLM) Name() string { return g.G.Name() }

// LocalLM is the local T5 generator behind /v1/completions and
// /v1/chat/completions, and the pipeline's LLM when no server is given.
//
// Generation (echo false): the prompt is the encoder input (T5 tokenizer,
// </s> appended, cut to MaxInputTokens) and t5.Model.Generate decodes
// greedily, or samples with a temperature > 0 (HF generate conventions).
//
// Echo with logprobs (what the perplexity labeler's HTTP scorer sends:
// echo=true, logprobs=0, max_tokens=1): a seq2seq model has no
// log-probabilities for its encoder input, so the text is scored as the
// decoder target after an empty encoder input (just </s>): tokens are the
// SentencePiece pieces of the text (special-token strings are plain text
// here), token t has log p(piece_t | pieces_<t, "") from one teacher-forced
// pass, token 0's is null (the OpenAI convention for the first prompt
// token), and each token's string is the span of the original text up to
// its end (whitespace the normalizer dropped is attached to the next piece),
// so the tokens spell the prompt exactly and text_offset counts characters.
// The max_tokens completion is the greedy continuation of that decoder
// sequence, one pass per token.
type LocalLM struct {
	Model     *t5.Model
	Tokenizer tokenizer.Tokenizer
	ID        string // model name reported by /v1/models
	// MaxInputTokens cuts generation prompts (default 512); MaxEchoTokens
	// limits scored texts (default 2048).
	MaxInputTokens, MaxEchoTokens int
}

// LoadLocalLM loads an HF T5 directory on the named backend.
func LoadLocalLM(dir, backendName string) (*LocalLM, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, err
	}
	m, err := t5.Load(be, dir)
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	return &LocalLM{Model: m, Tokenizer: tok, ID: "t5:" + filepath.Base(dir)}, nil
}

// Name implements LLM.
func (l *LocalLM) Name() string { return l.ID }

// ErrBadPrompt reports a prompt the local model cannot take (empty, too
// long); the server answers 400.
var ErrBadPrompt = errors.New("bad prompt")

// Generate decodes up to maxTokens tokens (≤ 0: 64) for prompt with
// temperature (0: greedy) and seed, and returns the text (special tokens
// dropped), the number of prompt and generated tokens, and whether it
// stopped at </s>.
func (l *LocalLM) Generate(prompt string, maxTokens int, temperature float64, seed int64) (text string, promptTokens, genTokens int, stopped bool, err error) {
	if maxTokens <= 0 {
		maxTokens = 64
	}
	limit := l.MaxInputTokens
	if limit <= 0 {
		limit = 512
	}
	ids := l.Tokenizer.Encode(prompt, false)
	if len(ids) > limit-1 {
		ids = ids[:limit-1]
	}
	ids = append(ids, l.Tokenizer.EOSID())
	out, err := l.Model.Generate([][]int{ids}, nil, t5.GenerateOptions{
		MaxNewTokens: maxTokens, DoSample: temperature > 0, Temperature: temperature, Seed: seed,
	})
	if err != nil {
		return "", 0, 0, false, fmt.Errorf("generate: %w", err)
	}
	gen := out[0][1:] // column 0 is decoder_start
	n := len(gen)
	for i, id := range gen {
		if id == l.Model.Config.EOSTokenID {
			n, stopped = i, true
			break
		}
	}
	return strings.TrimSpace(l.Tokenizer.Decode(gen[:n], true)), len(ids), n, stopped, nil
}

// Complete implements LLM with greedy decoding.
func (l *LocalLM) Complete(ctx context.Context, prompt string, maxTokens int) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	text, _, _, _, err := l.Generate(prompt, maxTokens, 0, 0)
	return text, err
}

// Echo scores text as described on LocalLM and appends the greedy
// continuation of up to maxTokens tokens (0: none). It returns the logprobs
// object of the whole (text + completion), the completion, and the token
// counts. Errors: ErrBadPrompt for an empty text, a text of more than
// MaxEchoTokens pieces or a tokenizer that is not SentencePiece; the
// model's errors.
func (l *LocalLM) Echo(text string, maxTokens int) (lp *openai.Logprobs, completion string, promptTokens, genTokens int, err error) {
	sp, ok := l.Tokenizer.(*sentencepiece.T5)
	if !ok {
		return nil, "", 0, 0, fmt.Errorf("%w: echo needs a SentencePiece (T5) tokenizer", ErrBadPrompt)
	}
	toks := sp.SentencePiece().Encode(text)
	if len(toks) == 0 {
		return nil, "", 0, 0, fmt.Errorf("%w: empty prompt", ErrBadPrompt)
	}
	limit := l.MaxEchoTokens
	if limit <= 0 {
		limit = 2048
	}
	if len(toks) > limit {
		return nil, "", 0, 0, fmt.Errorf("%w: %d tokens, the limit is %d", ErrBadPrompt, len(toks), limit)
	}
	lp = &openai.Logprobs{}
	prev, chars := 0, 0
	dec := []int{l.Model.Config.DecoderStartTokenID}
	for i, t := range toks {
		end := max(t.End, prev)
		if i == len(toks)-1 {
			end = len(text)
		}
		s := text[prev:end]
		prev = end
		lp.Tokens = append(lp.Tokens, s)
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
		dec = append(dec, t.ID)
	}
	enc := [][]int{{l.Tokenizer.EOSID()}}
	eos := l.Model.Config.EOSTokenID
	for step := 0; ; step++ {
		_, _, logits, err := l.Model.Forward(enc, nil, [][]int{dec})
		if err != nil {
			return nil, "", 0, 0, fmt.Errorf("echo: %w", err)
		}
		lg := tensors.MustCopyFlatData[float32](logits) // [1, T, V]
		V := len(lg) / len(dec)
		if step == 0 {
			for t := range toks {
				if t == 0 {
					lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
					continue
				}
				v := logSoftmaxAt(lg[t*V:(t+1)*V], toks[t].ID)
				lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
			}
		}
		if step >= maxTokens {
			break
		}
		last := lg[(len(dec)-1)*V : len(dec)*V]
		best := 0
		for j, x := range last {
			if x > last[best] {
				best = j
			}
		}
		genTokens++
		if best == eos {
			break
		}
		v := logSoftmaxAt(last, best)
		s := strings.ReplaceAll(sp.IDToToken(best), "▁", " ")
		lp.Tokens = append(lp.Tokens, s)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
		completion += s
		dec = append(dec, best)
	}
	return lp, completion, len(toks), genTokens, nil
}

// logSoftmaxAt is log softmax(row)[i], computed in float64 with the maximum
// subtracted.
func logSoftmaxAt(row []float32, i int) float64 {
	m := math.Inf(-1)
	for _, x := range row {
		m = math.Max(m, float64(x))
	}
	var s float64
	for _, x := range row {
		s += math.Exp(float64(x) - m)
	}
	return float64(row[i]) - m - math.Log(s)
}
