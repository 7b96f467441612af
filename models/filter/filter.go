// Package filter holds what the RAG² filter (Sohn et al., NAACL 2025) is at
// inference time, shared by its trainer (train/filtertrain), its server
// (infer/serve) and its labelers (label): the two label tokens a Flan-T5
// emits, the cutting of an instruction into overflow windows, the rule that
// aggregates window probabilities into one per snippet, and the filter's
// example schema (Example, the Instruction prompt, JSON/JSONL files).
//
// The schema lives here, not in label or data, because it is the model's
// input and output format: the instruction is what the model reads and the
// answer one of its label tokens. Every user of it (train/filtertrain, label and
// its SQLite store, infer/serve) sits above models, so imports point down,
// and train/filtertrain needs nothing from the labelers.
package filter

import (
	"fmt"

	"github.com/ragforge/ragforge/models/tokenizer"
)

// The label tokens the filter emits at the first decoder step (RAG²'s
// classifier adds them to the tokenizer with HF add_tokens).
const (
	Helpful    = "[HELPFUL]"
	NotHelpful = "[NOT_HELPFUL]"
)

// LabelIDs returns the ids of Helpful and NotHelpful in tok, checking that
// each is one added token (encodes to itself alone) with an id below
// vocabSize, the model's embedding rows. Errors wrap ErrNotFilter and name
// the token; callers add the checkpoint directory.
func LabelIDs(tok tokenizer.Tokenizer, vocabSize int) (helpful, notHelpful int, err error) {
	var ids [2]int
	for i, s := range []string{Helpful, NotHelpful} {
		id, ok := tok.TokenToID(s)
		if enc := tok.Encode(s, false); !ok || len(enc) != 1 || enc[0] != id {
			return 0, 0, fmt.Errorf("tokenizer has no added token %q: %w", s, ErrNotFilter)
		}
		if id >= vocabSize {
			return 0, 0, fmt.Errorf("token %q has id %d, model vocab_size %d: %w", s, id, vocabSize, ErrNotFilter)
		}
		ids[i] = id
	}
	return ids[0], ids[1], nil
}
