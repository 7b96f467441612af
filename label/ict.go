package label

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strings"
	"unicode"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/retrieval"
)

// MethodICT marks pseudo-labels made from the corpus alone by ICTExamples.
const MethodICT = "ict"

// ICTOptions configure ICTExamples.
type ICTOptions struct {
	// PerChunk is the number of pseudo-questions drawn per chunk (2).
	PerChunk int
	// MinWords is the shortest sentence used as a pseudo-question (4 words,
	// as infer/generate.ICT).
	MinWords int
	// Negatives retrieves, per pseudo-question, candidates whose top hit
	// from another document is its [NOT_HELPFUL] evidence (a hard negative,
	// as the filter's real negatives are BM25 hits); nil draws a random
	// chunk of another document.
	Negatives retrieval.Retriever
	// MaxChunks > 0 draws pseudo-questions from that many chunks only (a
	// PCG(Seed) sample, kept in corpus order), bounding the training cost on
	// a large corpus; negatives still come from the whole corpus.
	MaxChunks int
	// Keep is the fraction of pseudo-questions whose sentence stays in its
	// [HELPFUL] evidence (0: always removed, the default; Lee et al. keep it
	// in 10% of cases). Real evidence contains the answer sentence the
	// question was written from, so a kept sentence is the closer analogue.
	Keep float64
	// QueryWords > 0 cuts each pseudo-question to a random span of at most
	// that many words (at least MinWords), closer to a short question than
	// a whole sentence; 0 keeps the sentence.
	QueryWords int
	// ContentWords > 0 writes each pseudo-question as a short question
	// made of at most that many of its sentence's content words (words of
	// at least 4 letters, punctuation stripped), drawn at random and kept in
	// sentence order, after a wh-word and before a "?" ("How fixative
	// volume tissue?"). Real questions share a few content words with their
	// evidence, not a copied sentence; applied after QueryWords/DropWords.
	// 0 keeps the words as they are.
	ContentWords int
	// DropWords is the probability that each word of a pseudo-question is
	// dropped (at least MinWords stay), mimicking a question that shares only
	// some of its evidence's words; 0 drops none.
	DropWords float64
	// Negatives per pseudo-question (1): that many distinct chunks of other
	// documents, the retriever's best hits first (hard) when Negatives is
	// set, random otherwise.
	NumNegatives int
	Seed         uint64
}

// Validate checks the options; errors name the field.
func (o ICTOptions) Validate() error {
	switch {
	case o.PerChunk < 0:
		return fmt.Errorf("ict options: field %q: %d, want >= 0 (0: 2)", "PerChunk", o.PerChunk)
	case o.MinWords < 0:
		return fmt.Errorf("ict options: field %q: %d, want >= 0 (0: 4)", "MinWords", o.MinWords)
	case o.MaxChunks < 0:
		return fmt.Errorf("ict options: field %q: %d, want >= 0 (0: all chunks)", "MaxChunks", o.MaxChunks)
	case o.Keep < 0 || o.Keep > 1:
		return fmt.Errorf("ict options: field %q: %v, want in [0, 1]", "Keep", o.Keep)
	case o.QueryWords < 0:
		return fmt.Errorf("ict options: field %q: %d, want >= 0 (0: the whole sentence)", "QueryWords", o.QueryWords)
	case o.DropWords < 0 || o.DropWords >= 1:
		return fmt.Errorf("ict options: field %q: %v, want in [0, 1)", "DropWords", o.DropWords)
	case o.ContentWords < 0:
		return fmt.Errorf("ict options: field %q: %d, want >= 0 (0: the words as they are)", "ContentWords", o.ContentWords)
	case o.NumNegatives < 0:
		return fmt.Errorf("ict options: field %q: %d, want >= 0 (0: 1)", "NumNegatives", o.NumNegatives)
	}
	return nil
}

// withDefaults fills in the zero fields' defaults (PerChunk 2,
// NumNegatives 1, MinWords 4).
func (o ICTOptions) withDefaults() ICTOptions {
	if o.PerChunk == 0 {
		o.PerChunk = 2
	}
	if o.NumNegatives == 0 {
		o.NumNegatives = 1
	}
	if o.MinWords <= 0 {
		o.MinWords = 4
	}
	return o
}

