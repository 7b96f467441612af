package t5

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/ragforge/ragforge/models/testutil/xlatest"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/safetensors"
)

var fixtureNames = []string{"t5-flan-tiny", "t5-v1_0-tiny", "t5-flan-inner"}

// testBackend is simplego with ops run sequentially: in GoMLX v0.26 the default
// parallel op scheduling can deadlock on machines with few CPUs (parallel ops
// hold every worker slot while their DotGenerals wait for one).
func testBackend(t testing.TB) backends.Backend {
	t.Helper()
	b, err := backend.New(os.Getenv(backend.TestEnvVar)) // "" = pure Go
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type fixture struct {
	dir      string
	expected map[string]*safetensors.Tensor
	meta     map[string]any
}

var (
	modelCacheMu sync.Mutex
	modelCache   = map[string]*Model{}
)

// loadFixture loads a fixture's expected tensors and its model (shared across tests; read-only use).
func loadFixture(t *testing.T, name string) (*fixture, *Model) {
	t.Helper()
	dir := testutil.SharedPath(t, filepath.Join("fixtures", name))
	f, err := safetensors.ReadFile(filepath.Join(dir, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{dir: dir, expected: f.Tensors}
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &fx.meta); err != nil {
		t.Fatal(err)
	}
	modelCacheMu.Lock()
	defer modelCacheMu.Unlock()
	m, ok := modelCache[name]
	if !ok {
		m, err = Load(testBackend(t), dir)
		if err != nil {
			t.Fatalf("Load(%s): %v", dir, err)
		}
		modelCache[name] = m
	}
	return fx, m
}

func (fx *fixture) floats(t *testing.T, name string) ([]float32, []int) {
	t.Helper()
	x, ok := fx.expected[name]
	if !ok {
		t.Fatalf("%s: tensor %q missing", fx.dir, name)
	}
	v, err := x.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v, x.Shape
}

func (fx *fixture) ints(t *testing.T, name string) [][]int {
	t.Helper()
	x, ok := fx.expected[name]
	if !ok {
		t.Fatalf("%s: tensor %q missing", fx.dir, name)
	}
	v, err := x.Int64()
	if err != nil {
		t.Fatal(err)
	}
	cols := x.Shape[len(x.Shape)-1]
	var out [][]int
	for r := 0; r < len(v)/cols; r++ {
		row := make([]int, cols)
		for c := range cols {
			row[c] = int(v[r*cols+c])
		}
		out = append(out, row)
	}
	return out
}

// allClose checks |got-want| <= atol + rtol*|want| element-wise.
func allClose(t *testing.T, what string, got, want []float32, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at, bad := 0.0, -1, 0
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) || d > atol+rtol*math.Abs(float64(want[i])) {
			bad++
			if at < 0 || d > worst || math.IsNaN(d) {
				worst, at = d, i
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d/%d values out of tolerance (atol %g rtol %g); worst at %d: got %g want %g",
			what, bad, len(got), atol, rtol, at, got[at], want[at])
	}
}

func flat(t *testing.T, x *tensors.Tensor) []float32 {
	t.Helper()
	v, err := tensors.CopyFlatData[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestRelativePositionBucketHand(t *testing.T) {
	// Hand values from fixtures/README.md §3 (32 buckets, max distance 128).
	cases := []struct {
		bidir bool
		rel   []int
		want  []int
	}{
		{true, []int{0, 1, -1, 7, 8, 12, 16, 32, 64, 128, 500, -128, -500}, []int{0, 17, 1, 23, 24, 25, 26, 28, 30, 31, 31, 15, 15}},
		{false, []int{5, 1, 0, -1, -15, -16, -20, -32, -64, -128, -1000}, []int{0, 0, 0, 1, 15, 16, 17, 21, 26, 31, 31}},
	}
	for _, c := range cases {
		got := RelativePositionBucket(c.rel, c.bidir, 32, 128)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("bidirectional=%v rel %v: got %v want %v", c.bidir, c.rel, got, c.want)
		}
	}
}

func TestRelativePositionBucketFixture(t *testing.T) {
	fx, _ := loadFixture(t, "t5-flan-tiny")
	grids := []struct {
		name          string
		q, k, offset  int
		bidirectional bool
	}{
		{"buckets.bidirectional_20x20", 20, 20, 0, true},
		{"buckets.unidirectional_20x20", 20, 20, 0, false},
		{"buckets.bidirectional_1x300", 1, 300, 0, true},
		{"buckets.bidirectional_1x300_q299", 1, 300, 299, true},
		{"buckets.unidirectional_1x300_q299", 1, 300, 299, false},
	}
	for _, g := range grids {
		got := bucketGrid(g.q, g.k, g.offset, g.bidirectional, 32, 128)
		want := fx.ints(t, g.name)
		var w []int
		for _, r := range want {
			w = append(w, r...)
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s: got %v\nwant %v", g.name, got, w)
		}
	}
	rel := fx.ints(t, "buckets.relative_positions_range")[0]
	for _, c := range []struct {
		name  string
		bidir bool
	}{{"buckets.bidirectional_range", true}, {"buckets.unidirectional_range", false}} {
		got := RelativePositionBucket(rel, c.bidir, 32, 128)
		if want := fx.ints(t, c.name)[0]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v\nwant %v", c.name, got, want)
		}
	}
}

// debugForward returns the fixture intermediates computed by our graph.
func debugForward(t *testing.T, m *Model, ids, mask, dec [][]int) map[string][]float32 {
	t.Helper()
	L, T := len(ids[0]), len(dec[0])
	var names []string
	fn := func(ctx *context.Context, ids, mask, dec *graph.Node) []*graph.Node {
		g := ids.Graph()
		encOut, encBlocks := m.encoderStack(ctx, ids, mask, true)
		_, decBlocks := m.decoderStack(ctx, dec, encOut, mask, true)
		names = []string{"encoder.embeddings", "decoder.embeddings", "encoder.position_bias", "decoder.position_bias"}
		out := []*graph.Node{embed(ctx, ids), embed(ctx, dec),
			m.positionBias(weight(ctx, g, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"), L, L, 0, true),
			m.positionBias(weight(ctx, g, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"), T, T, 0, false)}
		for i, b := range encBlocks {
			names = append(names, fmt.Sprintf("encoder.block.%d.output", i))
			out = append(out, b)
		}
		for i, b := range decBlocks {
			names = append(names, fmt.Sprintf("decoder.block.%d.output", i))
			out = append(out, b)
		}
		return out
	}
	e, err := context.NewExec(m.Backend, m.Ctx, fn)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Exec(intTensor(ids, L, 0), intTensor(mask, L, 0), intTensor(dec, T, 0))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]float32{}
	for i, n := range names {
		got["intermediates."+n] = flat(t, res[i])
	}
	return got
}

func TestFixtureForward(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, m := loadFixture(t, name)
			ids := fx.ints(t, "inputs.input_ids")
			mask := fx.ints(t, "inputs.attention_mask")
			dec := fx.ints(t, "inputs.decoder_input_ids")
			labels := fx.ints(t, "inputs.labels")
			if got := ShiftRight(labels, 0, 0); fmt.Sprint(got) != fmt.Sprint(dec) {
				t.Errorf("ShiftRight(labels) = %v, want decoder_input_ids %v", got, dec)
			}
			enc, decH, logits, err := m.Forward(ids, mask, dec)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name       string
				got        *tensors.Tensor
				atol, rtol float64
			}{
				{"outputs.encoder_last_hidden_state", enc, 1e-4, 1e-4},
				{"outputs.decoder_last_hidden_state", decH, 1e-4, 1e-4},
				{"outputs.logits", logits, 1e-3, 1e-4},
			} {
				want, shape := fx.floats(t, c.name)
				if fmt.Sprint(c.got.Shape().Dimensions) != fmt.Sprint(shape) {
					t.Errorf("%s: shape %v, want %v", c.name, c.got.Shape().Dimensions, shape)
					continue
				}
				allClose(t, c.name, flat(t, c.got), want, c.atol, c.rtol)
			}
			loss, err := m.Loss(ids, mask, labels)
			if err != nil {
				t.Fatal(err)
			}
			wantLoss, _ := fx.floats(t, "outputs.loss")
			allClose(t, "outputs.loss", []float32{loss}, wantLoss, 1e-4, 1e-5)

			lp, err := m.TokenLogProbs(ids, mask, labels)
			if err != nil {
				t.Fatal(err)
			}
			sum, n := 0.0, 0
			for r, row := range lp {
				real := 0
				for _, l := range labels[r] {
					if l != IgnoreIndex {
						real++
					}
				}
				if len(row) != real {
					t.Errorf("TokenLogProbs row %d: %d values, want %d", r, len(row), real)
				}
				for _, x := range row {
					sum += float64(x)
					n++
				}
			}
			allClose(t, "-mean(TokenLogProbs)", []float32{float32(-sum / float64(n))}, wantLoss, 1e-4, 1e-5)

			inter := debugForward(t, m, ids, mask, dec)
			for k, got := range inter {
				want, _ := fx.floats(t, k)
				allClose(t, k, got, want, 1e-4, 1e-4)
			}
		})
	}
}

// greedyNoCache is the reference: rerun the full teacher-forced decoder on the prefix each step.
func greedyNoCache(t *testing.T, m *Model, ids, mask [][]int, steps int) [][]int {
	t.Helper()
	c := m.Config
	out := make([][]int, len(ids))
	done := make([]bool, len(ids))
	for r := range out {
		out[r] = []int{c.DecoderStartTokenID}
	}
	for range steps {
		_, _, logits, err := m.Forward(ids, mask, out)
		if err != nil {
			t.Fatal(err)
		}
		v := flat(t, logits)
		T, V := len(out[0]), c.VocabSize
		all := true
		for r := range out {
			next := c.PadTokenID
			if !done[r] {
				next = argmax(v[(r*T+T-1)*V : (r*T+T)*V])
				done[r] = next == c.EOSTokenID
			}
			out[r] = append(out[r], next)
			all = all && done[r]
		}
		if all {
			break
		}
	}
	return out
}

func TestFixtureGenerate(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, m := loadFixture(t, name)
			ids := fx.ints(t, "inputs.input_ids")
			mask := fx.ints(t, "inputs.attention_mask")
			want := fx.ints(t, "outputs.generated_ids")
			got, err := m.Generate(ids, mask, GenerateOptions{MaxNewTokens: 8})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Generate (KV cache) = %v\nwant %v", got, want)
			}
			if ref := greedyNoCache(t, m, ids, mask, 8); fmt.Sprint(ref) != fmt.Sprint(want) {
				t.Errorf("no-cache greedy = %v\nwant %v", ref, want)
			}
			// Sampling: same seed → same ids; tiny top_p keeps only the argmax → greedy.
			opt := GenerateOptions{MaxNewTokens: 8, DoSample: true, Temperature: 1.5, Seed: 7}
			s1, err := m.Generate(ids, mask, opt)
			if err != nil {
				t.Fatal(err)
			}
			s2, _ := m.Generate(ids, mask, opt)
			if fmt.Sprint(s1) != fmt.Sprint(s2) {
				t.Errorf("sampling with fixed seed not deterministic: %v vs %v", s1, s2)
			}
			opt.TopP = 1e-6
			s3, _ := m.Generate(ids, mask, opt)
			if fmt.Sprint(s3) != fmt.Sprint(want) {
				t.Errorf("top_p=1e-6 sampling = %v, want greedy %v", s3, want)
			}
		})
	}
}

