package xlmr

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/safetensors"
)

func testBackend(t testing.TB) backends.Backend {
	t.Helper()
	b, err := backend.New(os.Getenv(backend.TestEnvVar)) // "" = pure Go
	if err != nil {
		t.Fatalf("backend: %v", err)
	}
	return b
}

type fixture struct {
	dir     string
	tensors map[string]*safetensors.Tensor
	model   *bert.Model
}

func loadFixture(t testing.TB) *fixture {
	t.Helper()
	dir := testutil.SharedPath(t, "fixtures/xlmr-tiny")
	f, err := safetensors.ReadFile(filepath.Join(dir, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	return &fixture{dir: dir, tensors: f.Tensors, model: m}
}

func (fx *fixture) float(t testing.TB, name string) []float32 {
	t.Helper()
	tt, ok := fx.tensors[name]
	if !ok {
		t.Fatalf("expected tensor %q missing", name)
	}
	v, err := tt.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ints returns an I64 [B, L] tensor as rows.
func (fx *fixture) ints(t testing.TB, name string) [][]int {
	t.Helper()
	tt, ok := fx.tensors[name]
	if !ok {
		t.Fatalf("expected tensor %q missing", name)
	}
	v, err := tt.Int64()
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]int, tt.Shape[0])
	for i := range rows {
		for j := 0; j < tt.Shape[1]; j++ {
			rows[i] = append(rows[i], int(v[i*tt.Shape[1]+j]))
		}
	}
	return rows
}

// allClose checks |got-want| <= atol + rtol·|want| element-wise where keep
// (nil = everywhere) is true (fixture README §1).
func allClose(t testing.TB, name string, got, want []float32, keep []bool, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		if keep != nil && !keep[i] {
			continue
		}
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) || d > atol+rtol*math.Abs(float64(want[i])) {
			t.Fatalf("%s[%d]: got %v want %v (|diff| %g > atol %g + rtol %g·|want|)", name, i, got[i], want[i], d, atol, rtol)
		}
		worst = max(worst, d)
	}
	t.Logf("%s: max |diff| %.3g", name, worst)
}

func flat(rows [][]float32) []float32 { return slices.Concat(rows...) }

func TestConfig(t *testing.T) {
	fx := loadFixture(t)
	c := fx.model.Config
	if c.LayerNormEps != 1e-5 || c.PadTokenID != 1 || c.TypeVocabSize != 1 || fx.model.MaxLength() != 64 {
		t.Fatalf("eps %g pad %d types %d max length %d; want 1e-5, 1, 1, 64 (66 positions from 2)",
			c.LayerNormEps, c.PadTokenID, c.TypeVocabSize, fx.model.MaxLength())
	}
	if fx.model.ModelType() != ModelType || !fx.model.HasPooler {
		t.Fatalf("model type %q pooler %v", fx.model.ModelType(), fx.model.HasPooler)
	}
}

// TestPositionIDs checks the positions of the right-padded, left-padded and
// full inputs against intermediates.*position_ids exactly.
func TestPositionIDs(t *testing.T) {
	fx := loadFixture(t)
	m := fx.model
	for _, tc := range []struct{ ids, want string }{
		{"inputs.input_ids", "intermediates.position_ids"},
		{"inputs.left_input_ids", "intermediates.left_position_ids"},
		{"inputs.full_input_ids", "intermediates.full_position_ids"},
	} {
		ids := fx.ints(t, tc.ids)
		e, err := context.NewExec(m.Backend, m.Ctx, func(ctx *context.Context, ids *graph.Node) *graph.Node {
			return PositionIDs(m.Config, ids)
		})
		if err != nil {
			t.Fatal(err)
		}
		flatIDs := make([]int64, 0)
		for _, r := range ids {
			for _, v := range r {
				flatIDs = append(flatIDs, int64(v))
			}
		}
		res, err := catch.Exec(e, tensors.FromFlatDataAndDimensions(flatIDs, len(ids), len(ids[0])))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tensors.CopyFlatData[int32](res[0])
		if err != nil {
			t.Fatal(err)
		}
		want := fx.ints(t, tc.want)
		for i, w := range slices.Concat(want...) {
			if int(got[i]) != w {
				t.Fatalf("%s[%d]: position %d, want %d", tc.want, i, got[i], w)
			}
		}
	}
}

