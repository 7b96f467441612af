package main

import (
	"context"
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/infer/eval/mcqa"
	"github.com/ragforge/ragforge/models/t5"
)

// TestOptionLogLikT5: option log-likelihood with --scorer t5:DIR's scorer on
// the tiny Flan-T5 fixture equals the sums computed here by hand from the
// model's logits (log-softmax at each label position, the label's entry,
// summed), and acc / acc_norm pick the argmax of the sums and of the sums
// per byte of option text.
func TestOptionLogLikT5(t *testing.T) {
	dir := sharedDir(t, "fixtures/t5-flan-tiny")
	m, tok, err := t5.LoadWithTokenizer(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := newScorer(&globals{}, "t5:"+dir, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	q := mcqa.Question{Dataset: "medqa", ID: "1", Question: "Which organ produces insulin?", Answer: "B",
		Options: []mcqa.Option{{Letter: "A", Text: "Liver"}, {Letter: "B", Text: "Pancreas"}, {Letter: "C", Text: "Kidney of the adult"}, {Letter: "D", Text: "Spleen"}}}
	ll, err := mcqa.ScoreOptions(context.Background(), sc, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := tok.Encode(mcqa.LogLikTemplate.Fill(q, nil).User, true)
	best, bestNorm := -1, -1
	var bestV, bestNormV float64
	for i, o := range q.Options {
		lab := tok.Encode(" "+o.Text, true)
		dec := t5.ShiftRight([][]int{lab}, m.Config.DecoderStartTokenID, m.Config.PadTokenID)
		_, _, lg, err := m.Forward([][]int{in}, nil, dec)
		if err != nil {
			t.Fatal(err)
		}
		logits := tensors.MustCopyFlatData[float32](lg)
		V := len(logits) / len(lab)
		var sum float64
		for pos, id := range lab {
			row := logits[pos*V : (pos+1)*V]
			mx := float64(row[0])
			for _, v := range row {
				mx = math.Max(mx, float64(v))
			}
			var z float64
			for _, v := range row {
				z += math.Exp(float64(v) - mx)
			}
			sum += float64(row[id]) - mx - math.Log(z)
		}
		if math.Abs(sum-ll.Sums[i]) > 1e-3 {
			t.Errorf("option %s: log-likelihood %v, by hand %v", o.Letter, ll.Sums[i], sum)
		}
		if ll.Bytes[i] != len(o.Text) {
			t.Errorf("option %s: %d bytes, want %d", o.Letter, ll.Bytes[i], len(o.Text))
		}
		if best < 0 || sum > bestV {
			best, bestV = i, sum
		}
		if norm := sum / float64(len(o.Text)); bestNorm < 0 || norm > bestNormV {
			bestNorm, bestNormV = i, norm
		}
	}
	if ll.Choice != q.Options[best].Letter || ll.ChoiceNorm != q.Options[bestNorm].Letter {
		t.Errorf("acc chose %s, acc_norm %s; by hand %s, %s", ll.Choice, ll.ChoiceNorm, q.Options[best].Letter, q.Options[bestNorm].Letter)
	}
	if ll.Correct != (ll.Choice == "B") || ll.CorrectNorm != (ll.ChoiceNorm == "B") {
		t.Errorf("correctness %+v", ll)
	}
	t.Logf("sums %v, acc %s, acc_norm %s", ll.Sums, ll.Choice, ll.ChoiceNorm)
}