func TestSampleTokenTopP(t *testing.T) {
	// probs ∝ exp(logits): logits ln(0.5), ln(0.3), ln(0.2) → probs .5 .3 .2.
	row := []float32{float32(math.Log(0.2)), float32(math.Log(0.5)), float32(math.Log(0.3))}
	cases := []struct {
		topP    float64
		allowed map[int]bool
	}{
		{0.4, map[int]bool{1: true}},                   // .5 alone reaches .4
		{0.7, map[int]bool{1: true, 2: true}},          // .5+.3 reaches .7
		{0.9, map[int]bool{0: true, 1: true, 2: true}}, // needs all three
	}
	for _, c := range cases {
		rng := newTestRand(1)
		seen := map[int]bool{}
		for range 300 {
			seen[sampleToken(row, 1, c.topP, rng)] = true
		}
		if fmt.Sprint(seen) != fmt.Sprint(c.allowed) {
			t.Errorf("top_p %g: sampled %v, want exactly %v", c.topP, seen, c.allowed)
		}
	}
}

func TestPaddingInvariance(t *testing.T) {
	fx, m := loadFixture(t, "t5-flan-tiny")
	ids := fx.ints(t, "inputs.input_ids")
	mask := fx.ints(t, "inputs.attention_mask")
	dec := fx.ints(t, "inputs.decoder_input_ids")
	n := 0
	for _, x := range mask[1] {
		n += x
	}
	// Row 1 alone, unpadded, vs. in the batch with garbage ids in its padded slots.
	alone, _, logitsAlone, err := m.Forward([][]int{ids[1][:n]}, [][]int{mask[1][:n]}, [][]int{dec[1]})
	if err != nil {
		t.Fatal(err)
	}
	junk := [][]int{ids[0], append([]int(nil), ids[1]...)}
	for c := n; c < len(junk[1]); c++ {
		junk[1][c] = 1000 + c
	}
	batch, _, logitsBatch, err := m.Forward(junk, mask, dec)
	if err != nil {
		t.Fatal(err)
	}
	L, D := len(ids[0]), m.Config.DModel
	b := flat(t, batch)
	allClose(t, "encoder row 1 real positions", b[L*D:L*D+n*D], flat(t, alone), 1e-5, 1e-5)
	lb := flat(t, logitsBatch)
	T, V := len(dec[0]), m.Config.VocabSize
	allClose(t, "logits row 1", lb[T*V:], flat(t, logitsAlone), 1e-4, 1e-5)
}

