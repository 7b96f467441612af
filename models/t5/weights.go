package t5

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
)

// WeightsFile is the single-file checkpoint name Save writes.
const WeightsFile = "model.safetensors"

// Tensor names HF accepts as copies of shared.weight (tied input embeddings).
var embedAliases = []string{"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}

// ignoredTensors are names old HF checkpoints carry but T5 never uses (HF
// _keys_to_ignore_on_load_unexpected); they are skipped, anything else unknown is an error.
var ignoredTensors = map[string]bool{
	"decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight": true,
}

// Model is a T5ForConditionalGeneration whose weights are variables of Ctx,
// named after the HF parameters (see package doc). Host-level methods compile
// one executable per padded shape bucket and cache it; they are safe for
// concurrent use, but ResizeTokenEmbeddings must not run concurrently with them.
type Model struct {
	Config  Config
	Backend backends.Backend
	Ctx     *context.Context
	// GradientCheckpointing recomputes each encoder and decoder block in
	// the backward pass of training graphs (HF gradient_checkpointing;
	// models/remat).
	GradientCheckpointing bool

	mu    sync.Mutex
	execs map[string]*context.Exec
}

type paramSpec struct {
	name  string
	shape []int
}

// paramSpecs lists every HF tensor of the model with the shape config.json
// implies, in sorted name order (the order Save writes).
// DeclaredParameters is the number of parameters config.json declares (the
// sum over paramSpecs), computed without building them, as float64 so that
// absurd sizes (num_layers 1e9) do not overflow.
func (c Config) DeclaredParameters() float64 {
	d, inner, ff := float64(c.DModel), float64(c.NumHeads*c.DKV), float64(c.DFF)
	_, gated, _ := c.activation()
	attn := 4 * inner * d
	bias := float64(c.RelativeAttentionNumBuckets * c.NumHeads)
	ffn := 2*ff*d + d
	if gated {
		ffn += ff * d
	}
	n := float64(c.VocabSize) * d
	if c.NumLayers > 0 {
		n += float64(c.NumLayers)*(attn+d+ffn) + bias
	}
	if c.NumDecoderLayers > 0 {
		n += float64(c.NumDecoderLayers)*(2*attn+2*d+ffn) + bias
	}
	n += 2 * d
	if !c.TieWordEmbeddings {
		n += float64(c.VocabSize) * d
	}
	return n
}

// checkDeclaredSize refuses a config.json that declares more than twice the
// parameters the checkpoint holds, before anything is allocated for it (a
// num_layers of 1e9 would otherwise allocate until the process is killed).
// Smaller mismatches get Load's per-tensor errors, which name the tensor.
func checkDeclaredSize(declared float64, ts map[string]*safetensors.Tensor, file, sizes string) error {
	var held float64
	for _, t := range ts {
		held += float64(t.NumElements())
	}
	if declared > 2*held {
		return fmt.Errorf("load %s: config.json declares %.4g parameters (%s) but the checkpoint holds %.0f: config and weights do not match",
			file, declared, sizes, held)
	}
	return nil
}

func (c Config) paramSpecs() []paramSpec {
	var ps []paramSpec
	add := func(name string, shape ...int) { ps = append(ps, paramSpec{name, shape}) }
	inner := c.NumHeads * c.DKV
	_, gated, _ := c.activation()
	attn := func(prefix string, bias bool) {
		for _, p := range []string{"q", "k", "v"} {
			add(prefix+"."+p+".weight", inner, c.DModel)
		}
		add(prefix+".o.weight", c.DModel, inner)
		if bias {
			add(prefix+".relative_attention_bias.weight", c.RelativeAttentionNumBuckets, c.NumHeads)
		}
	}
	ff := func(prefix string) {
		if gated {
			add(prefix+".DenseReluDense.wi_0.weight", c.DFF, c.DModel)
			add(prefix+".DenseReluDense.wi_1.weight", c.DFF, c.DModel)
		} else {
			add(prefix+".DenseReluDense.wi.weight", c.DFF, c.DModel)
		}
		add(prefix+".DenseReluDense.wo.weight", c.DModel, c.DFF)
		add(prefix+".layer_norm.weight", c.DModel)
	}
	add("shared.weight", c.VocabSize, c.DModel)
	for i := range c.NumLayers {
		p := fmt.Sprintf("encoder.block.%d.layer.", i)
		attn(p+"0.SelfAttention", i == 0)
		add(p+"0.layer_norm.weight", c.DModel)
		ff(p + "1")
	}
	add("encoder.final_layer_norm.weight", c.DModel)
	for i := range c.NumDecoderLayers {
		p := fmt.Sprintf("decoder.block.%d.layer.", i)
		attn(p+"0.SelfAttention", i == 0)
		add(p+"0.layer_norm.weight", c.DModel)
		attn(p+"1.EncDecAttention", false)
		add(p+"1.layer_norm.weight", c.DModel)
		ff(p + "2")
	}
	add("decoder.final_layer_norm.weight", c.DModel)
	if !c.TieWordEmbeddings {
		add("lm_head.weight", c.VocabSize, c.DModel)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	return ps
}

// scopeOf splits an HF name into a context (relative to ctx) and variable name.
var scopeOf = nn.ScopeOf

func newModel(backend backends.Backend, cfg Config) *Model {
	return &Model{Config: cfg, Backend: backend, Ctx: context.New(), execs: map[string]*context.Exec{}}
}

// setParam creates (or replaces) the variable for hfName with a float32 value.
func (m *Model) setParam(name string, shape []int, v []float32) error {
	return m.setTensor(name, tensors.FromFlatDataAndDimensions(v, shape...))
}

// setTensor creates (or replaces) the variable for hfName with value t.
func (m *Model) setTensor(name string, t *tensors.Tensor) error {
	return catch.Do(func() {
		c, vn := scopeOf(m.Ctx, name)
		if old := c.GetVariable(vn); old != nil {
			if err := m.Ctx.DeleteVariable(old.Scope(), vn); err != nil {
				panic(err)
			}
		}
		c.Checked(false).VariableWithValue(vn, t)
	})
}

// paramValues returns the float32 data of a model variable.
func (m *Model) paramValues(name string) ([]float32, []int, error) {
	return nn.ParamValues(m.Ctx, name)
}

// Load reads an HF T5 checkpoint directory: config.json and model.safetensors
// (or a sharded index, via safetensors.LoadDir). Every tensor the config
// implies must be present with exactly that shape; encoder/decoder.embed_tokens
// are accepted as aliases of shared.weight, a tied model may carry
// lm_head.weight only if it equals shared.weight, and any other tensor is an
// error. Errors name the file, the tensor and both shapes. The weights are
// float32 (the master weights training updates); LoadAs keeps them in
// their stored dtype for inference.
func Load(backend backends.Backend, dir string) (*Model, error) {
	return LoadAs(backend, dir, nn.Float32)
}

// LoadAs is Load holding the weights as dt (nn.DType, HF's torch_dtype:
// nn.Auto keeps a BF16 checkpoint in bfloat16, half the memory; the graphs
// still compute in float32). Errors: Load's, and a dt the backend cannot
// hold (float16 on the pure-Go backend).
func LoadAs(backend backends.Backend, dir string, dt nn.DType) (*Model, error) {
	if err := dt.CheckOn(backend); err != nil {
		return nil, fmt.Errorf("load t5 %s: %w", dir, err)
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	ts, err := safetensors.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load t5 %s: %w", dir, err)
	}
	file := filepath.Join(dir, WeightsFile)
	if _, err := os.Stat(file); err != nil {
		file = filepath.Join(dir, WeightsFile+".index.json")
	}
	if err := checkDeclaredSize(cfg.DeclaredParameters(), ts, file, fmt.Sprintf("vocab_size %d, d_model %d, d_ff %d, num_layers %d, num_decoder_layers %d, num_heads %d, d_kv %d",
		cfg.VocabSize, cfg.DModel, cfg.DFF, cfg.NumLayers, cfg.NumDecoderLayers, cfg.NumHeads, cfg.DKV)); err != nil {
		return nil, err
	}
	m := newModel(backend, cfg)
	used := map[string]bool{}
	for _, p := range cfg.paramSpecs() {
		t, ok := ts[p.name]
		src := p.name
		if !ok && p.name == "shared.weight" {
			for _, a := range embedAliases {
				if t, ok = ts[a]; ok {
					src = a
					break
				}
			}
		}
		if !ok {
			return nil, fmt.Errorf("load %s: tensor %q missing (config.json wants shape %v)", file, p.name, p.shape)
		}
		used[src] = true
		if !slices.Equal(t.Shape, p.shape) {
			return nil, fmt.Errorf("load %s: tensor %q: shape %v, config.json wants %v", file, src, t.Shape, p.shape)
		}
		v, err := nn.LoadWeight(t, dt, backend)
		if err != nil {
			return nil, fmt.Errorf("load %s: tensor %q: %w", file, src, err)
		}
		if err := m.setTensor(p.name, v); err != nil {
			return nil, fmt.Errorf("load %s: tensor %q: %w", file, src, err)
		}
	}
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if used[n] || ignoredTensors[n] {
			continue
		}
		t := ts[n]
		isAlias := false
		for _, a := range embedAliases {
			isAlias = isAlias || n == a
		}
		if (isAlias || (n == "lm_head.weight" && cfg.TieWordEmbeddings)) && sameTensor(t, ts, used) {
			continue
		}
		return nil, fmt.Errorf("load %s: unexpected tensor %q shape %v (not used by config.json: feed_forward_proj %q, num_layers %d, num_decoder_layers %d, tie_word_embeddings %v)",
			file, n, t.Shape, cfg.FeedForwardProj, cfg.NumLayers, cfg.NumDecoderLayers, cfg.TieWordEmbeddings)
	}
	return m, nil
}

// sameTensor reports whether t holds the same bytes as the tensor loaded as shared.weight.
func sameTensor(t *safetensors.Tensor, ts map[string]*safetensors.Tensor, used map[string]bool) bool {
	for _, n := range append([]string{"shared.weight"}, embedAliases...) {
		if s, ok := ts[n]; ok && used[n] {
			return s.Equal(t)
		}
	}
	return false
}

// NewRandom builds a model with HF T5PreTrainedModel._init_weights
// initialisation (f = initializer_factor): layer norms 1·f; shared and lm_head
// N(0, f); q N(0, f·(d_model·d_kv)^-½); k, v N(0, f·d_model^-½);
// o N(0, f·(num_heads·d_kv)^-½); relative_attention_bias N(0, f·d_model^-½);
// wi, wi_0, wi_1 N(0, f·d_model^-½); wo N(0, f·d_ff^-½). Deterministic in seed.
func NewRandom(backend backends.Backend, cfg Config, seed int64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("t5.NewRandom: %w", err)
	}
	m := newModel(backend, cfg)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5457_3500))
	f := cfg.InitializerFactor
	for _, p := range cfg.paramSpecs() {
		n := 1
		for _, d := range p.shape {
			n *= d
		}
		v := make([]float32, n)
		std := -1.0
		switch {
		case strings.HasSuffix(p.name, "layer_norm.weight"):
			for i := range v {
				v[i] = float32(f)
			}
		case p.name == "shared.weight" || p.name == "lm_head.weight":
			std = f
		case strings.HasSuffix(p.name, ".q.weight"):
			std = f * math.Pow(float64(cfg.DModel*cfg.DKV), -0.5)
		case strings.HasSuffix(p.name, ".o.weight"):
			std = f * math.Pow(float64(cfg.NumHeads*cfg.DKV), -0.5)
		case strings.HasSuffix(p.name, ".wo.weight"):
			std = f * math.Pow(float64(cfg.DFF), -0.5)
		default: // k, v, relative_attention_bias, wi, wi_0, wi_1
			std = f * math.Pow(float64(cfg.DModel), -0.5)
		}
		if std >= 0 {
			for i := range v {
				v[i] = float32(rng.NormFloat64() * std)
			}
		}
		if err := m.setParam(p.name, p.shape, v); err != nil {
			return nil, fmt.Errorf("t5.NewRandom: %s: %w", p.name, err)
		}
	}
	return m, nil
}

