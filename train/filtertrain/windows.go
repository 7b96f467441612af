package filtertrain

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/ragforge/ragforge/models/filter"
)

// Window is one model input cut from an example (models/filter.Window).
type Window = filter.Window

// Windows cuts each example's instruction (its Question) into model inputs
// as p does at inference (Predictor.Windows: p's window length, stride and
// match marks); Window.Example indexes examples. Errors name the example.
func Windows(p *filter.Predictor, examples []filter.Example) ([]Window, error) {
	texts := make([]string, len(examples))
	for i, ex := range examples {
		texts[i] = ex.Question
	}
	wins, err := p.Windows(texts)
	var ie *filter.InstructionError
	if errors.As(err, &ie) {
		ex := examples[ie.Index]
		return nil, fmt.Errorf("example %d (id %q): field %q: %w", ie.Index+1, ex.ID, "question", ie.Err)
	}
	return wins, err
}

// SplitByQuestion splits examples into train and validation sets so that no
// question is in both: examples are grouped by the question parsed from
// their instruction (filter.ParseInstruction), the groups are shuffled with
// seed, and whole groups go to validation until it holds at least
// round(validFrac·N) examples, never taking the last group. Both splits keep
// the input order. validFrac 0 returns everything as train. Errors: validFrac
// outside [0, 1), an instruction that does not parse (naming the example id),
// or fewer than two questions when a validation set is asked for.
func SplitByQuestion(examples []filter.Example, validFrac float64, seed int64) (train, valid []filter.Example, err error) {
	if validFrac < 0 || validFrac >= 1 {
		return nil, nil, fmt.Errorf("split by question: validFrac %v outside [0, 1)", validFrac)
	}
	group := map[string]int{}
	var members [][]int
	for i, ex := range examples {
		_, q, err := filter.ParseInstruction(strings.TrimSpace(ex.Question))
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
		return append([]filter.Example(nil), examples...), nil, nil
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