func TestFixtureForward(t *testing.T) {
	fx := loadFixture(t)
	m := fx.model
	ids, mask := fx.ints(t, "inputs.input_ids"), fx.ints(t, "inputs.attention_mask")
	out, err := m.Forward(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Padded positions included: their ids are <pad>, so they take position 1 as in HF.
	allClose(t, "last_hidden_state", out.LastHidden, fx.float(t, "outputs.last_hidden_state"), nil, 1e-4, 1e-4)
	allClose(t, "cls", out.CLS, fx.float(t, "outputs.cls"), nil, 1e-4, 1e-4)
	allClose(t, "mean_pooled", out.Mean, fx.float(t, "outputs.mean_pooled"), nil, 1e-4, 1e-4)
	allClose(t, "pooler_output", out.Pooler, fx.float(t, "outputs.pooler_output"), nil, 1e-4, 1e-4)

	// Ragged rows without mask, as the encoders call Embed: bge-m3 (CLS) and mE5 (mean) pooling.
	var ragged [][]int
	for i, r := range ids {
		ragged = append(ragged, r[:slices.Index(append(mask[i], 0), 0)])
	}
	for _, tc := range []struct {
		p         bert.Pooling
		normalize bool
		want      string
		atol      float64
	}{
		{bert.PoolCLS, false, "outputs.cls", 1e-4},
		{bert.PoolCLS, true, "outputs.cls_normalized", 1e-5},
		{bert.PoolMean, false, "outputs.mean_pooled", 1e-4},
		{bert.PoolMean, true, "outputs.mean_normalized", 1e-5},
	} {
		emb, err := m.Embed(ragged, nil, tc.p, tc.normalize)
		if err != nil {
			t.Fatal(err)
		}
		allClose(t, tc.want, flat(emb), fx.float(t, tc.want), nil, tc.atol, 1e-4)
	}

	// The full 64-token input: every position 2..65 of the table.
	full := fx.ints(t, "inputs.full_input_ids")
	out, err = m.Forward(full, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "full_last_hidden_state", out.LastHidden, fx.float(t, "outputs.full_last_hidden_state"), nil, 1e-4, 1e-4)
	if _, err := m.Forward([][]int{append(full[0], 5)}, nil, nil); err == nil {
		t.Fatal("a 65-token row (positions past max_position_embeddings 66) was accepted")
	}
}

// TestFixtureLeftPadding compares the left-padded batch where its mask is 1.
func TestFixtureLeftPadding(t *testing.T) {
	fx := loadFixture(t)
	ids, mask := fx.ints(t, "inputs.left_input_ids"), fx.ints(t, "inputs.left_attention_mask")
	out, err := fx.model.Forward(ids, mask, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := out.Hidden
	keep := make([]bool, len(out.LastHidden))
	for i, v := range slices.Concat(mask...) {
		for j := 0; j < h; j++ {
			keep[i*h+j] = v == 1
		}
	}
	allClose(t, "left_last_hidden_state (mask 1)", out.LastHidden, fx.float(t, "outputs.left_last_hidden_state"), keep, 1e-4, 1e-4)
}

func TestFixtureIntermediates(t *testing.T) {
	fx := loadFixture(t)
	m := fx.model
	var names []string
	e, err := context.NewExec(m.Backend, m.Ctx, func(ctx *context.Context, ids, mask *graph.Node) []*graph.Node {
		var outs []*graph.Node
		names = names[:0]
		m.EncoderGraphTraced(ctx, ids, mask, nil, func(name string, x *graph.Node) {
			names = append(names, name)
			outs = append(outs, x)
		})
		return outs
	})
	if err != nil {
		t.Fatal(err)
	}
	ids, mask := fx.ints(t, "inputs.input_ids"), fx.ints(t, "inputs.attention_mask")
	b, l := len(ids), len(ids[0])
	fi, fm := make([]int32, 0, b*l), make([]int32, 0, b*l)
	for i := range ids {
		for j := range ids[i] {
			fi, fm = append(fi, int32(ids[i][j])), append(fm, int32(mask[i][j]))
		}
	}
	res, err := catch.Exec(e, tensors.FromFlatDataAndDimensions(fi, b, l), tensors.FromFlatDataAndDimensions(fm, b, l))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"embeddings", "layer.0.attention_output", "layer.0.output", "layer.1.attention_output", "layer.1.output"}
	if !slices.Equal(names, want) {
		t.Fatalf("traced %v, want %v", names, want)
	}
	for i, name := range names {
		got, err := tensors.CopyFlatData[float32](res[i])
		if err != nil {
			t.Fatal(err)
		}
		allClose(t, name, got, fx.float(t, "intermediates."+name), nil, 1e-4, 1e-4)
	}
}

// TestFixtureCatchesMistakes shows the parity check fails on the two
// mistakes README §9.1 names: BERT's arange positions and eps 1e-12 instead
// of config.json's 1e-5 (the latter only 1.2× over the limit).
func TestFixtureCatchesMistakes(t *testing.T) {
	fx := loadFixture(t)
	ids, mask := fx.ints(t, "inputs.input_ids"), fx.ints(t, "inputs.attention_mask")
	want := fx.float(t, "outputs.last_hidden_state")
	for _, tc := range []struct {
		name   string
		mutate func(m *bert.Model)
	}{
		{"arange positions", func(m *bert.Model) { m.Arch.PositionIDs = nil }},
		{"eps 1e-12", func(m *bert.Model) { m.Config.LayerNormEps = 1e-12 }},
	} {
		m, err := Load(testBackend(t), fx.dir)
		if err != nil {
			t.Fatal(err)
		}
		tc.mutate(m)
		out, err := m.Forward(ids, mask, nil)
		if err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for i, g := range out.LastHidden {
			worst = max(worst, math.Abs(float64(g)-float64(want[i]))/(1e-4+1e-4*math.Abs(float64(want[i]))))
		}
		if worst <= 1 {
			t.Errorf("%s: worst |diff|/tolerance %.3g, want > 1 (the parity check would not catch it)", tc.name, worst)
		}
		t.Logf("%s: worst |diff|/tolerance %.3g", tc.name, worst)
	}
}