// Save writes dir/config.json and dir/model.safetensors (HF names, sorted,
// F32, metadata {"format":"pt"}); a tied model writes no lm_head.weight. The
// directory is created if needed.
func (m *Model) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save t5: %w", err)
	}
	cfgBytes, err := m.Config.MarshalConfig()
	if err != nil {
		return fmt.Errorf("save %s: %w", filepath.Join(dir, ConfigFile), err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, ConfigFile), cfgBytes, 0o644); err != nil {
		return fmt.Errorf("save t5: %w", err)
	}
	var out []*safetensors.Tensor
	for _, p := range m.Config.paramSpecs() {
		v, shape, err := m.paramValues(p.name)
		if err != nil {
			return fmt.Errorf("save %s: %w", filepath.Join(dir, WeightsFile), err)
		}
		out = append(out, safetensors.FromFloat32(p.name, shape, v))
	}
	path := filepath.Join(dir, WeightsFile)
	if err := safetensors.WriteFile(path, out, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return m.Config.WriteGenerationConfig(dir)
}

// GenerationConfigFile is where transformers' GenerationConfig lives.
const GenerationConfigFile = "generation_config.json"

// WriteGenerationConfig writes dir/generation_config.json as
// save_pretrained does for a T5 model whose generation settings come from its
// config (GenerationConfig.from_model_config): decoder_start_token_id,
// eos_token_id and pad_token_id, with "_from_model_config": true. Greedy
// decoding is transformers' default, so nothing else is written.
func (c Config) WriteGenerationConfig(dir string) error {
	gc := map[string]any{
		"_from_model_config":     true,
		"decoder_start_token_id": c.DecoderStartTokenID,
		"eos_token_id":           c.EOSTokenID,
		"pad_token_id":           c.PadTokenID,
	}
	b, err := json.MarshalIndent(gc, "", "  ")
	if err != nil {
		return fmt.Errorf("save %s: %w", GenerationConfigFile, err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, GenerationConfigFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("save t5: %w", err)
	}
	return nil
}

// ResizeTokenEmbeddings follows HF resize_token_embeddings(n): shared.weight
// (and lm_head.weight when untied) get n rows; the first min(n, old) rows are
// kept and each new row is the mean of the old rows (HF mean_resizing=True,
// the default since transformers 4.46, which samples N(mean, 1e-9·Σ); we use
// the mean itself so the result is deterministic). VocabSize becomes n and
// compiled executables are dropped. Call it before creating an optimizer.
func (m *Model) ResizeTokenEmbeddings(n int) error {
	if n <= 0 {
		return fmt.Errorf("t5.ResizeTokenEmbeddings: size %d must be > 0", n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	names := []string{"shared.weight"}
	if !m.Config.TieWordEmbeddings {
		names = append(names, "lm_head.weight")
	}
	d := m.Config.DModel
	for _, name := range names {
		old, _, err := m.paramValues(name)
		if err != nil {
			return fmt.Errorf("t5.ResizeTokenEmbeddings: %w", err)
		}
		rows := len(old) / d
		mean := make([]float64, d)
		for r := range rows {
			for j := range d {
				mean[j] += float64(old[r*d+j])
			}
		}
		v := make([]float32, n*d)
		copy(v, old[:min(rows, n)*d])
		for r := rows; r < n; r++ {
			for j := range d {
				v[r*d+j] = float32(mean[j] / float64(rows))
			}
		}
		if err := m.setParam(name, []int{n, d}, v); err != nil {
			return fmt.Errorf("t5.ResizeTokenEmbeddings: %s: %w", name, err)
		}
	}
	m.Config.VocabSize = n
	m.execs = map[string]*context.Exec{}
	return nil
}

// LabelRowStd is the standard deviation of the perturbation SeparateRows
// adds: 0.02, as ../shared/fixtures/README.md §8.3 builds the filter's
// label rows (mean of the old rows + N(0, 0.02²)).
const LabelRowStd = 0.02

// SeparateRows makes the rows ids of the token embedding (shared.weight)
// and of an untied lm_head.weight differ when any two of them are
// bit-identical, as ResizeTokenEmbeddings' mean rows are: identical label
// rows are a symmetric start that gradient descent cannot break (the
// class-dependent gradient is exactly zero in a random model). Each listed
// row of such a matrix gets N(0, std²) noise drawn from PCG(seed, matrix
// index) in row-major order. It reports whether anything changed. Errors:
// an id outside the vocabulary, a missing variable.
func (m *Model) SeparateRows(ids []int, std float64, seed uint64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := []string{"shared.weight"}
	if !m.Config.TieWordEmbeddings {
		names = append(names, "lm_head.weight")
	}
	d := m.Config.DModel
	changed := false
	for mi, name := range names {
		v, shape, err := m.paramValues(name)
		if err != nil {
			return false, fmt.Errorf("t5.SeparateRows: %w", err)
		}
		rows := len(v) / d
		for _, id := range ids {
			if id < 0 || id >= rows {
				return false, fmt.Errorf("t5.SeparateRows: %s: row %d outside [0, %d)", name, id, rows)
			}
		}
		same := false
		for a := range ids {
			for b := a + 1; b < len(ids); b++ {
				if slices.Equal(v[ids[a]*d:(ids[a]+1)*d], v[ids[b]*d:(ids[b]+1)*d]) {
					same = true
				}
			}
		}
		if !same {
			continue
		}
		rng := rand.New(rand.NewPCG(seed, uint64(mi)))
		for _, id := range ids {
			for j := range d {
				v[id*d+j] += float32(rng.NormFloat64() * std)
			}
		}
		if err := m.setParam(name, shape, v); err != nil {
			return false, fmt.Errorf("t5.SeparateRows: %s: %w", name, err)
		}
		changed = true
	}
	if changed {
		m.execs = map[string]*context.Exec{}
	}
	return changed, nil
}

// InitTokenMatch gives the first `heads` heads of the first encoder layer's
// self-attention a token-matching start: their key projection rows are set
// equal to their query rows, rescaled so that q·k of a token with itself
// is about score (the rows are N(0, (d_model·d_kv)⁻¹) as HF's q, so
// ‖W·x‖² ≈ 1 for an RMS-normalised embedding x); scores between two
// different tokens stay near zero (standard deviation ≈ score/√d_kv). The
// head's relative-position bias at distance 0 gets selfBias, so that with
// selfBias ≈ −score a token attends to the *other* occurrences of itself
// when there are any, and spreads its attention otherwise. The tensors and
// their shapes are unchanged (any T5 loader reads them). Errors: heads
// outside [0, num_heads], a model without encoder layers.
func (m *Model) InitTokenMatch(heads int, score, selfBias float64) error {
	c := m.Config
	if heads < 0 || heads > c.NumHeads {
		return fmt.Errorf("t5 token-match init: %d heads, want in [0, %d]", heads, c.NumHeads)
	}
	if c.NumLayers < 1 {
		return fmt.Errorf("t5 token-match init: no encoder layer")
	}
	p := "encoder.block.0.layer.0.SelfAttention."
	q, qs, err := m.paramValues(p + "q.weight")
	if err != nil {
		return fmt.Errorf("t5 token-match init: %w", err)
	}
	k, ks, err := m.paramValues(p + "k.weight")
	if err != nil {
		return fmt.Errorf("t5 token-match init: %w", err)
	}
	bias, bs, err := m.paramValues(p + "relative_attention_bias.weight")
	if err != nil {
		return fmt.Errorf("t5 token-match init: %w", err)
	}
	f := float32(math.Sqrt(score))
	d := c.DModel
	for h := range heads {
		for r := h * c.DKV; r < (h+1)*c.DKV; r++ {
			for j := range d {
				q[r*d+j] *= f
				k[r*d+j] = q[r*d+j]
			}
		}
		bias[h] = float32(selfBias) // bucket 0 (distance 0) is row 0
	}
	for _, t := range []struct {
		name  string
		v     []float32
		shape []int
	}{{"q.weight", q, qs}, {"k.weight", k, ks}, {"relative_attention_bias.weight", bias, bs}} {
		if err := m.setParam(p+t.name, t.shape, t.v); err != nil {
			return fmt.Errorf("t5 token-match init: %w", err)
		}
	}
	return nil
}
