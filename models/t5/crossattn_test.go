package t5

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// The reassociated cross-attention ((q·W_k)·encᵀ, (w·enc)·W_vᵀ) gives the
// logits of the direct form (enc·W_kᵀ, enc·W_vᵀ first), with a padded
// encoder row, for short and long decoders.
func TestCrossAttentionReassociation(t *testing.T) {
	b := testBackend(t)
	m, err := NewRandom(b, TinyConfig(50), 3)
	if err != nil {
		t.Fatal(err)
	}
	ids := [][]int{{3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 1}, {6, 7, 8, 9, 1, 0, 0, 0, 0, 0, 0, 0}}
	mask := [][]int{{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}}
	for _, T := range []int{1, 2, 9} {
		dec := make([][]int, 2)
		for r := range dec {
			for c := range T {
				dec[r] = append(dec[r], (r*7+c*3)%50)
			}
		}
		logits := func(form int) []float32 {
			crossForm = form
			defer func() { crossForm = crossAuto }()
			e, err := context.NewExec(b, m.Ctx, func(ctx *context.Context, ids, mask, dec *graph.Node) *graph.Node {
				return m.LogitsGraph(ctx, ids, mask, dec)
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := e.Exec(intTensor(ids, 12, 0), intTensor(mask, 12, 0), intTensor(dec, T, 0))
			if err != nil {
				t.Fatal(err)
			}
			return tensors.MustCopyFlatData[float32](out[0])
		}
		allClose(t, "logits", logits(crossReassociated), logits(crossDirect), 1e-4, 1e-4)
	}
}

// Hand-computed costs (multiply-adds per row): the filter's tiny shapes
// (T 2, L 192, d_model 64, 4 heads of 16) reassociate, 106,496 < 811,008;
// teacher forcing a 192-token target does not, 10,223,616 ≥ 3,145,728.
func TestReassociateCross(t *testing.T) {
	for _, c := range []struct {
		T, L, D, H, K int
		want          bool
	}{
		{2, 192, 64, 4, 16, true},
		{192, 192, 64, 4, 16, false},
		{1, 512, 512, 6, 64, true},
	} {
		if got := reassociateCross(c.T, c.L, c.D, c.H, c.K); got != c.want {
			t.Errorf("reassociateCross(%+v) = %v", c, got)
		}
	}
}

// TokenLogitsGraph's columns equal the chosen columns of LogitsGraph, for an
// untied head (lm_head) and a tied one (rescaled shared embeddings).
func TestTokenLogitsGraph(t *testing.T) {
	b := testBackend(t)
	for _, tied := range []bool{false, true} {
		cfg := TinyConfig(40)
		cfg.TieWordEmbeddings = tied
		m, err := NewRandom(b, cfg, 5)
		if err != nil {
			t.Fatal(err)
		}
		tokens := []int{38, 2, 39}
		e, err := context.NewExec(b, m.Ctx, func(ctx *context.Context, ids, mask, dec *graph.Node) []*graph.Node {
			return []*graph.Node{m.LogitsGraph(ctx, ids, mask, dec), m.TokenLogitsGraph(ctx, ids, mask, dec, tokens)}
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Exec(intTensor([][]int{{5, 6, 7, 1}, {8, 1, 0, 0}}, 4, 0), intTensor([][]int{{1, 1, 1, 1}, {1, 1, 0, 0}}, 4, 0), intTensor([][]int{{0, 9}, {0, 3}}, 2, 0))
		if err != nil {
			t.Fatal(err)
		}
		full, sel := tensors.MustCopyFlatData[float32](out[0]), tensors.MustCopyFlatData[float32](out[1])
		if got := out[1].Shape().Dimensions; len(got) != 3 || got[0] != 2 || got[1] != 2 || got[2] != 3 {
			t.Fatalf("tied=%v: shape %v, want [2 2 3]", tied, got)
		}
		var want []float32
		for bt := range 4 {
			for _, tk := range tokens {
				want = append(want, full[bt*40+tk])
			}
		}
		allClose(t, "token logits", sel, want, 1e-5, 1e-5)
	}
}