// ICTExamples makes RAG² filter examples from an unlabeled corpus by the
// inverse cloze task (Lee et al., 2019): a sentence of a chunk is a
// pseudo-question; the chunk with that sentence removed is its [HELPFUL]
// evidence and one chunk of another document its [NOT_HELPFUL] evidence.
// Every chunk is as often helpful (for its own sentences) as not helpful
// (for others'), so only the question–evidence match predicts the label;
// this is what a randomly initialised filter lacks when trained on a few
// hundred real labels, where it memorises which chunks were helpful.
// Chunks with fewer than two sentences of MinWords words are skipped. A
// PerChunk above a chunk's sentence count cycles through its sentences
// again (new examples only when Keep, QueryWords, DropWords or random
// negatives vary them). The draw is reproducible from Seed and the chunk
// ids. Ids are "ict:<chunk id>:<k>#<evidence chunk id>"; DatasetName is
// "ict". Errors: invalid options (ICTOptions.Validate), fewer than two
// documents, a retriever error.
func ICTExamples(ctx context.Context, chunks []data.Chunk, opt ICTOptions) ([]filter.Example, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	docs := map[string]bool{}
	byID := map[string]int{}
	for i, c := range chunks {
		docs[c.DocID] = true
		byID[c.ID] = i
	}
	if len(docs) < 2 {
		return nil, errors.New("ict labels: need chunks of at least two documents")
	}
	var out []filter.Example
	// Draws past a chunk's sentence count repeat a sentence; they are new
	// examples only when something else varies.
	cycle := opt.Keep > 0 || opt.QueryWords > 0 || opt.DropWords > 0 || opt.ContentWords > 0 || opt.Negatives == nil
	err := ictDraws(ctx, chunks, opt, cycle, func(c data.Chunk, d ictDraw, rng *rand.Rand) error {
		// A kept sentence leaves the chunk's text as is, like a negative's.
		ev := c.Text
		if !d.keep {
			var rest []string
			for j, s := range d.sents {
				if j != d.si {
					rest = append(rest, s)
				}
			}
			ev = strings.Join(rest, " ")
		}
		negs, err := ictNegatives(chunks, byID, c.DocID, d.query, opt, rng)
		if err != nil {
			return fmt.Errorf("ict labels: chunk %s: %w", c.ID, err)
		}
		id := fmt.Sprintf("ict:%s:%d", c.ID, d.k)
		out = append(out, filter.Example{ID: id + "#" + c.ID, Question: filter.Instruction(ev, d.query), Answer: filter.Helpful, DatasetName: MethodICT})
		for _, j := range negs {
			out = append(out, filter.Example{ID: id + "#" + chunks[j].ID, Question: filter.Instruction(chunks[j].Text, d.query), Answer: filter.NotHelpful, DatasetName: MethodICT})
		}
		return nil
	})
	return out, err
}

// ictDraw is one pseudo-question of a chunk: its k-th, drawn from sentence
// si of the chunk's usable sentences sents (whitespace-normalized, at least
// MinWords words), kept in the evidence or not.
type ictDraw struct {
	k, si int
	sents []string
	keep  bool
	query string
}

// ictDraws draws the pseudo-questions of ICTExamples and ICTQuerySet (the
// MaxChunks sample, PerChunk per chunk, the Keep and pseudoQuestion draws)
// and calls fn on each in order, with the chunk's generator for further
// draws. opt has its defaults filled in; without cycle a chunk gives at most
// one draw per sentence.
func ictDraws(ctx context.Context, chunks []data.Chunk, opt ICTOptions, cycle bool, fn func(c data.Chunk, d ictDraw, rng *rand.Rand) error) error {
	use := chunks
	if opt.MaxChunks > 0 && opt.MaxChunks < len(chunks) {
		pick := rand.New(rand.NewPCG(opt.Seed, 0x1c7)).Perm(len(chunks))[:opt.MaxChunks]
		sort.Ints(pick)
		use = make([]data.Chunk, len(pick))
		for i, j := range pick {
			use[i] = chunks[j]
		}
	}
	for _, c := range use {
		if err := ctx.Err(); err != nil {
			return err
		}
		var sents []string
		for _, p := range chunk.SplitSentences(c.Text) {
			if s := normSpace(p.Text); len(strings.Fields(s)) >= opt.MinWords {
				sents = append(sents, s)
			}
		}
		if len(sents) < 2 {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(c.ID))
		rng := rand.New(rand.NewPCG(opt.Seed, h.Sum64()))
		perm := rng.Perm(len(sents))
		n := opt.PerChunk
		if !cycle {
			n = min(n, len(sents))
		}
		for k := range n {
			si := perm[k%len(sents)]
			keep := opt.Keep > 0 && rng.Float64() < opt.Keep
			q := pseudoQuestion(sents[si], opt, rng)
			if err := fn(c, ictDraw{k: k, si: si, sents: sents, keep: keep, query: q}, rng); err != nil {
				return err
			}
		}
	}
	return nil
}

