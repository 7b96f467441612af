package bert

import (
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/testutil/halfckpt"
)

// Weights held in their stored dtype: the bert-tiny fixture stored as BF16
// (halfckpt), held in bfloat16 (auto on the BF16 file, or bfloat16 cast of
// the F32 file), gives the outputs of the float32 path on that BF16 copy
// within the README's BERT tolerances, with every variable bfloat16 and
// half the bytes; auto on the F32 fixture stays float32, bit for bit.
func TestStoredDTypeParity(t *testing.T) {
	fx := loadFixture(t)
	be := testBackend(t)
	half := halfckpt.Write(t, fx.dir, safetensors.BF16)
	ref, err := Load(be, half)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Forward(fx.padded, fx.mask, fx.types)
	if err != nil {
		t.Fatal(err)
	}
	wantEmb, err := ref.Embed(fx.ids, nil, PoolMean, true)
	if err != nil {
		t.Fatal(err)
	}
	f32 := nn.HeldBytes(ref.Ctx.IterVariables())[dtypes.Float32]
	for _, tc := range []struct {
		name string
		dir  string
		dt   nn.DType
		held dtypes.DType
	}{
		{"auto on the BF16 file", half, nn.Auto, dtypes.BFloat16},
		{"bfloat16 cast of the F32 file", fx.dir, nn.BFloat16, dtypes.BFloat16},
		{"float32 of the BF16 file", half, nn.Float32, dtypes.Float32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := LoadAs(be, tc.dir, BERT, tc.dt)
			if err != nil {
				t.Fatal(err)
			}
			held := nn.HeldBytes(m.Ctx.IterVariables())
			if len(held) != 1 || held[tc.held] == 0 {
				t.Fatalf("held bytes by dtype %v, want only %s", held, tc.held)
			}
			if tc.held == dtypes.BFloat16 && 2*held[tc.held] != f32 {
				t.Fatalf("bfloat16 weights hold %d bytes, want half of float32's %d", held[tc.held], f32)
			}
			got, err := m.Forward(fx.padded, fx.mask, fx.types)
			if err != nil {
				t.Fatal(err)
			}
			allClose(t, "last_hidden_state", got.LastHidden, want.LastHidden, 1e-4, 1e-4)
			allClose(t, "cls", got.CLS, want.CLS, 1e-4, 1e-4)
			allClose(t, "mean_pooled", got.Mean, want.Mean, 1e-4, 1e-4)
			allClose(t, "pooler_output", got.Pooler, want.Pooler, 1e-4, 1e-4)
			emb, err := m.Embed(fx.ids, nil, PoolMean, true)
			if err != nil {
				t.Fatal(err)
			}
			allClose(t, "mean_normalized", slices.Concat(emb...), slices.Concat(wantEmb...), 1e-5, 1e-4)
		})
	}
	// auto keeps an F32 checkpoint float32: the F32 path's outputs exactly.
	m, err := LoadAs(be, fx.dir, BERT, nn.Auto)
	if err != nil {
		t.Fatal(err)
	}
	if held := nn.HeldBytes(m.Ctx.IterVariables()); len(held) != 1 || held[dtypes.Float32] == 0 {
		t.Fatalf("auto on the F32 fixture holds %v, want float32 only", held)
	}
	got, err := m.Forward(fx.padded, fx.mask, fx.types)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := fx.model.Forward(fx.padded, fx.mask, fx.types)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.LastHidden, orig.LastHidden) {
		t.Fatal("auto on the F32 fixture: last_hidden_state differs from Load's")
	}
	// Rounding to bfloat16 moved the outputs: the comparison above is not
	// between two float32 models.
	if slices.Equal(want.LastHidden, orig.LastHidden) {
		t.Fatal("the BF16 copy computes exactly what the F32 fixture does: it was not rounded")
	}
}

// A dtype the backend cannot hold and an unknown one are refused by name.
func TestLoadAsRefusesDType(t *testing.T) {
	fx := loadFixture(t)
	be := testBackend(t)
	if be.Capabilities().DTypes[dtypes.Float16] {
		t.Skip("backend has float16")
	}
	for _, dt := range []nn.DType{nn.Float16, "half"} {
		if _, err := LoadAs(be, fx.dir, BERT, dt); err == nil {
			t.Fatalf("LoadAs %q: no error", dt)
		} else {
			t.Log(err)
		}
	}
}