func TestSaveLoadSaveByteIdentical(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, m := loadFixture(t, name)
			d1, d2 := t.TempDir(), t.TempDir()
			if err := m.Save(d1); err != nil {
				t.Fatal(err)
			}
			m2, err := Load(m.Backend, d1)
			if err != nil {
				t.Fatal(err)
			}
			if err := m2.Save(d2); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{WeightsFile, ConfigFile} {
				orig, _ := os.ReadFile(filepath.Join(fx.dir, f))
				b1, _ := os.ReadFile(filepath.Join(d1, f))
				b2, _ := os.ReadFile(filepath.Join(d2, f))
				if !bytes.Equal(b1, orig) {
					t.Errorf("%s: saved bytes differ from fixture (%d vs %d bytes)", f, len(b1), len(orig))
				}
				if !bytes.Equal(b1, b2) {
					t.Errorf("%s: Save→Load→Save not byte-identical", f)
				}
			}
			// generation_config.json as save_pretrained writes it from the config.
			var gc map[string]any
			b, err := os.ReadFile(filepath.Join(d1, GenerationConfigFile))
			if err != nil || json.Unmarshal(b, &gc) != nil {
				t.Fatalf("%s: %v", GenerationConfigFile, err)
			}
			want := map[string]any{"_from_model_config": true, "decoder_start_token_id": float64(m.Config.DecoderStartTokenID),
				"eos_token_id": float64(m.Config.EOSTokenID), "pad_token_id": float64(m.Config.PadTokenID)}
			if !reflect.DeepEqual(gc, want) {
				t.Errorf("%s = %v, want %v", GenerationConfigFile, gc, want)
			}
		})
	}
}

