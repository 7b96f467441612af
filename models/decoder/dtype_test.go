package decoder

import (
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/testutil/halfckpt"
)

// Weights held in their stored dtype: each decoder fixture stored as BF16
// (halfckpt; Qwen2 and Llama 3 ship so), held in bfloat16 (auto), gives
// the float32 path's logits and continuation log-probabilities
// (perplexity) on that copy within the README's tolerances and the same
// KV-cached greedy ids, with every variable bfloat16.
func TestStoredDTypeParity(t *testing.T) {
	be := testBackend(t)
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, _ := loadFixture(t, name)
			half := halfckpt.Write(t, fx.dir, safetensors.BF16)
			ref, err := Load(be, half)
			if err != nil {
				t.Fatal(err)
			}
			m, err := LoadAs(be, half, nn.Auto)
			if err != nil {
				t.Fatal(err)
			}
			if held := nn.HeldBytes(m.Ctx.IterVariables()); len(held) != 1 || 2*held[dtypes.BFloat16] != nn.HeldBytes(ref.Ctx.IterVariables())[dtypes.Float32] {
				t.Fatalf("held bytes by dtype %v, want bfloat16 only, half of float32's %v", held, nn.HeldBytes(ref.Ctx.IterVariables()))
			}
			ids, mask, pos := fx.ints(t, "inputs.input_ids"), fx.ints(t, "inputs.attention_mask"), fx.ints(t, "inputs.position_ids")
			want, err := ref.Logits(ids, mask, pos)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Logits(ids, mask, pos)
			if err != nil {
				t.Fatal(err)
			}
			allClose(t, "logits", flat(t, got), flat(t, want), logitsAtol, logitsRtol, nil)
			pairs := pairsOf(t, fx)
			wantS, err := ref.ContinuationLogProbs(pairs)
			if err != nil {
				t.Fatal(err)
			}
			gotS, err := m.ContinuationLogProbs(pairs)
			if err != nil {
				t.Fatal(err)
			}
			for r := range pairs {
				allClose(t, "token_logprobs", gotS[r].LogProbs, wantS[r].LogProbs, lpAtol, lpRtol, nil)
				allClose(t, "mean_nll", []float32{float32(gotS[r].MeanNLL)}, []float32{float32(wantS[r].MeanNLL)}, nllAtol, nllRtol, nil)
			}
			prompts := [][]int{pairs[0].Prompt, pairs[1].Prompt}
			opt := GenerateOptions{MaxNewTokens: 6}
			wantG, err := ref.Generate(prompts, opt)
			if err != nil {
				t.Fatal(err)
			}
			gotG, err := m.Generate(prompts, opt)
			if err != nil {
				t.Fatal(err)
			}
			for r := range prompts {
				if !slices.Equal(gotG.NewTokens[r], wantG.NewTokens[r]) {
					t.Fatalf("row %d: greedy ids held in bfloat16 %v, float32 path %v", r, gotG.NewTokens[r], wantG.NewTokens[r])
				}
			}
		})
	}
}
