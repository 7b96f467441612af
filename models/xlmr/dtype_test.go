package xlmr

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/testutil/halfckpt"
)

// Weights held in their stored dtype: xlmr-tiny stored as BF16, held in
// bfloat16 (auto; the positions from the ids and the 250k-row table of
// bge-m3 go through the same lookups), gives the float32 path's
// last_hidden_state, pooled and normalised CLS (bge-m3) and mean (mE5)
// embeddings on that copy within the README's tolerances.
func TestStoredDTypeParity(t *testing.T) {
	fx := loadFixture(t)
	be := testBackend(t)
	half := halfckpt.Write(t, fx.dir, safetensors.BF16)
	ref, err := Load(be, half)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bert.LoadAs(be, half, Arch, nn.Auto)
	if err != nil {
		t.Fatal(err)
	}
	if held := nn.HeldBytes(m.Ctx.IterVariables()); len(held) != 1 || 2*held[dtypes.BFloat16] != nn.HeldBytes(ref.Ctx.IterVariables())[dtypes.Float32] {
		t.Fatalf("held bytes by dtype %v, want bfloat16 only, half of float32's %v", held, nn.HeldBytes(ref.Ctx.IterVariables()))
	}
	ids, mask := fx.ints(t, "inputs.input_ids"), fx.ints(t, "inputs.attention_mask")
	want, err := ref.Forward(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Forward(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "last_hidden_state", got.LastHidden, want.LastHidden, nil, 1e-4, 1e-4)
	allClose(t, "cls", got.CLS, want.CLS, nil, 1e-4, 1e-4)
	allClose(t, "mean_pooled", got.Mean, want.Mean, nil, 1e-4, 1e-4)
	for _, p := range []bert.Pooling{bert.PoolCLS, bert.PoolMean} {
		w, err := ref.Embed(ids, mask, p, true)
		if err != nil {
			t.Fatal(err)
		}
		g, err := m.Embed(ids, mask, p, true)
		if err != nil {
			t.Fatal(err)
		}
		allClose(t, string(p)+"_normalized", flat(g), flat(w), nil, 1e-5, 1e-4)
	}
}
