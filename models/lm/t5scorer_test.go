package lm

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// charTok encodes each byte as its value, eos = 1.
type charTok struct{}

func (charTok) Encode(s string, addSpecial bool) []int {
	var ids []int
	for _, b := range []byte(s) {
		ids = append(ids, int(b))
	}
	if addSpecial {
		ids = append(ids, 1)
	}
	return ids
}

// recLM records its inputs and returns -0.1·(position+1) per label.
type recLM struct{ in, mask, labels [][]int }

func (r *recLM) TokenLogProbs(in, mask, labels [][]int) ([][]float32, error) {
	r.in, r.mask, r.labels = in, mask, labels
	out := make([]float32, len(labels[0]))
	for i := range out {
		out[i] = -0.1 * float32(i+1)
	}
	return [][]float32{out}, nil
}

func TestT5ScorerInputs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		maxIn, maxTgt int
		prompt, tgt   string
		in, labels    []int
	}{
		{"no truncation", 512, 512, "ab", "c", []int{'a', 'b', 1}, []int{'c', 1}},
		{"input truncated, eos kept", 3, 512, "abcd", "c", []int{'a', 'b', 1}, []int{'c', 1}},
		{"target truncated", 512, 2, "a", "xyz", []int{'a', 1}, []int{'x', 1}},
		{"no limits", 0, 0, "abcd", "xyz", []int{'a', 'b', 'c', 'd', 1}, []int{'x', 'y', 'z', 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recLM{}
			s := NewT5Scorer("toy", rec, charTok{})
			s.MaxInputTokens, s.MaxTargetTokens = tc.maxIn, tc.maxTgt
			lp, err := s.TargetLogProbs(context.Background(), tc.prompt, tc.tgt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rec.in[0], tc.in) || !reflect.DeepEqual(rec.labels[0], tc.labels) || len(rec.mask[0]) != len(tc.in) {
				t.Fatalf("model got in %v labels %v mask %v; want %v, %v", rec.in[0], rec.labels[0], rec.mask[0], tc.in, tc.labels)
			}
			if len(lp) != len(tc.labels) || float32(lp[0]) != -0.1 {
				t.Fatalf("logprobs %v", lp)
			}
		})
	}
	s := NewT5Scorer("toy", &recLM{}, charTok{})
	if s.Name() != "t5:toy" {
		t.Errorf("Name %q", s.Name())
	}
	if _, err := s.TargetLogProbs(context.Background(), "p", "  "); err == nil || !strings.Contains(err.Error(), "empty target") {
		t.Errorf("empty target: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.TargetLogProbs(ctx, "p", "t"); err == nil {
		t.Error("cancelled context ignored")
	}
}
