// Package generate produces text for SL-HyDE (Li et al., "SL-HyDE:
// Self-Learning Hypothetical Document Embeddings"): pseudo-queries from
// documents (Eq. 2, q = G(d, prompt)) and hypothetical documents from
// queries (Eq. 3, d′ = G(q, prompt)) with any models/lm.Generator, and
// names the generators a flag can ask for (Spec):
//
//   - ICT, the inverse-cloze fallback (Lee et al., 2019, "Latent Retrieval
//     for Weakly Supervised Open Domain Question Answering"): the query is a
//     sentence of the document, the hypothetical documents its surrounding
//     sentences;
//   - "t5:DIR", a local Flan-T5 style model (lm.T5) sampled with
//     temperature (default lm.DefaultT5Temperature, 0.7);
//   - "openai:URL", a chat/completions server (Ollama, llama.cpp server,
//     vLLM) through lm.OpenAI, with timeouts, retries with backoff and a
//     concurrency limit.
//
// Errors are per item: one bad answer (empty, not UTF-8, a timeout, HTTP
// 500) never fails the other prompts of a call. Every generator derives
// prompt i's random stream from opt.Seed and prompt i (lm.ItemSeed).
package generate

import (
	"context"
	"fmt"
	"strings"

	"github.com/ragforge/ragforge/models/lm"
)

// TaskGenerator is implemented by generators that work on the raw texts
// rather than on a rendered prompt (ICT). Queries and HypoDocs have the
// shapes and error conventions of Generate.
type TaskGenerator interface {
	lm.Generator
	Queries(ctx context.Context, docs []string, opt lm.Options) ([][]string, []error)
	HypoDocs(ctx context.Context, queries, docs []string, opt lm.Options) ([][]string, []error)
}

// Render replaces {document} and {query} in template (the SL-HyDE prompts
// are retrieval/hyde.QueryPrompt and hyde.HypoPrompt).
func Render(template, query, document string) string {
	return strings.NewReplacer("{document}", document, "{query}", query).Replace(template)
}

// Queries returns one list of opt.N pseudo-queries per document (Eq. 2):
// g.Queries when g is a TaskGenerator, else g.Generate on
// Render(template, "", doc).
func Queries(ctx context.Context, g lm.Generator, template string, docs []string, opt lm.Options) ([][]string, []error) {
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
func HypoDocs(ctx context.Context, g lm.Generator, template string, queries, docs []string, opt lm.Options) ([][]string, []error) {
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
