package label

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/ragforge/ragforge/models/filter"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
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
	Seed      uint64
}

// ICTExamples makes RAG² filter examples from an unlabeled corpus by the
// inverse cloze task (Lee et al., 2019): a sentence of a chunk is a
// pseudo-question; the chunk with that sentence removed is its [HELPFUL]
// evidence and one chunk of another document its [NOT_HELPFUL] evidence.
// Every chunk is as often helpful (for its own sentences) as not helpful
// (for others'), so only the question–evidence match predicts the label;
// this is what a randomly initialised filter lacks when trained on a few
// hundred real labels, where it memorises which chunks were helpful.
// Chunks with fewer than two sentences of MinWords words are skipped. The
// draw is reproducible from Seed and the chunk ids. Ids are
// "ict:<chunk id>:<k>#<evidence chunk id>"; DatasetName is "ict".
// Errors: fewer than two documents, a retriever error.
func ICTExamples(ctx context.Context, chunks []data.Chunk, opt ICTOptions) ([]filter.Example, error) {
	if opt.PerChunk <= 0 {
		opt.PerChunk = 2
	}
	if opt.MinWords <= 0 {
		opt.MinWords = 4
	}
	docs := map[string]bool{}
	byID := map[string]int{}
	for i, c := range chunks {
		docs[c.DocID] = true
		byID[c.ID] = i
	}
	if len(docs) < 2 {
		return nil, errors.New("ict labels: need chunks of at least two documents")
	}
	use := chunks
	if opt.MaxChunks > 0 && opt.MaxChunks < len(chunks) {
		pick := rand.New(rand.NewPCG(opt.Seed, 0x1c7)).Perm(len(chunks))[:opt.MaxChunks]
		sort.Ints(pick)
		use = make([]data.Chunk, len(pick))
		for i, j := range pick {
			use[i] = chunks[j]
		}
	}
	var out []filter.Example
	for _, c := range use {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var sents []string
		for _, p := range chunk.SplitSentences(c.Text) {
			if s := strings.Join(strings.Fields(p.Text), " "); len(strings.Fields(s)) >= opt.MinWords {
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
		for k := range min(opt.PerChunk, len(sents)) {
			q := sents[perm[k]]
			var rest []string
			for j, s := range sents {
				if j != perm[k] {
					rest = append(rest, s)
				}
			}
			neg := -1
			if opt.Negatives != nil {
				hits, err := opt.Negatives.Search(q, 20)
				if err != nil {
					return nil, fmt.Errorf("ict labels: chunk %s: %w", c.ID, err)
				}
				for _, h := range hits {
					if j, ok := byID[h.ID]; ok && chunks[j].DocID != c.DocID {
						neg = j
						break
					}
				}
			}
			for neg < 0 {
				if j := rng.IntN(len(chunks)); chunks[j].DocID != c.DocID {
					neg = j
				}
			}
			id := fmt.Sprintf("ict:%s:%d", c.ID, k)
			out = append(out,
				filter.Example{ID: id + "#" + c.ID, Question: filter.Instruction(strings.Join(rest, " "), q), Answer: Helpful, DatasetName: MethodICT},
				filter.Example{ID: id + "#" + chunks[neg].ID, Question: filter.Instruction(chunks[neg].Text, q), Answer: NotHelpful, DatasetName: MethodICT})
		}
	}
	return out, nil
}