// normSpace joins the words of s with single spaces.
func normSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// pseudoQuestion cuts sentence s to a random span of at most QueryWords
// words, then drops each word with probability DropWords, keeping at least
// MinWords words (or all, when s has fewer).
func pseudoQuestion(s string, opt ICTOptions, rng *rand.Rand) string {
	w := strings.Fields(s)
	if opt.QueryWords > 0 && len(w) > max(opt.QueryWords, opt.MinWords) {
		n := max(opt.QueryWords, opt.MinWords)
		i := rng.IntN(len(w) - n + 1)
		w = w[i : i+n]
	}
	if opt.DropWords > 0 && len(w) > opt.MinWords {
		var kept []string
		for _, x := range w {
			if rng.Float64() >= opt.DropWords {
				kept = append(kept, x)
			}
		}
		if len(kept) >= opt.MinWords {
			w = kept
		} else {
			// Too many dropped: keep a random MinWords of them, in order.
			pick := rng.Perm(len(w))[:opt.MinWords]
			sort.Ints(pick)
			kept = kept[:0]
			for _, i := range pick {
				kept = append(kept, w[i])
			}
			w = kept
		}
	}
	if opt.ContentWords > 0 {
		return contentQuestion(w, opt.ContentWords, rng)
	}
	return strings.Join(w, " ")
}

// questionWords start the short questions of contentQuestion, as real
// questions start.
var questionWords = []string{"What", "How", "Which", "When", "Why", "Where", "Is", "Does"}

// contentQuestion writes at most n content words of w (at least 4 letters
// once leading and trailing punctuation is stripped) in their order, drawn
// at random, as "<wh-word> w1 … wk?". A sentence without content words
// gives its words as they are.
func contentQuestion(w []string, n int, rng *rand.Rand) string {
	var content []string
	for _, x := range w {
		x = strings.TrimFunc(x, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		letters := 0
		for _, r := range x {
			if unicode.IsLetter(r) {
				letters++
			}
		}
		if letters >= 4 {
			content = append(content, x)
		}
	}
	if len(content) == 0 {
		content = w
	}
	if len(content) > n {
		pick := rng.Perm(len(content))[:n]
		sort.Ints(pick)
		kept := make([]string, n)
		for i, j := range pick {
			kept[i] = content[j]
		}
		content = kept
	}
	return questionWords[rng.IntN(len(questionWords))] + " " + strings.Join(content, " ") + "?"
}

// ictNegatives returns NumNegatives distinct chunk indexes of documents
// other than doc: the retriever's best hits for q first when one is set,
// then random chunks.
func ictNegatives(chunks []data.Chunk, byID map[string]int, doc, q string, opt ICTOptions, rng *rand.Rand) ([]int, error) {
	var negs []int
	seen := map[int]bool{}
	if opt.Negatives != nil {
		hits, err := opt.Negatives.Search(q, 20*opt.NumNegatives)
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			if j, ok := byID[h.ID]; ok && chunks[j].DocID != doc && !seen[j] {
				seen[j] = true
				negs = append(negs, j)
				if len(negs) == opt.NumNegatives {
					return negs, nil
				}
			}
		}
	}
	others := 0
	for _, c := range chunks {
		if c.DocID != doc {
			others++
		}
	}
	for len(negs) < min(opt.NumNegatives, others) {
		if j := rng.IntN(len(chunks)); chunks[j].DocID != doc && !seen[j] {
			seen[j] = true
			negs = append(negs, j)
		}
	}
	return negs, nil
}
