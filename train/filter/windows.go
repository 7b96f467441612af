package filter

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// Window is one model input cut from an example: Example indexes the example
// slice it came from, IDs are token ids ending in </s> (no padding).
type Window struct {
	Example int
	IDs     []int
}

// Windows tokenizes each example's instruction (surrounding whitespace
// stripped, as RAG²'s preprocess_features_function does) and cuts it as the HF
// fast tokenizer does with truncation=True, max_length=maxLen, stride=stride,
// return_overflowing_tokens=True: window j holds content tokens
// [j·(maxLen−1−stride), j·(maxLen−1−stride) + maxLen−1) plus </s>, until the
// end is reached. Windows come in example order, those of one example
// consecutive. Errors: invalid lengths (see tokenizer.EncodeOptions.Validate).
func Windows(tok tokenizer.Tokenizer, examples []label.Example, maxLen, stride int) ([]Window, error) {
	texts := make([]string, len(examples))
	for i, ex := range examples {
		texts[i] = strings.TrimSpace(ex.Question)
	}
	enc, err := tokenizer.EncodeBatchErr(tok, texts, tokenizer.EncodeOptions{
		MaxLength: maxLen, Stride: stride, Truncation: true, ReturnOverflowing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("windows: %w", err)
	}
	out := make([]Window, len(enc))
	for i, e := range enc {
		out[i] = Window{Example: e.OverflowOf, IDs: e.IDs}
	}
	return out, nil
}

// SplitByQuestion splits examples into train and validation sets so that no
// question is in both: examples are grouped by the question parsed from
// their instruction (label.ParseInstruction), the groups are shuffled with
// seed, and whole groups go to validation until it holds at least
// round(validFrac·N) examples, never taking the last group. Both splits keep
// the input order. validFrac 0 returns everything as train. Errors: validFrac
// outside [0, 1), an instruction that does not parse (naming the example id),
// or fewer than two questions when a validation set is asked for.
func SplitByQuestion(examples []label.Example, validFrac float64, seed int64) (train, valid []label.Example, err error) {
	if validFrac < 0 || validFrac >= 1 {
		return nil, nil, fmt.Errorf("split by question: validFrac %v outside [0, 1)", validFrac)
	}
	group := map[string]int{}
	var members [][]int
	for i, ex := range examples {
		_, q, err := label.ParseInstruction(strings.TrimSpace(ex.Question))
		if err != nil {
			return nil, nil, fmt.Errorf("split by question: example %d (id %q): field %q: %w", i+1, ex.ID, "question", err)
		}
		q = strings.TrimSpace(q)
		g, ok := group[q]
		if !ok {
			g = len(members)
			group[q] = g
			members = append(members, nil)
		}
		members[g] = append(members[g], i)
	}
	target := int(validFrac*float64(len(examples)) + 0.5)
	if target == 0 {
		return append([]label.Example(nil), examples...), nil, nil
	}
	if len(members) < 2 {
		return nil, nil, fmt.Errorf("split by question: %d distinct question(s); a validation split needs at least 2", len(members))
	}
	order := rand.New(rand.NewPCG(uint64(seed), 0x5b117)).Perm(len(members))
	inValid := make([]bool, len(examples))
	n := 0
	for k, g := range order {
		if n >= target || k == len(order)-1 {
			break
		}
		for _, i := range members[g] {
			inValid[i] = true
		}
		n += len(members[g])
	}
	for i, ex := range examples {
		if inValid[i] {
			valid = append(valid, ex)
		} else {
			train = append(train, ex)
		}
	}
	return train, valid, nil
}
