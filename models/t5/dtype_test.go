package t5

import (
	"fmt"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/testutil/halfckpt"
)

// Weights held in their stored dtype: each T5 fixture stored as BF16
// (halfckpt), held in bfloat16 (auto), gives the float32 path's encoder and
// decoder hidden states, logits and loss on that copy within the README's
// T5 tolerances and the same greedy ids (KV-cached generation: the filter's
// first-step score and generation read the same weights), with every
// variable bfloat16.
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
			ids, mask := fx.ints(t, "inputs.input_ids"), fx.ints(t, "inputs.attention_mask")
			dec, labels := fx.ints(t, "inputs.decoder_input_ids"), fx.ints(t, "inputs.labels")
			wantEnc, wantDec, wantLogits, err := ref.Forward(ids, mask, dec)
			if err != nil {
				t.Fatal(err)
			}
			enc, decH, logits, err := m.Forward(ids, mask, dec)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name       string
				got, want  *tensors.Tensor
				atol, rtol float64
			}{
				{"encoder_last_hidden_state", enc, wantEnc, 1e-4, 1e-4},
				{"decoder_last_hidden_state", decH, wantDec, 1e-4, 1e-4},
				{"logits", logits, wantLogits, 1e-3, 1e-4},
			} {
				allClose(t, c.name, flat(t, c.got), flat(t, c.want), c.atol, c.rtol)
			}
			wantLoss, err := ref.Loss(ids, mask, labels)
			if err != nil {
				t.Fatal(err)
			}
			loss, err := m.Loss(ids, mask, labels)
			if err != nil {
				t.Fatal(err)
			}
			allClose(t, "loss", []float32{loss}, []float32{wantLoss}, 1e-4, 1e-5)
			wantIDs, err := ref.Generate(ids, mask, GenerateOptions{MaxNewTokens: 8})
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Generate(ids, mask, GenerateOptions{MaxNewTokens: 8})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(wantIDs) {
				t.Fatalf("greedy ids held in bfloat16 %v, float32 path %v", got, wantIDs)
			}
		})
	}
}
