// Package lm is the one home of "a language model": the operations every
// consumer (label's perplexity labeler, infer/serve, models/generate's
// SL-HyDE generation, train/selflearn, infer/eval/sensitivity) needs from
// one, and their backends.
//
//   - Generator: prompts → texts (Options: max new tokens, temperature,
//     top-p, top-k, seed, stop strings, N texts per prompt).
//   - Scorer: per-token natural-log probabilities of a continuation given a
//     prompt, log p(target_t | prompt, target_<t); for a seq2seq model the
//     prompt is the encoder input and the target the decoder labels.
//   - Perplexity: exp of the mean negative log-likelihood over the
//     continuation's tokens (one function, used everywhere).
//
// Backends, one file each:
//
//   - T5 (t5.go, t5scorer.go): encoder-decoder (models/t5); it generates,
//     serves the OpenAI completions forms and scores through T5Scorer;
//   - Decoder (decoder.go): Llama / Qwen2 / Qwen3 decoder-only models
//     (models/decoder) with their byte-level BPE tokenizer and chat
//     template (models/tokenizer/bpe), scoring as vLLM's echo does;
//   - the OpenAI-compatible client (openai.go, models/openai): OpenAI
//     generates through /v1/chat/completions, HTTPScorer scores through
//     /v1/completions with echo + logprobs or ragforge's encoder_input
//     extension.
//
// Load opens a model directory by its config.json model_type (Families);
// Local is what infer/serve needs of a model it runs itself.
//
// Determinism: generators derive prompt i's random stream from Options.Seed
// and a hash of prompt i itself (ItemSeed), never from its position in the
// call, so a prompt generates the same text alone or in a batch, in a first
// run or a resumed one.
package lm

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"unicode/utf8"

	"github.com/ragforge/ragforge/models/openai"
)

// Options control one Generate call.
type Options struct {
	// MaxNewTokens caps each generated text (tokens of the model; ≤ 0: the
	// backend's default, 64 for T5, the server's for OpenAI).
	MaxNewTokens int
	// Temperature of sampling (SL-HyDE: 0.7); 0 asks for greedy decoding.
	Temperature float64
	// TopP is nucleus sampling's mass (≤ 0 or ≥ 1: off).
	TopP float64
	// TopK keeps the K most likely tokens before sampling (≤ 0: off; HF
	// generate top_k). A backend that cannot honour it fails the call.
	TopK int
	// Seed is mixed with each prompt's hash (ItemSeed).
	Seed int64
	// Stop strings end a text before their first occurrence; the text
	// never contains one.
	Stop []string
	// N is the number of texts per prompt (≤ 0 means 1); the L candidates of
	// SL-HyDE's Eq. 3 are one call with N = L.
	N int
}

// Texts returns the number of texts per prompt, max(N, 1).
func (o Options) Texts() int { return max(o.N, 1) }

// Generator turns prompts into texts. Generate returns, for each prompt i,
// outs[i] with opt.N texts (fewer, possibly none, when errs[i] != nil) and
// errs[i], the item's error (nil when all N texts were produced). A cancelled
// ctx makes the remaining items fail with ctx.Err(). Implementations are
// safe for concurrent use. Name identifies the model.
type Generator interface {
	Name() string
	Generate(ctx context.Context, prompts []string, opt Options) (outs [][]string, errs []error)
}

// Scorer returns the natural-log probabilities log p(target token | prompt,
// earlier target tokens), one per target token, of a language model.
// Name identifies the model and its settings; it keys score caches, so two
// scorers that may disagree must have different names.
type Scorer interface {
	Name() string
	TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error)
}

// LM is a language model that both generates and scores (T5).
type LM interface {
	Generator
	TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error)
}

// Local is a model run in this process behind an OpenAI-compatible server
// (infer/serve): single sequences of token ids, streamed, and the echo
// scoring of /v1/completions. T5 and Decoder implement it.
type Local interface {
	Name() string
	// PromptIDs tokenizes a completions prompt; ChatIDs renders chat
	// messages (the decoder's chat template, T5's plain join); UserIDs is
	// one user message as the model expects it (what a pipeline's LLM
	// sends); EchoIDs are the ids Echo scores.
	PromptIDs(text string) []int
	ChatIDs(msgs []openai.Message) ([]int, error)
	UserIDs(prompt string) ([]int, error)
	EchoIDs(text string) []int
	GenerateIDs(ctx context.Context, ids []int, opt GenOptions) (GenResult, error)
	Echo(ctx context.Context, text string, maxTokens, top int) (lp *openai.Logprobs, completion string, promptTokens, genTokens int, err error)
}

// eachPrompt is the loop of every local backend's Generate: for each prompt
// gen returns n decoded texts of at most maxNew tokens (opt.MaxNewTokens, or
// defaultMaxNewTokens); each is cut at opt.Stop and checked (CheckText), and
// outs and errs are filled as Generator documents, errors prefixed with
// name. A cancelled ctx fails the remaining items.
func eachPrompt(ctx context.Context, name string, prompts []string, opt Options, gen func(prompt string, n, maxNew int) ([]string, error)) ([][]string, []error) {
	n, maxNew := opt.Texts(), opt.MaxNewTokens
	if maxNew <= 0 {
		maxNew = defaultMaxNewTokens
	}
	outs := make([][]string, len(prompts))
	errs := make([]error, len(prompts))
	for i, p := range prompts {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		texts, err := gen(p, n, maxNew)
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", name, err)
			continue
		}
		for k, raw := range texts {
			text, _ := CutStop(raw, opt.Stop)
			text, err := CheckText(text)
			if err != nil {
				errs[i] = fmt.Errorf("%s: text %d: %w", name, k, err)
				continue
			}
			outs[i] = append(outs[i], text)
		}
	}
	return outs, errs
}

// ErrEmpty and ErrNotUTF8 are the per-item errors of a generated text that
// cannot be used.
var (
	ErrEmpty   = errors.New("generated text is empty")
	ErrNotUTF8 = errors.New("generated text is not valid UTF-8")
)

// CheckText returns ErrEmpty for a text that is blank after trimming and
// ErrNotUTF8 for invalid UTF-8 or a U+FFFD replacement character (what
// encoding/json makes of invalid bytes); otherwise the trimmed text.
func CheckText(s string) (string, error) {
	if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
		return "", ErrNotUTF8
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", ErrEmpty
	}
	return s, nil
}

// CutStop returns text up to the first occurrence of any stop string and
// whether one occurred (the earliest wins).
func CutStop(text string, stop []string) (string, bool) {
	cut := -1
	for _, s := range stop {
		if s == "" {
			continue
		}
		if i := strings.Index(text, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut < 0 {
		return text, false
	}
	return text[:cut], true
}

// ItemSeed is the seed of one prompt: FNV-1a 64 of the prompt, xor seed.
func ItemSeed(seed int64, prompt string) int64 {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	return int64(h.Sum64()) ^ seed
}

// The backends and the interfaces they offer.
var (
	_ LM        = (*T5)(nil)
	_ LM        = (*Decoder)(nil)
	_ Local     = (*T5)(nil)
	_ Local     = (*Decoder)(nil)
	_ Scorer    = (*T5)(nil)
	_ Scorer    = (*T5Scorer)(nil)
	_ Generator = (*OpenAI)(nil)
	_ Scorer    = (*HTTPScorer)(nil)
)
