// Package generate produces text for SL-HyDE (Li et al., "SL-HyDE:
// Self-Learning Hypothetical Document Embeddings"): pseudo-queries from
// documents (Eq. 2, q = G(d, prompt)) and hypothetical documents from
// queries (Eq. 3, d′ = G(q, prompt)). Three generators implement the
// Generator interface:
//
//   - ICT, the inverse-cloze fallback (Lee et al., 2019, "Latent Retrieval
//     for Weakly Supervised Open Domain Question Answering"): the query is a
//     sentence of the document, the hypothetical documents its surrounding
//     sentences;
//   - T5Generator, a local Flan-T5 style model (models/t5) sampled with
//     temperature (default 0.7);
//   - OpenAIGenerator, a chat/completions server (Ollama, llama.cpp server,
//     vLLM) through models/openai, with timeouts, retries with backoff and a
//     concurrency limit.
//
// Errors are per item: one bad answer (empty, not UTF-8, a timeout, HTTP
// 500) never fails the other prompts of a call.
//
// Determinism: every generator derives prompt i's random stream from
// opt.Seed and a hash of prompt i itself (ItemSeed), never from its position
// in the call, so a prompt generates the same text whether it is sent alone
// or in a batch, in a first run or a resumed one.
package generate

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"unicode/utf8"
)

// Options control one Generate call.
type Options struct {
	// MaxNewTokens caps each generated text (tokens of the generator; ≤ 0:
	// the generator's default, 64 for T5, the server's for OpenAI).
	MaxNewTokens int
	// Temperature of sampling (SL-HyDE: 0.7); 0 asks for greedy decoding.
	Temperature float64
	// TopP is nucleus sampling's mass (≤ 0 or ≥ 1: off).
	TopP float64
	// Seed is mixed with each prompt's hash (ItemSeed).
	Seed int64
	// N is the number of texts per prompt (≤ 0 means 1); the L candidates of
	// Eq. 3 are one call with N = L.
	N int
}

func (o Options) n() int { return max(o.N, 1) }

// Generator turns prompts into texts. Generate returns, for each prompt i,
// outs[i] with opt.N texts (fewer, possibly none, when errs[i] != nil) and
// errs[i], the item's error (nil when all N texts were produced). A cancelled
// ctx makes the remaining items fail with ctx.Err(). Implementations are
// safe for concurrent use.
type Generator interface {
	Name() string
	Generate(ctx context.Context, prompts []string, opt Options) (outs [][]string, errs []error)
}

// TaskGenerator is implemented by generators that work on the raw texts
// rather than on a rendered prompt (ICT). Queries and HypoDocs have the
// shapes and error conventions of Generate.
type TaskGenerator interface {
	Generator
	Queries(ctx context.Context, docs []string, opt Options) ([][]string, []error)
	HypoDocs(ctx context.Context, queries, docs []string, opt Options) ([][]string, []error)
}

// Render replaces {document} and {query} in template (the SL-HyDE prompts
// are retrieval/hyde.QueryPrompt and hyde.HypoPrompt).
func Render(template, query, document string) string {
	return strings.NewReplacer("{document}", document, "{query}", query).Replace(template)
}

// Queries returns one list of opt.N pseudo-queries per document (Eq. 2):
// g.Queries when g is a TaskGenerator, else g.Generate on
// Render(template, "", doc).
func Queries(ctx context.Context, g Generator, template string, docs []string, opt Options) ([][]string, []error) {
	if tg, ok := g.(TaskGenerator); ok {
		return tg.Queries(ctx, docs, opt)
	}
	prompts := make([]string, len(docs))
	for i, d := range docs {
		prompts[i] = Render(template, "", d)
	}
	return g.Generate(ctx, prompts, opt)
}

// HypoDocs returns opt.N hypothetical documents per query (Eq. 3): g.HypoDocs
// when g is a TaskGenerator (docs[i] is query i's source document, "" when
// unknown, as for evaluation queries; docs may be nil), else g.Generate on
// Render(template, query, doc).
func HypoDocs(ctx context.Context, g Generator, template string, queries, docs []string, opt Options) ([][]string, []error) {
	if docs == nil {
		docs = make([]string, len(queries))
	}
	if len(docs) != len(queries) {
		errs := make([]error, len(queries))
		for i := range errs {
			errs[i] = fmt.Errorf("hypothetical documents: %d queries, %d documents", len(queries), len(docs))
		}
		return make([][]string, len(queries)), errs
	}
	if tg, ok := g.(TaskGenerator); ok {
		return tg.HypoDocs(ctx, queries, docs, opt)
	}
	prompts := make([]string, len(queries))
	for i, q := range queries {
		prompts[i] = Render(template, q, docs[i])
	}
	return g.Generate(ctx, prompts, opt)
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

// ItemSeed is the seed of one prompt: FNV-1a 64 of the prompt, xor seed.
func ItemSeed(seed int64, prompt string) int64 {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	return int64(h.Sum64()) ^ seed
}

// failAll returns outs/errs with every item failed with err.
func failAll(n int, err error) ([][]string, []error) {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return make([][]string, n), errs
}
