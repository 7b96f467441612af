package generate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/models/lm"
)

// ICT is the inverse-cloze generator (Lee et al., 2019), SL-HyDE's fallback
// when no language model is available. It needs no model and is
// deterministic in (Seed, text).
//
//   - Queries: the document is split with chunk.SplitSentences; a sentence
//     of at least MinWords words (all sentences when none has) is drawn
//     uniformly with PCG(lm.ItemSeed(opt.Seed, doc)); N > 1 draws N distinct
//     sentences while there are enough, then word spans (ictSpans): windows
//     of MinWords to 3·MinWords consecutive words of the document, each
//     distinct from every earlier query; a document too short for N
//     distinct queries gets its distinct ones followed by repeats of them
//     (the first N′ stay the same for every N ≥ N′, so query j of a
//     document does not depend on N).
//   - HypoDocs: for a query that is sentence s of its document, candidate k
//     (k = 0..N−1) is the window of sentences [s−k−1, s+k+1] without
//     sentence s itself, joined by one space (Lee et al.'s context with the
//     pseudo-query removed, widened one sentence per candidate). When the
//     document is unknown (""), the query is not one of its sentences, or
//     the document has no other sentence, every candidate is the query
//     itself, so HyDE fusion degrades to the plain query.
//   - Generate treats each prompt as a document and returns Queries.
type ICT struct {
	// MinWords is the shortest sentence (in space-separated words) preferred
	// as a query; default 4.
	MinWords int
}

// Name is "ict".
func (ICT) Name() string { return "ict" }

// Generate is Queries on the prompts.
func (g ICT) Generate(ctx context.Context, prompts []string, opt lm.Options) ([][]string, []error) {
	return g.Queries(ctx, prompts, opt)
}

func sentences(doc string) []string {
	ps := chunk.SplitSentences(doc)
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if s := strings.Join(strings.Fields(p.Text), " "); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Queries implements TaskGenerator.
func (g ICT) Queries(ctx context.Context, docs []string, opt lm.Options) ([][]string, []error) {
	minWords := g.MinWords
	if minWords <= 0 {
		minWords = 4
	}
	outs := make([][]string, len(docs))
	errs := make([]error, len(docs))
	for i, d := range docs {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if _, err := lm.CheckText(d); err != nil {
			errs[i] = fmt.Errorf("ict: document: %w", err)
			continue
		}
		sents := sentences(d)
		var pool []int
		for j, s := range sents {
			if len(strings.Fields(s)) >= minWords {
				pool = append(pool, j)
			}
		}
		if len(pool) == 0 {
			for j := range sents {
				pool = append(pool, j)
			}
		}
		if len(pool) == 0 {
			errs[i] = fmt.Errorf("ict: document has no sentence: %w", lm.ErrEmpty)
			continue
		}
		rng := rand.New(rand.NewPCG(uint64(lm.ItemSeed(opt.Seed, d)), 0x1c7))
		perm := rng.Perm(len(pool))
		n := opt.Texts()
		for k := range min(n, len(perm)) {
			outs[i] = append(outs[i], sents[pool[perm[k]]])
		}
		if n > len(perm) {
			outs[i] = append(outs[i], ictSpans(rng, strings.Fields(d), minWords, n-len(perm), outs[i])...)
		}
		for k := 0; len(outs[i]) < n; k++ {
			outs[i] = append(outs[i], outs[i][k])
		}
	}
	return outs, errs
}

// HypoDocs implements TaskGenerator.
func (g ICT) HypoDocs(ctx context.Context, queries, docs []string, opt lm.Options) ([][]string, []error) {
	outs := make([][]string, len(queries))
	errs := make([]error, len(queries))
	for i, q := range queries {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		q, err := lm.CheckText(q)
		if err != nil {
			errs[i] = fmt.Errorf("ict: query: %w", err)
			continue
		}
		q = strings.Join(strings.Fields(q), " ")
		var sents []string
		if i < len(docs) {
			sents = sentences(docs[i])
		}
		s := -1
		for j, x := range sents {
			if x == q {
				s = j
				break
			}
		}
		for k := range opt.Texts() {
			text := q
			if s >= 0 && len(sents) > 1 {
				var win []string
				for j := max(0, s-k-1); j <= min(len(sents)-1, s+k+1); j++ {
					if j != s {
						win = append(win, sents[j])
					}
				}
				text = strings.Join(win, " ")
			}
			outs[i] = append(outs[i], text)
		}
	}
	return outs, errs
}

// ictSpans draws up to n word spans of words with rng: a length uniform in
// [minWords, 3·minWords] (capped to len(words)) and a uniform start, joined
// by one space; a span equal to one in have or drawn before is redrawn, at
// most 20·n draws in all, so a short document yields fewer than n.
func ictSpans(rng *rand.Rand, words []string, minWords, n int, have []string) []string {
	if len(words) == 0 {
		return nil
	}
	seen := map[string]bool{}
	for _, h := range have {
		seen[h] = true
	}
	var out []string
	for try := 0; try < 20*n && len(out) < n; try++ {
		lo, hi := min(minWords, len(words)), min(3*minWords, len(words))
		w := lo + rng.IntN(hi-lo+1)
		start := rng.IntN(len(words) - w + 1)
		sp := strings.Join(words[start:start+w], " ")
		if !seen[sp] {
			seen[sp] = true
			out = append(out, sp)
		}
	}
	return out
}
