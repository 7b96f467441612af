package bert

import (
	"bytes"
	"encoding/json"
	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/testutil/xlatest"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
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

// bertTiny is the BERT fixture directory under ../shared.
const bertTiny = "fixtures/bert-tiny"

type fixture struct {
	dir                  string
	ids, mask, types     [][]int
	padded               [][]int // ids as stored, [2,52] right-padded
	lengths              []int
	b, l, h              int
	tensors              map[string]*safetensors.Tensor
	model                *Model
	expectedFloat32Cache map[string][]float32
}

func loadFixture(t testing.TB) *fixture {
	t.Helper()
	dir := testutil.SharedPath(t, bertTiny)
	f, err := safetensors.ReadFile(filepath.Join(dir, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{dir: dir, tensors: f.Tensors, expectedFloat32Cache: map[string][]float32{}}
	ints := func(name string) [][]int {
		tt := f.Tensors[name]
		v, err := tt.Int64()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows := make([][]int, tt.Shape[0])
		for i := range rows {
			rows[i] = make([]int, tt.Shape[1])
			for j := range rows[i] {
				rows[i][j] = int(v[i*tt.Shape[1]+j])
			}
		}
		return rows
	}
	fx.padded, fx.mask, fx.types = ints("inputs.input_ids"), ints("inputs.attention_mask"), ints("inputs.token_type_ids")
	fx.b, fx.l = len(fx.padded), len(fx.padded[0])
	fx.h = f.Tensors["outputs.cls"].Shape[1]
	for i, row := range fx.mask {
		n := 0
		for _, m := range row {
			n += m
		}
		fx.lengths = append(fx.lengths, n)
		fx.ids = append(fx.ids, fx.padded[i][:n])
	}
	if fx.lengths[0] != 52 || fx.lengths[1] != 8 {
		t.Fatalf("fixture lengths %v, README says [52 8]", fx.lengths)
	}
	fx.model, err = Load(testBackend(t), dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	return fx
}

func (fx *fixture) want(t testing.TB, name string) []float32 {
	t.Helper()
	if v, ok := fx.expectedFloat32Cache[name]; ok {
		return v
	}
	tt, ok := fx.tensors[name]
	if !ok {
		t.Fatalf("expected tensor %q missing", name)
	}
	v, err := tt.Float32()
	if err != nil {
		t.Fatal(err)
	}
	fx.expectedFloat32Cache[name] = v
	return v
}

// allClose checks |got-want| <= atol + rtol*|want| element-wise (fixture README §1).
func allClose(t testing.TB, name string, got, want []float32, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) || d > atol+rtol*math.Abs(float64(want[i])) {
			t.Fatalf("%s[%d]: got %v want %v (|diff| %g > atol %g + rtol %g·|want|)", name, i, got[i], want[i], d, atol, rtol)
		}
		if d > worst {
			worst, at = d, i
		}
	}
	t.Logf("%s: max |diff| %.3g at %d", name, worst, at)
}

// realPositions keeps rows [b][:lengths[b]] of a [B, L, H] slice.
func realPositions(v []float32, l, h int, lengths []int) []float32 {
	var out []float32
	for b, n := range lengths {
		out = append(out, v[b*l*h:(b*l+n)*h]...)
	}
	return out
}

func TestFixtureForward(t *testing.T) {
	fx := loadFixture(t)
	m := fx.model
	if !m.HasPooler || m.HasClassifier {
		t.Fatalf("HasPooler %v HasClassifier %v, want true false", m.HasPooler, m.HasClassifier)
	}
	// Padded rows exactly as stored: padded positions must match HF math too.
	out, err := m.Forward(fx.padded, fx.mask, fx.types)
	if err != nil {
		t.Fatal(err)
	}
	if out.Batch != 2 || out.Length != 52 || out.Hidden != 64 {
		t.Fatalf("outputs [%d,%d,%d], want [2,52,64]", out.Batch, out.Length, out.Hidden)
	}
	allClose(t, "last_hidden_state", out.LastHidden, fx.want(t, "outputs.last_hidden_state"), 1e-4, 1e-4)
	allClose(t, "cls", out.CLS, fx.want(t, "outputs.cls"), 1e-4, 1e-4)
	allClose(t, "mean_pooled", out.Mean, fx.want(t, "outputs.mean_pooled"), 1e-4, 1e-4)
	allClose(t, "pooler_output", out.Pooler, fx.want(t, "outputs.pooler_output"), 1e-4, 1e-4)

	for _, tc := range []struct {
		p         Pooling
		normalize bool
		want      string
		atol      float64
	}{
		{PoolCLS, false, "outputs.cls", 1e-4},
		{PoolCLS, true, "outputs.cls_normalized", 1e-5},
		{PoolMean, false, "outputs.mean_pooled", 1e-4},
		{PoolMean, true, "outputs.mean_normalized", 1e-5},
	} {
		// Ragged rows without mask: the model pads them itself.
		emb, err := m.Embed(fx.ids, nil, tc.p, tc.normalize)
		if err != nil {
			t.Fatal(err)
		}
		allClose(t, tc.want, append(append([]float32{}, emb[0]...), emb[1]...), fx.want(t, tc.want), tc.atol, 1e-4)
	}
}

func TestFixtureIntermediates(t *testing.T) {
	fx := loadFixture(t)
	m := fx.model
	var names []string
	e, err := context.NewExec(m.Backend, m.Ctx, func(ctx *context.Context, ids, mask, types *graph.Node) []*graph.Node {
		var outs []*graph.Node
		names = names[:0]
		m.encoderGraph(ctx, ids, mask, types, func(name string, x *graph.Node) {
			names = append(names, name)
			outs = append(outs, x)
		})
		return outs
	})
	if err != nil {
		t.Fatal(err)
	}
	in, err := m.pad(fx.padded, fx.mask, fx.types)
	if err != nil {
		t.Fatal(err)
	}
	res, err := catch.Exec(e, in.ids, in.mask, in.typesIDs)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1+2*2 {
		t.Fatalf("traced %v", names)
	}
	for i, name := range names {
		got, err := rows(res[i], in.b, in.l)
		if err != nil {
			t.Fatal(err)
		}
		allClose(t, name, got, fx.want(t, "intermediates."+name), 1e-4, 1e-4)
	}
}

// Results for real tokens must not depend on padding: the short row alone
// (bucket [1,16]) equals the same row inside the fixture batch (bucket [2,64]).
func TestPaddingInvariance(t *testing.T) {
	fx := loadFixture(t)
	m := fx.model
	full, err := m.Forward(fx.ids, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := m.Forward(fx.ids[1:], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if alone.Length != 8 {
		t.Fatalf("alone.Length %d, want 8", alone.Length)
	}
	n := fx.lengths[1]
	allClose(t, "row1 real positions", alone.LastHidden, full.LastHidden[(1*52)*64:(1*52+n)*64], 1e-5, 1e-5)
	allClose(t, "row1 mean", alone.Mean, full.Mean[64:], 1e-5, 1e-5)
	allClose(t, "row1 pooler", alone.Pooler, full.Pooler[64:], 1e-5, 1e-5)
	// And both agree with the fixture on real positions.
	allClose(t, "real positions vs fixture", realPositions(full.LastHidden, 52, 64, fx.lengths),
		realPositions(fx.want(t, "outputs.last_hidden_state"), 52, 64, fx.lengths), 1e-4, 1e-4)
}

func TestSaveReproducesFixtureBytes(t *testing.T) {
	fx := loadFixture(t)
	out := t.TempDir()
	if err := fx.model.Save(out); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(out, WeightsFile))
	want, _ := os.ReadFile(filepath.Join(fx.dir, WeightsFile))
	if !bytes.Equal(got, want) {
		t.Fatalf("Load→Save model.safetensors differs from fixture (%d vs %d bytes)", len(got), len(want))
	}
	// config.json too: known keys in HF order, unknown keys (torch_dtype) kept.
	gotCfg, _ := os.ReadFile(filepath.Join(out, ConfigFile))
	wantCfg, _ := os.ReadFile(filepath.Join(fx.dir, ConfigFile))
	if !bytes.Equal(gotCfg, wantCfg) {
		t.Fatalf("saved config.json:\n%s\nwant the fixture's:\n%s", gotCfg, wantCfg)
	}
}

// writeCheckpoint writes tensors and a config (fixture config with edits).
func writeCheckpoint(t *testing.T, dir string, ts map[string]*safetensors.Tensor, cfgEdit func(string) string) {
	t.Helper()
	var list []*safetensors.Tensor
	for name, tt := range ts {
		c := *tt
		c.Name = name
		list = append(list, &c)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), list, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(testutil.SharedPath(t, bertTiny), ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	s := string(cfg)
	if cfgEdit != nil {
		s = cfgEdit(s)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fixtureWeights(t *testing.T) map[string]*safetensors.Tensor {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join(testutil.SharedPath(t, bertTiny), WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	return f.Tensors
}

// A BertForSequenceClassification layout ("bert." prefix + classifier,
// num_labels 1 as MedCPT's cross-encoder) loads to the same encoder, and
// Score equals classifier(pooler) computed here by hand from Forward.
func TestPrefixedCheckpointWithClassifier(t *testing.T) {
	fx := loadFixture(t)
	ws := map[string]*safetensors.Tensor{}
	for name, tt := range fixtureWeights(t) {
		ws[Prefix+name] = tt
	}
	w := make([]float32, 64)
	for i := range w {
		w[i] = float32(i%7-3) / 10
	}
	ws["classifier.weight"] = safetensors.FromFloat32("", []int{1, 64}, w)
	ws["classifier.bias"] = safetensors.FromFloat32("", []int{1}, []float32{0.5})
	ws["cls.predictions.bias"] = safetensors.FromFloat32("", []int{1500}, make([]float32, 1500)) // ignored on purpose
	dir := t.TempDir()
	writeCheckpoint(t, dir, ws, func(s string) string {
		s = strings.Replace(s, `"BertModel"`, `"BertForSequenceClassification"`, 1)
		return strings.TrimSuffix(s, "\n}\n") + ",\n  \"id2label\": {\"0\": \"LABEL_0\"},\n  \"label2id\": {\"LABEL_0\": 0}\n}\n"
	})
	m, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !m.HasClassifier || !m.HasPooler || m.Config.NumLabels != 1 {
		t.Fatalf("HasClassifier %v HasPooler %v NumLabels %d", m.HasClassifier, m.HasPooler, m.Config.NumLabels)
	}
	out, err := m.Forward(fx.padded, fx.mask, fx.types)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "prefixed last_hidden_state", out.LastHidden, fx.want(t, "outputs.last_hidden_state"), 1e-4, 1e-4)
	allClose(t, "prefixed pooler_output", out.Pooler, fx.want(t, "outputs.pooler_output"), 1e-4, 1e-4)

	scores, err := m.Score(fx.ids, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 2)
	for b := range want {
		s := 0.5
		for i := 0; i < 64; i++ {
			s += float64(w[i]) * float64(fx.want(t, "outputs.pooler_output")[b*64+i])
		}
		want[b] = float32(s)
	}
	allClose(t, "score", scores, want, 1e-4, 1e-4)

	// Save writes the BertForSequenceClassification layout; Save→Load→Save is byte-identical.
	d1, d2 := t.TempDir(), t.TempDir()
	if err := m.Save(d1); err != nil {
		t.Fatal(err)
	}
	f1, err := safetensors.ReadFile(filepath.Join(d1, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f1.Tensors["bert.pooler.dense.weight"]; !ok || f1.Tensors["classifier.bias"] == nil || len(f1.Tensors) != 41 {
		t.Fatalf("saved names %v", f1.Names())
	}
	m2, err := Load(testBackend(t), d1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Save(d2); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, d1, d2)
	s2, err := m2.Score(fx.ids, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "reloaded score", s2, scores, 0, 0)
}

func sameFiles(t *testing.T, d1, d2 string) {
	t.Helper()
	for _, name := range []string{WeightsFile, ConfigFile} {
		a, err1 := os.ReadFile(filepath.Join(d1, name))
		b, err2 := os.ReadFile(filepath.Join(d2, name))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("%s differs after Save→Load→Save (%d vs %d bytes)", name, len(a), len(b))
		}
	}
}

func TestLoadErrors(t *testing.T) {
	testutil.SharedPath(t, bertTiny)
	f32 := func(shape ...int) *safetensors.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return safetensors.FromFloat32("", shape, make([]float32, n))
	}
	for _, tc := range []struct {
		name  string
		edit  func(map[string]*safetensors.Tensor)
		cfg   func(string) string
		wants []string
	}{
		{"missing tensor", func(w map[string]*safetensors.Tensor) { delete(w, "encoder.layer.1.output.dense.bias") },
			nil, []string{"model.safetensors", `missing tensor "encoder.layer.1.output.dense.bias"`, "[64]"}},
		{"unexpected tensor", func(w map[string]*safetensors.Tensor) { w["encoder.layer.2.output.dense.bias"] = f32(64) },
			nil, []string{"model.safetensors", `unexpected tensor "encoder.layer.2.output.dense.bias"`}},
		{"shape disagrees with config", nil,
			func(s string) string {
				return strings.Replace(s, `"intermediate_size": 128`, `"intermediate_size": 96`, 1)
			},
			[]string{"model.safetensors", `"encoder.layer.0.intermediate.dense.weight"`, "[128 64]", "[96 64]", "config.json"}},
		{"vocab disagrees", nil,
			func(s string) string { return strings.Replace(s, `"vocab_size": 1500`, `"vocab_size": 1600`, 1) },
			[]string{`"embeddings.word_embeddings.weight"`, "[1500 64]", "[1600 64]"}},
		{"partial pooler", func(w map[string]*safetensors.Tensor) { delete(w, "pooler.dense.bias") },
			nil, []string{`missing tensor "pooler.dense.bias"`}},
		{"classifier of wrong width", func(w map[string]*safetensors.Tensor) {
			w["classifier.weight"], w["classifier.bias"] = f32(3, 64), f32(3)
		}, nil, []string{`"classifier.weight"`, "[3 64]", "[2 64]"}},
		{"classifier without pooler", func(w map[string]*safetensors.Tensor) {
			delete(w, "pooler.dense.weight")
			delete(w, "pooler.dense.bias")
			w["classifier.weight"], w["classifier.bias"] = f32(2, 64), f32(2)
		}, nil, []string{"model.safetensors", `"pooler.dense.weight"`}},
		{"int64 weight", func(w map[string]*safetensors.Tensor) {
			w["pooler.dense.bias"] = safetensors.FromInt64("", []int{64}, make([]int64, 64))
		}, nil, []string{`"pooler.dense.bias"`}},
		{"unsupported activation", nil,
			func(s string) string {
				return strings.Replace(s, `"hidden_act": "gelu"`, `"hidden_act": "gelu_new"`, 1)
			},
			[]string{"config.json", `"hidden_act"`, "gelu_new"}},
		{"ambiguous prefix", func(w map[string]*safetensors.Tensor) { w["bert.pooler.dense.bias"] = w["pooler.dense.bias"] },
			nil, []string{`"pooler.dense.bias"`, `"bert.pooler.dense.bias"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := fixtureWeights(t)
			if tc.edit != nil {
				tc.edit(ws)
			}
			dir := t.TempDir()
			writeCheckpoint(t, dir, ws, tc.cfg)
			_, err := Load(testBackend(t), dir)
			if err == nil {
				t.Fatal("Load succeeded, want error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	t.Run("truncated file", func(t *testing.T) {
		dir := t.TempDir()
		writeCheckpoint(t, dir, fixtureWeights(t), nil)
		p := filepath.Join(dir, WeightsFile)
		b, _ := os.ReadFile(p)
		if err := os.WriteFile(p, b[:len(b)-100], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(testBackend(t), dir); err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("error %v does not name %s", err, p)
		}
	})
}

func TestNewRandomInit(t *testing.T) {
	cfg := TinyConfig(1000)
	cfg.PadTokenID = 3
	be := testBackend(t)
	m, err := NewRandom(be, cfg, true, 7)
	if err != nil {
		t.Fatal(err)
	}
	get := func(m *Model, name string) []float32 {
		scope, v := scopeAndName(name)
		vr := m.Ctx.GetVariableByScopeAndName(scope, v)
		if vr == nil {
			t.Fatalf("no variable for %s", name)
		}
		return tensors.MustCopyFlatData[float32](vr.MustValue())
	}
	word := get(m, "embeddings.word_embeddings.weight")
	for i, v := range word[3*128 : 4*128] {
		if v != 0 {
			t.Fatalf("padding row [3][%d] = %v, want 0", i, v)
		}
	}
	var sum, sq float64
	for _, v := range word {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	n := float64(len(word) - 128)
	mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
	if math.Abs(mean) > 0.001 || math.Abs(std-0.02) > 0.0005 { // 127872 draws: sd(std) ≈ 4e-5
		t.Fatalf("word embeddings mean %g std %g, want N(0, 0.02)", mean, std)
	}
	for name, want := range map[string]float32{
		"encoder.layer.1.output.LayerNorm.weight": 1, "encoder.layer.1.output.LayerNorm.bias": 0,
		"encoder.layer.0.attention.self.key.bias": 0, "classifier.bias": 0, "pooler.dense.bias": 0,
	} {
		for _, v := range get(m, name) {
			if v != want {
				t.Fatalf("%s has %v, want all %v", name, v, want)
			}
		}
	}
	if len(get(m, "classifier.weight")) != 2*128 {
		t.Fatal("classifier.weight not [2,128]")
	}
	same, _ := NewRandom(be, cfg, true, 7)
	other, _ := NewRandom(be, cfg, true, 8)
	a, b, c := get(m, "encoder.layer.0.intermediate.dense.weight"), get(same, "encoder.layer.0.intermediate.dense.weight"),
		get(other, "encoder.layer.0.intermediate.dense.weight")
	if !slicesEqual(a, b) || slicesEqual(a, c) {
		t.Fatal("same seed must give the same weights, another seed different ones")
	}
	// Save→Load→Save of a random model with classifier is byte-identical.
	d1, d2 := t.TempDir(), t.TempDir()
	if err := m.Save(d1); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(be, d1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Save(d2); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, d1, d2)
	if _, err := NewRandom(be, Config{}, false, 1); err == nil {
		t.Fatal("NewRandom(zero Config) succeeded")
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// PoolGraph and geluErf on hand-computed values.
func TestPoolAndGeluByHand(t *testing.T) {
	be := testBackend(t)
	hidden := [][][]float32{{{3, 4}, {1, 0}, {100, 100}}, {{0, 0}, {5, 5}, {7, 7}}}
	mask := [][]int32{{1, 1, 0}, {1, 0, 0}}
	for _, tc := range []struct {
		p         Pooling
		normalize bool
		want      []float32
	}{
		{PoolCLS, false, []float32{3, 4, 0, 0}},
		{PoolCLS, true, []float32{0.6, 0.8, 0, 0}}, // zero vector stays 0 (norm floored at 1e-12)
		{PoolMean, false, []float32{2, 2, 0, 0}},   // padding (100,100) and (5,5),(7,7) excluded
		{PoolMean, true, []float32{float32(1 / math.Sqrt2), float32(1 / math.Sqrt2), 0, 0}},
	} {
		got, err := graph.ExecOnce(be, func(h, m *graph.Node) *graph.Node { return PoolGraph(h, m, tc.p, tc.normalize) }, hidden, mask)
		if err != nil {
			t.Fatal(err)
		}
		allClose(t, string(tc.p), tensors.MustCopyFlatData[float32](got), tc.want, 1e-7, 1e-6)
	}
	// GELU(x) = 0.5x(1+erf(x/√2)): Φ(1) = 0.841344746, Φ(2) = 0.977249868, Φ(-1) = 0.158655254.
	got, err := graph.ExecOnce(be, geluErf, []float32{-1, 0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	allClose(t, "gelu", tensors.MustCopyFlatData[float32](got), []float32{-0.158655254, 0, 0.841344746, 1.954499736}, 1e-6, 1e-6)
}

func TestBuckets(t *testing.T) {
	for _, tc := range []struct{ n, max, want int }{
		{1, 512, 16}, {16, 512, 16}, {17, 512, 32}, {52, 512, 64}, {128, 512, 128},
		{129, 512, 192}, {500, 512, 512}, {52, 60, 60}, {8, 10, 10},
	} {
		if got := BucketLength(tc.n, tc.max); got != tc.want {
			t.Errorf("BucketLength(%d, %d) = %d, want %d", tc.n, tc.max, got, tc.want)
		}
	}
	for _, tc := range []struct{ n, want int }{{1, 1}, {2, 2}, {3, 4}, {33, 64}, {64, 64}, {65, 128}, {130, 192}} {
		if got := BucketBatch(tc.n); got != tc.want {
			t.Errorf("BucketBatch(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestForwardInputErrors(t *testing.T) {
	be := testBackend(t)
	cfg := TinyConfig(100)
	cfg.MaxPositionEmbeddings = 20
	m, err := NewRandom(be, cfg, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	long := make([]int, 21)
	for _, tc := range []struct {
		name              string
		ids, mask, typeID [][]int
		want              string
	}{
		{"empty", nil, nil, nil, "empty batch"},
		{"id outside vocab", [][]int{{2, 100}}, nil, nil, "row 0, position 1: token id 100"},
		{"negative id", [][]int{{2, 3}, {-1}}, nil, nil, "row 1, position 0: token id -1"},
		{"too long", [][]int{long}, nil, nil, "length 21 exceeds 20 (max_position_embeddings 20)"},
		{"mask rows", [][]int{{2}}, [][]int{{1}, {1}}, nil, "mask has 2 rows"},
		{"mask length", [][]int{{2, 3}}, [][]int{{1}}, nil, "row 0: mask length 1"},
		{"mask value", [][]int{{2, 3}}, [][]int{{1, 2}}, nil, "mask value 2"},
		{"type id", [][]int{{2, 3}}, nil, [][]int{{0, 2}}, "token type 2"},
	} {
		if _, err := m.Forward(tc.ids, tc.mask, tc.typeID); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want mention of %q", tc.name, err, tc.want)
		}
	}
	if _, err := m.Score([][]int{{2, 3}}, nil, nil); err == nil || !strings.Contains(err.Error(), "no classifier") {
		t.Errorf("Score without classifier: %v", err)
	}
	if _, err := m.Embed([][]int{{2, 3}}, nil, "max", false); err == nil || !strings.Contains(err.Error(), `"max"`) {
		t.Errorf("Embed with unknown pooling: %v", err)
	}
}

func BenchmarkEmbed(b *testing.B) {
	be := testBackend(b)
	m, err := NewRandom(be, TinyConfig(30522), false, 1)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([][]int, 32)
	for i := range ids {
		ids[i] = make([]int, 64)
		for j := range ids[i] {
			ids[i][j] = 1000 + (i*64+j)%20000
		}
	}
	if _, err := m.Embed(ids, nil, PoolMean, true); err != nil { // compile outside the timer
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := m.Embed(ids, nil, PoolMean, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*32*64)/b.Elapsed().Seconds(), "tokens/s")
}

func TestConfigJSON(t *testing.T) {
	for _, tc := range []struct {
		name, in      string
		wantLabels    int
		wantExtraKeys []string
		wantDropout   float64
	}{
		{"defaults", `{"vocab_size": 10}`, 2, nil, 0.1},
		{"id2label", `{"vocab_size": 10, "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}`, 1, []string{"id2label", "label2id"}, 0.1},
		{"num_labels", `{"vocab_size": 10, "num_labels": 3, "torch_dtype": "float32"}`, 3, []string{"num_labels", "torch_dtype"}, 0.1},
		{"classifier_dropout", `{"vocab_size": 10, "hidden_dropout_prob": 0.2, "classifier_dropout": 0.3}`, 2, []string{"classifier_dropout"}, 0.3},
		{"null classifier_dropout", `{"vocab_size": 10, "hidden_dropout_prob": 0.2, "classifier_dropout": null}`, 2, []string{"classifier_dropout"}, 0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
				t.Fatal(err)
			}
			if c.VocabSize != 10 || c.HiddenSize != 768 || c.LayerNormEps != 1e-12 || c.HiddenAct != "gelu" {
				t.Fatalf("defaults not applied: %+v", c)
			}
			if c.NumLabels != tc.wantLabels || c.ClassifierDropout() != tc.wantDropout {
				t.Fatalf("NumLabels %d ClassifierDropout %g, want %d %g", c.NumLabels, c.ClassifierDropout(), tc.wantLabels, tc.wantDropout)
			}
			if len(c.Extra) != len(tc.wantExtraKeys) {
				t.Fatalf("Extra %v, want keys %v", c.Extra, tc.wantExtraKeys)
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var back Config
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			b2, _ := json.Marshal(back)
			if !bytes.Equal(b, b2) || back.NumLabels != c.NumLabels {
				t.Fatalf("round trip changed config:\n%s\n%s", b, b2)
			}
		})
	}
	// A config whose NumLabels was changed gets a matching id2label.
	c := TinyConfig(10)
	c.NumLabels = 1
	b, _ := json.Marshal(c)
	if !strings.Contains(string(b), `"id2label":{"0":"LABEL_0"}`) {
		t.Fatalf("NumLabels 1 marshalled as %s", b)
	}
	var back Config
	if err := json.Unmarshal(b, &back); err != nil || back.NumLabels != 1 {
		t.Fatalf("NumLabels back %d, err %v", back.NumLabels, err)
	}
}

// TestXLAFixtureParity runs the fixture checks through XLA when a PJRT plugin
// is installed (skipped otherwise).
func TestXLAFixtureParity(t *testing.T) {
	xlatest.RunXLAParity(t, "^TestFixture")
}