// variant copies a fixture checkpoint with edits to its tensors and config.
func variant(t *testing.T, src string, editTensors func(map[string]*safetensors.Tensor), editConfig func(map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	f, err := safetensors.ReadFile(filepath.Join(src, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if editTensors != nil {
		editTensors(f.Tensors)
	}
	var list []*safetensors.Tensor
	for _, x := range f.Tensors {
		list = append(list, x)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), list, f.Metadata); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(src, ConfigFile))
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if editConfig != nil {
		editConfig(cfg)
	}
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadErrors(t *testing.T) {
	flan := testutil.SharedPath(t, "fixtures/t5-flan-tiny")
	inner := testutil.SharedPath(t, "fixtures/t5-flan-inner")
	q := "encoder.block.1.layer.0.SelfAttention.q.weight"
	cases := []struct {
		name   string
		src    string
		edit   func(map[string]*safetensors.Tensor)
		cfg    func(map[string]any)
		wantIn []string
	}{
		{"missing tensor", flan, func(m map[string]*safetensors.Tensor) { delete(m, q) }, nil,
			[]string{"model.safetensors", q, "missing"}},
		{"shape mismatch", flan, func(m map[string]*safetensors.Tensor) {
			m[q] = safetensors.FromFloat32(q, []int{32, 64}, make([]float32, 32*64))
		}, nil, []string{"model.safetensors", q, "[32 64]", "[64 64]"}},
		{"extra tensor", flan, func(m map[string]*safetensors.Tensor) {
			m["encoder.block.2.layer.0.layer_norm.weight"] = safetensors.FromFloat32("encoder.block.2.layer.0.layer_norm.weight", []int{64}, make([]float32, 64))
		}, nil, []string{"model.safetensors", "encoder.block.2.layer.0.layer_norm.weight", "unexpected"}},
		{"unknown feed_forward_proj", flan, nil, func(c map[string]any) { c["feed_forward_proj"] = "swish" },
			[]string{"config.json", "feed_forward_proj", "swish"}},
		{"decoder depth from num_layers", inner, nil, func(c map[string]any) { delete(c, "num_decoder_layers") },
			[]string{"model.safetensors", "decoder.block.2", "unexpected"}},
		{"attention sized by d_model", inner, nil, func(c map[string]any) { c["d_kv"] = 8 },
			[]string{"model.safetensors", "SelfAttention", "[96 48]", "[48 48]"}},
		{"tied lm_head differs", flan, nil, func(c map[string]any) { c["tie_word_embeddings"] = true },
			[]string{"model.safetensors", "lm_head.weight", "unexpected"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := variant(t, c.src, c.edit, c.cfg)
			_, err := Load(testBackend(t), dir)
			if err == nil {
				t.Fatal("Load succeeded, want error")
			}
			for _, s := range append(c.wantIn, dir) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
	// Aliases: encoder.embed_tokens.weight instead of shared.weight loads.
	dir := variant(t, flan, func(m map[string]*safetensors.Tensor) {
		s := m["shared.weight"]
		delete(m, "shared.weight")
		m["encoder.embed_tokens.weight"] = &safetensors.Tensor{Name: "encoder.embed_tokens.weight", DType: s.DType, Shape: s.Shape, Data: s.Data}
		m["decoder.embed_tokens.weight"] = &safetensors.Tensor{Name: "decoder.embed_tokens.weight", DType: s.DType, Shape: s.Shape, Data: s.Data}
	}, nil)
	if _, err := Load(testBackend(t), dir); err != nil {
		t.Errorf("Load with embed_tokens aliases: %v", err)
	}
}

func TestConfig(t *testing.T) {
	c, err := LoadConfig(testutil.SharedPath(t, "fixtures/t5-flan-inner"))
	if err != nil {
		t.Fatal(err)
	}
	if c.NumLayers != 2 || c.NumDecoderLayers != 3 || c.NumHeads != 6 || c.DKV != 16 || c.DModel != 48 || c.TieWordEmbeddings {
		t.Errorf("t5-flan-inner config parsed as %+v", c)
	}
	for _, js := range []string{`{"model_type": "t5", "num_layers": 5, "num_decoder_layers": null}`, `{"model_type": "t5", "num_layers": 5}`} {
		c, err := parseConfig([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		if c.NumDecoderLayers != 5 || !c.TieWordEmbeddings || c.FeedForwardProj != "relu" {
			t.Errorf("%s: num_decoder_layers %d tie %v ff %q, want 5 true relu", js, c.NumDecoderLayers, c.TieWordEmbeddings, c.FeedForwardProj)
		}
		out, _ := c.MarshalConfig()
		if !strings.Contains(string(out), `"num_decoder_layers": `+map[bool]string{true: "null", false: "5"}[strings.Contains(js, "null")]) {
			t.Errorf("%s: MarshalConfig lost num_decoder_layers: %s", js, out)
		}
	}
	if _, err := parseConfig([]byte(`{"d_model": "big"}`)); err == nil || !strings.Contains(err.Error(), "d_model") {
		t.Errorf("bad d_model type: err %v, want one naming d_model", err)
	}
	for _, p := range []Config{TinyConfig(2100), MiniConfig(32128), SmallConfig(32128)} {
		if err := p.Validate(); err != nil {
			t.Errorf("preset %+v: %v", p, err)
		}
	}
	if s := SmallConfig(100); s.DModel != 512 || s.DFF != 1024 || s.NumHeads != 6 || s.NumLayers != 8 || s.NumDecoderLayers != 8 || s.FeedForwardProj != "gated-gelu" {
		t.Errorf("SmallConfig = %+v", s)
	}
	// Unknown keys and changed values round-trip.
	c, err = parseConfig([]byte(`{"custom_key": {"a": [1, 2]}, "d_model": 64, "layer_norm_epsilon": 1e-06, "model_type": "t5"}`))
	if err != nil {
		t.Fatal(err)
	}
	c.DModel, c.LayerNormEpsilon = 32, 1e-5
	out, _ := c.MarshalConfig()
	for _, s := range []string{"{\n  \"custom_key\": {\n    \"a\": [\n      1,\n      2\n    ]\n  },\n  \"d_model\": 32,\n  \"layer_norm_epsilon\": 1e-05,"} {
		if !strings.Contains(string(out), s) {
			t.Errorf("MarshalConfig:\n%s\nwant it to contain\n%s", out, s)
		}
	}
}

func TestShiftRight(t *testing.T) {
	got := ShiftRight([][]int{{5, 6, 1}, {7, 1, -100}, {}}, 0, 9)
	want := [][]int{{0, 5, 6}, {0, 7, 1}, {}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ShiftRight = %v, want %v", got, want)
	}
	got = ShiftRight([][]int{{4, -100, -100}}, 2, 9)
	if fmt.Sprint(got) != fmt.Sprint([][]int{{2, 4, 9}}) {
		t.Errorf("ShiftRight -100→pad = %v", got)
	}
}

func TestLossGraphHand(t *testing.T) {
	// logits [2,2,3]; labels [[2,-100],[0,1]].
	// row0 t0: logsoftmax([0,0,ln2])[2] = ln2 - ln4 = -ln2;
	// row1 t0: [ln3,0,0] → ln3 - ln5; row1 t1: [0,0,0] → -ln3.
	// loss = (ln2 + ln5 - ln3 + ln3)/3 = ln10/3 (mean over the 3 valid tokens).
	b := testBackend(t)
	logits := [][][]float32{{{0, 0, float32(math.Ln2)}, {9, 9, 9}}, {{float32(math.Log(3)), 0, 0}, {0, 0, 0}}}
	labels := [][]int32{{2, -100}, {0, 1}}
	got := graph.MustExecOnce(b, LossGraph, logits, labels)
	want := math.Log(10) / 3
	if v := float64(tensors.ToScalar[float32](got)); math.Abs(v-want) > 1e-6 {
		t.Errorf("LossGraph = %v, want ln(10)/3 = %v", v, want)
	}
	allIgnored := graph.MustExecOnce(b, LossGraph, logits, [][]int32{{-100, -100}, {-100, -100}})
	if v := tensors.ToScalar[float32](allIgnored); v != 0 {
		t.Errorf("LossGraph with no valid label = %v, want 0", v)
	}
}

func TestSmoothedLossGraphHand(t *testing.T) {
	// The logits of TestLossGraphHand (V = 3, valid positions: row0 t0,
	// row1 t0, row1 t1). Σ_v −log p(v): row0 t0 [0,0,ln2] → 2·ln4 + ln2 =
	// 5·ln2; row1 t0 [ln3,0,0] → (ln5 − ln3) + 2·ln5; row1 t1 → 3·ln3.
	// smooth = (5·ln2 + 3·ln5 + 2·ln3)/(3·3); NLL = ln10/3 (LossGraph).
	b := testBackend(t)
	logits := [][][]float32{{{0, 0, float32(math.Ln2)}, {9, 9, 9}}, {{float32(math.Log(3)), 0, 0}, {0, 0, 0}}}
	labels := [][]int32{{2, -100}, {0, 1}}
	nll := math.Log(10) / 3
	smooth := (5*math.Ln2 + 3*math.Log(5) + 2*math.Log(3)) / 9
	for _, tc := range []struct {
		eps  float64
		want float64
	}{
		{0, nll},
		{0.1, 0.9*nll + 0.1*smooth},
		{0.5, 0.5*nll + 0.5*smooth},
	} {
		got := graph.MustExecOnce(b, func(l, y *graph.Node) *graph.Node { return SmoothedLossGraph(l, y, tc.eps) }, logits, labels)
		if v := float64(tensors.ToScalar[float32](got)); math.Abs(v-tc.want) > 1e-5 {
			t.Errorf("SmoothedLossGraph eps %v = %v, want %v", tc.eps, v, tc.want)
		}
		none := graph.MustExecOnce(b, func(l, y *graph.Node) *graph.Node { return SmoothedLossGraph(l, y, tc.eps) }, logits, [][]int32{{-100, -100}, {-100, -100}})
		if v := tensors.ToScalar[float32](none); v != 0 {
			t.Errorf("SmoothedLossGraph eps %v with no valid label = %v, want 0", tc.eps, v)
		}
	}
}

func TestPadLen(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, 8}, {1, 8}, {8, 8}, {9, 16}, {45, 48}, {64, 64}, {65, 96}, {256, 256}, {257, 320}} {
		if got := PadLen(c.n); got != c.want {
			t.Errorf("PadLen(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestNewRandomAndResize(t *testing.T) {
	b := testBackend(t)
	cfg := TinyConfig(120)
	cfg.DModel, cfg.DFF, cfg.NumDecoderLayers = 32, 48, 3
	m, err := NewRandom(b, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := NewRandom(b, cfg, 3)
	for _, p := range cfg.paramSpecs() {
		v1, _, _ := m.paramValues(p.name)
		v2, _, _ := m2.paramValues(p.name)
		if fmt.Sprint(v1) != fmt.Sprint(v2) {
			t.Fatalf("NewRandom not deterministic for %s", p.name)
		}
	}
	// HF _init_weights stds (factor 1): shared 1, k d_model^-½, wo d_ff^-½, norms exactly 1.
	for _, c := range []struct {
		name string
		std  float64
	}{
		{"shared.weight", 1}, {"encoder.block.0.layer.0.SelfAttention.k.weight", math.Pow(32, -0.5)},
		{"encoder.block.0.layer.0.SelfAttention.q.weight", math.Pow(32*16, -0.5)},
		{"decoder.block.2.layer.2.DenseReluDense.wo.weight", math.Pow(48, -0.5)},
	} {
		v, _, err := m.paramValues(c.name)
		if err != nil {
			t.Fatal(err)
		}
		ss := 0.0
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		if got := math.Sqrt(ss / float64(len(v))); math.Abs(got-c.std) > 0.1*c.std {
			t.Errorf("%s: std %g, want %g", c.name, got, c.std)
		}
	}
	if v, _, _ := m.paramValues("decoder.final_layer_norm.weight"); v[0] != 1 || v[31] != 1 {
		t.Errorf("layer norm init %v, want ones", v[:2])
	}
	ids := [][]int{{5, 6, 7, 1}}
	labels := [][]int{{8, 1}}
	if _, err := m.Loss(ids, nil, labels); err != nil {
		t.Fatal(err)
	}
	old, _, _ := m.paramValues("lm_head.weight")
	if err := m.ResizeTokenEmbeddings(123); err != nil {
		t.Fatal(err)
	}
	if m.Config.VocabSize != 123 {
		t.Errorf("VocabSize %d after resize, want 123", m.Config.VocabSize)
	}
	for _, name := range []string{"shared.weight", "lm_head.weight"} {
		v, shape, _ := m.paramValues(name)
		if fmt.Sprint(shape) != "[123 32]" {
			t.Fatalf("%s shape %v after resize", name, shape)
		}
		if name == "lm_head.weight" {
			if fmt.Sprint(v[:120*32]) != fmt.Sprint(old) {
				t.Errorf("%s: old rows changed by resize", name)
			}
			mean := 0.0
			for r := range 120 {
				mean += float64(old[r*32+5])
			}
			if got := float64(v[121*32+5]); math.Abs(got-mean/120) > 1e-6 {
				t.Errorf("%s new row col 5 = %g, want mean of old rows %g", name, got, mean/120)
			}
		}
	}
	lp, err := m.TokenLogProbs(ids, nil, [][]int{{122, -100, 1}})
	if err != nil {
		t.Fatalf("after resize: %v", err)
	}
	if len(lp[0]) != 2 || lp[0][0] >= 0 {
		t.Errorf("TokenLogProbs after resize = %v", lp)
	}
	if _, _, _, err := m.Forward(ids, nil, [][]int{{123}}); err == nil {
		t.Error("Forward with id == vocab size succeeded, want error")
	}
}

func newTestRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

// TestGradientFiniteDifference checks that the loss graph is differentiable
// (as pkg/ml/train needs) and that its gradient matches central differences.
func TestGradientFiniteDifference(t *testing.T) {
	b := testBackend(t)
	cfg := TinyConfig(40)
	cfg.DModel, cfg.DKV, cfg.NumHeads, cfg.DFF, cfg.NumLayers, cfg.NumDecoderLayers = 16, 8, 2, 24, 1, 2
	m, err := NewRandom(b, cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	ids := [][]int{{3, 4, 5, 1}, {6, 7, 1, 0}}
	mask := [][]int{{1, 1, 1, 1}, {1, 1, 1, 0}}
	labels := [][]int{{8, 9, 1}, {10, 1, -100}}
	dec := ShiftRight(labels, 0, 0)
	params := []struct {
		name string
		idx  int
	}{
		{"shared.weight", 9*16 + 3}, // embedding row of a decoder input token (Gather gradient)
		{"decoder.block.1.layer.1.EncDecAttention.o.weight", 5},
		{"encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", 17*2 + 1},
		{"encoder.block.0.layer.1.DenseReluDense.wi_0.weight", 40},
	}
	var grads []*tensors.Tensor
	fn := func(ctx *context.Context, ids, mask, dec, lab *graph.Node) []*graph.Node {
		loss := LossGraph(m.LogitsGraph(ctx, ids, mask, dec), lab)
		var ws []*graph.Node
		for _, p := range params {
			ws = append(ws, weight(ctx, loss.Graph(), p.name))
		}
		return graph.Gradient(loss, ws...)
	}
	e, err := context.NewExec(b, m.Ctx, fn)
	if err != nil {
		t.Fatal(err)
	}
	grads, err = e.Exec(intTensor(ids, 4, 0), intTensor(mask, 4, 0), intTensor(dec, 3, 0), intTensor(labels, 3, IgnoreIndex))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range params {
		g := flat(t, grads[i])[p.idx]
		c, vn := scopeOf(m.Ctx, p.name)
		v := c.GetVariable(vn)
		orig, _, _ := m.paramValues(p.name)
		const h = 1e-2
		lossAt := func(delta float32) float64 {
			w := append([]float32(nil), orig...)
			w[p.idx] += delta
			if err := v.SetValue(tensors.FromFlatDataAndDimensions(w, v.Shape().Dimensions...)); err != nil {
				t.Fatal(err)
			}
			l, err := m.Loss(ids, mask, labels)
			if err != nil {
				t.Fatal(err)
			}
			return float64(l)
		}
		fd := (lossAt(h) - lossAt(-h)) / (2 * h)
		lossAt(0)
		if math.Abs(fd) < 1e-3 {
			t.Errorf("%s[%d]: finite difference %g too small to test the gradient; pick another element", p.name, p.idx, fd)
		}
		t.Logf("%s[%d]: gradient %g, finite difference %g", p.name, p.idx, g, fd)
		if math.Abs(fd-float64(g)) > 2e-3+0.03*math.Abs(fd) {
			t.Errorf("%s[%d]: gradient %g, finite difference %g", p.name, p.idx, g, fd)
		}
	}
}

// TestTrainingModeDropout: with ctx training on, dropout (rate 0.1) changes the loss; off, it is the eval loss.
func TestTrainingModeDropout(t *testing.T) {
	b := testBackend(t)
	m, err := NewRandom(b, TinyConfig(30), 5)
	if err != nil {
		t.Fatal(err)
	}
	ids, labels := [][]int{{3, 4, 5, 6, 7, 8, 1}}, [][]int{{9, 10, 11, 1}}
	eval, err := m.Loss(ids, nil, labels)
	if err != nil {
		t.Fatal(err)
	}
	run := func(training bool) float32 {
		fn := func(ctx *context.Context, ids, dec, lab *graph.Node) *graph.Node {
			ctx.SetTraining(ids.Graph(), training)
			mask := graph.OnesLike(ids)
			return LossGraph(m.LogitsGraph(ctx, ids, mask, dec), lab)
		}
		e, err := context.NewExec(b, m.Ctx, fn)
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Exec(intTensor(ids, 7, 0), intTensor(ShiftRight(labels, 0, 0), 4, 0), intTensor(labels, 4, 0))
		if err != nil {
			t.Fatal(err)
		}
		return tensors.ToScalar[float32](out[0])
	}
	if got := run(false); math.Abs(float64(got-eval)) > 1e-5 {
		t.Errorf("eval-mode loss %g, Loss() %g", got, eval)
	}
	if got := run(true); got == eval || math.IsNaN(float64(got)) {
		t.Errorf("training-mode loss %g, want finite and different from eval %g (dropout active)", got, eval)
	}
}

// TestXLAFixtureParity runs the fixture checks through XLA when a PJRT plugin
// is installed (skipped otherwise).
func TestXLAFixtureParity(t *testing.T) {
	xlatest.RunXLAParity(t, "^(TestFixtureForward|TestFixtureGenerate)$")
}

// TestSeparateRows: the two mean rows ResizeTokenEmbeddings appends are
// identical; SeparateRows makes them differ (deterministically in the seed),
// leaves other rows alone and does nothing to rows that already differ.
func TestSeparateRows(t *testing.T) {
	b := testBackend(t)
	cfg := TinyConfig(120)
	cfg.DModel, cfg.DFF = 32, 48
	run := func(seed uint64) (*Model, bool) {
		m, err := NewRandom(b, cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.ResizeTokenEmbeddings(122); err != nil {
			t.Fatal(err)
		}
		changed, err := m.SeparateRows([]int{120, 121}, LabelRowStd, seed)
		if err != nil {
			t.Fatal(err)
		}
		return m, changed
	}
	m, changed := run(7)
	if !changed {
		t.Fatal("SeparateRows on identical rows reported no change")
	}
	m2, _ := run(7)
	m3, _ := run(8)
	for _, name := range []string{"shared.weight", "lm_head.weight"} {
		v, _, _ := m.paramValues(name)
		v2, _, _ := m2.paramValues(name)
		v3, _, _ := m3.paramValues(name)
		r0, r1 := v[120*32:121*32], v[121*32:122*32]
		if fmt.Sprint(r0) == fmt.Sprint(r1) {
			t.Errorf("%s: label rows still identical", name)
		}
		if fmt.Sprint(v) != fmt.Sprint(v2) {
			t.Errorf("%s: not deterministic in the seed", name)
		}
		if fmt.Sprint(v[120*32:]) == fmt.Sprint(v3[120*32:]) {
			t.Errorf("%s: seed 7 and 8 gave the same rows", name)
		}
		if fmt.Sprint(v[:120*32]) != fmt.Sprint(v3[:120*32]) {
			t.Errorf("%s: other rows changed", name)
		}
		var ss float64
		for j := range 32 {
			d := float64(r0[j] - r1[j])
			ss += d * d
		}
		// The difference of two N(0, 0.02²) draws has std 0.02·√2.
		if got := math.Sqrt(ss / 32); got < 0.01 || got > 0.06 {
			t.Errorf("%s: row difference rms %g, want about %g", name, got, LabelRowStd*math.Sqrt2)
		}
	}
	if changed, err := m.SeparateRows([]int{120, 121}, LabelRowStd, 7); err != nil || changed {
		t.Errorf("SeparateRows on distinct rows = %v, %v; want no change", changed, err)
	}
	if _, err := m.SeparateRows([]int{122}, LabelRowStd, 7); err == nil {
		t.Error("SeparateRows accepted a row outside the vocabulary")
	}
}

// InitTokenMatch ties the first heads' key rows to their (rescaled) query
// rows, so a token's score with itself is about the requested value and
// well above its score with another token; other heads and tensors stay.
func TestInitTokenMatch(t *testing.T) {
	b := testBackend(t)
	cfg := TinyConfig(200)
	m, err := NewRandom(b, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := NewRandom(b, cfg, 3)
	if err := m.InitTokenMatch(2, 9, -9); err != nil {
		t.Fatal(err)
	}
	p := "encoder.block.0.layer.0.SelfAttention."
	q, _, _ := m.paramValues(p + "q.weight")
	k, _, _ := m.paramValues(p + "k.weight")
	k0, _, _ := ref.paramValues(p + "k.weight")
	bias, _, _ := m.paramValues(p + "relative_attention_bias.weight")
	emb, _, _ := m.paramValues("shared.weight")
	D, K := cfg.DModel, cfg.DKV
	// score(h, a, b): head h's q·k of RMS-normalised embeddings of tokens a and b.
	score := func(h, a, bb int) float64 {
		norm := func(i int) []float64 {
			x := make([]float64, D)
			ss := 0.0
			for j := range D {
				x[j] = float64(emb[i*D+j])
				ss += x[j] * x[j]
			}
			for j := range x {
				x[j] /= math.Sqrt(ss / float64(D))
			}
			return x
		}
		xa, xb := norm(a), norm(bb)
		s := 0.0
		for r := h * K; r < (h+1)*K; r++ {
			qa, kb := 0.0, 0.0
			for j := range D {
				qa += float64(q[r*D+j]) * xa[j]
				kb += float64(k[r*D+j]) * xb[j]
			}
			s += qa * kb
		}
		return s
	}
	var self, other float64
	for tok := range 50 {
		self += score(0, tok, tok) / 50
		other += math.Abs(score(0, tok, tok+50)) / 50
	}
	if self < 6 || self > 12 || other > self/3 {
		t.Errorf("head 0: mean self score %.2f (want about 9), mean |score| with another token %.2f", self, other)
	}
	for r := range cfg.NumHeads * K {
		same := fmt.Sprint(k[r*D:(r+1)*D]) == fmt.Sprint(q[r*D:(r+1)*D])
		unchanged := fmt.Sprint(k[r*D:(r+1)*D]) == fmt.Sprint(k0[r*D:(r+1)*D])
		if r < 2*K && !same || r >= 2*K && !unchanged {
			t.Errorf("k row %d: tied %v, unchanged %v", r, same, unchanged)
		}
	}
	if bias[0] != -9 || bias[1] != -9 || bias[2] == -9 {
		t.Errorf("distance-0 bias %v, want -9 for heads 0 and 1 only", bias[:cfg.NumHeads])
	}
	if err := m.InitTokenMatch(5, 9, -9); err == nil {
		t.Error("5 of 4 heads: no error")
	}
}
