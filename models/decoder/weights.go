package decoder

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
)

// WeightsFile is the single-file checkpoint name (sharded checkpoints use
// WeightsFile + ".index.json", read by safetensors.LoadDir).
const WeightsFile = "model.safetensors"

// InitializerRange is HF's initializer_range default (0.02) used by
// NewRandom: linears and embeddings ~ N(0, 0.02²), biases 0, norms 1.
const InitializerRange = 0.02

// ignoredTensor matches names old checkpoints carry that HF skips on load
// (_keys_to_ignore_on_load_unexpected): the rotary inv_freq buffers.
var ignoredTensor = regexp.MustCompile(`^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$`)

// Model is a decoder-only causal LM whose weights are variables of Ctx named
// after the HF parameters (see the package doc). Host-level methods compile
// one executable per padded shape and cache it; they are safe for concurrent
// use, but AddLoRA, LoadAdapter and Merge must not run concurrently with them.
type Model struct {
	Config Config
	// Generation is generation_config.json (defaults when the directory has none).
	Generation GenerationConfig
	Backend    backends.Backend
	Ctx        *context.Context
	// LoRA is the adapter configuration when one is attached (AddLoRA,
	// LoadAdapter), nil otherwise; see LoRA for the forward it adds.
	LoRA *LoRA
	// GradientCheckpointing recomputes each decoder layer in the backward
	// pass of training graphs (HF gradient_checkpointing; models/remat).
	GradientCheckpointing bool

	mu    sync.Mutex
	execs map[string]*context.Exec
}

type paramSpec struct {
	name  string
	shape []int
}

// linearModules lists the nn.Linear modules of layer i with [out, in] and
// whether they carry a bias, in HF order.
func (c Config) linearModules(i int) []paramSpec {
	p := fmt.Sprintf("model.layers.%d.", i)
	H, I := c.HiddenSize, c.IntermediateSize
	return []paramSpec{
		{p + "self_attn.q_proj", []int{c.QDim(), H}}, {p + "self_attn.k_proj", []int{c.KVDim(), H}},
		{p + "self_attn.v_proj", []int{c.KVDim(), H}}, {p + "self_attn.o_proj", []int{H, c.QDim()}},
		{p + "mlp.gate_proj", []int{I, H}}, {p + "mlp.up_proj", []int{I, H}}, {p + "mlp.down_proj", []int{H, I}},
	}
}

// hasBias reports whether the linear module (HF name without ".weight") has a bias.
func (c Config) hasBias(module string) bool {
	switch {
	case strings.HasSuffix(module, ".o_proj"):
		return c.AttentionBias && !c.Family().QKVBias
	case strings.Contains(module, ".self_attn."):
		return c.Family().QKVBias || c.AttentionBias
	case strings.Contains(module, ".mlp."):
		return c.MLPBias
	}
	return false
}

// paramSpecs lists every HF tensor of the model with the shape config.json
// implies, sorted by name (the order Save writes).
func (c Config) paramSpecs() []paramSpec {
	var ps []paramSpec
	add := func(name string, shape ...int) { ps = append(ps, paramSpec{name, shape}) }
	H := c.HiddenSize
	add("model.embed_tokens.weight", c.VocabSize, H)
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", H)
		add(p+"post_attention_layernorm.weight", H)
		for _, l := range c.linearModules(i) {
			add(l.name+".weight", l.shape...)
			if c.hasBias(l.name) {
				add(l.name+".bias", l.shape[0])
			}
		}
		if c.Family().QKNorm {
			add(p+"self_attn.q_norm.weight", c.HeadDim)
			add(p+"self_attn.k_norm.weight", c.HeadDim)
		}
	}
	add("model.norm.weight", H)
	if !c.TieWordEmbeddings {
		add("lm_head.weight", c.VocabSize, H)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	return ps
}

// Parameters is the number of parameters config.json implies.
func (c Config) Parameters() int64 {
	var n int64
	for _, p := range c.paramSpecs() {
		k := int64(1)
		for _, d := range p.shape {
			k *= int64(d)
		}
		n += k
	}
	return n
}

func newModel(backend backends.Backend, cfg Config) *Model {
	return &Model{Config: cfg, Generation: DefaultGenerationConfig(), Backend: backend, Ctx: context.New(),
		execs: map[string]*context.Exec{}}
}

// setParam creates (or replaces) the variable for an HF name with a float32 value.
func (m *Model) setParam(name string, shape []int, v []float32, trainable bool) error {
	return m.setTensor(name, tensors.FromFlatDataAndDimensions(v, shape...), trainable)
}

// setTensor creates (or replaces) the variable for an HF name with value t.
func (m *Model) setTensor(name string, t *tensors.Tensor, trainable bool) error {
	return catch.Do(func() {
		c, vn := nn.ScopeOf(m.Ctx, name)
		if old := c.GetVariable(vn); old != nil {
			if err := m.Ctx.DeleteVariable(old.Scope(), vn); err != nil {
				panic(err)
			}
		}
		c.Checked(false).VariableWithValue(vn, t).SetTrainable(trainable)
	})
}

// ParamValues returns the float32 data and shape of the variable for an HF
// name ("model.layers.0.self_attn.q_proj.weight", or a LoRA name).
func (m *Model) ParamValues(name string) ([]float32, []int, error) {
	return nn.ParamValues(m.Ctx, name)
}

// Load reads an HF decoder checkpoint directory: config.json (LoadConfig),
// model.safetensors or a sharded model.safetensors.index.json with F32,
// BF16 or F16 tensors (converted to float32), and generation_config.json
// when present. Every tensor the config implies must be present with
// exactly that shape and any other tensor is an error (a tied model may
// carry lm_head.weight only when it equals embed_tokens); errors name the
// file, the tensor and both shapes. The weights are float32 (the master
// weights training updates); LoadAs keeps them in their stored dtype.
func Load(backend backends.Backend, dir string) (*Model, error) {
	return LoadAs(backend, dir, nn.Float32)
}

// LoadAs is Load holding the weights as dt (nn.DType, HF's torch_dtype:
// nn.Auto keeps a BF16 checkpoint such as Qwen2's or Llama 3's in bfloat16,
// half the memory; the graphs still compute in float32). Errors: Load's,
// and a dt the backend cannot hold (float16 on the pure-Go backend).
func LoadAs(backend backends.Backend, dir string, dt nn.DType) (*Model, error) {
	if err := dt.CheckOn(backend); err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	gc, _, err := LoadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	ts, err := safetensors.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load %s %s: %w", cfg.ModelType, dir, err)
	}
	file := filepath.Join(dir, WeightsFile)
	if _, err := os.Stat(file); err != nil {
		file += ".index.json"
	}
	if err := cfg.CheckTensors(ts, file); err != nil {
		return nil, err
	}
	m := newModel(backend, cfg)
	m.Generation = gc
	for _, p := range cfg.paramSpecs() {
		v, err := nn.LoadWeight(ts[p.name], dt, backend)
		if err != nil {
			return nil, fmt.Errorf("load %s: tensor %q: %w", file, p.name, err)
		}
		if err := m.setTensor(p.name, v, true); err != nil {
			return nil, fmt.Errorf("load %s: tensor %q: %w", file, p.name, err)
		}
	}
	return m, nil
}

// CheckTensors checks a checkpoint's tensors (safetensors.LoadDir of the
// directory; file names it in errors) against the config: every tensor the
// config implies present with exactly that shape, no other tensor except
// HF's ignored rotary inv_freq buffers and, when tie_word_embeddings, an
// lm_head.weight equal to embed_tokens. Errors name the tensor and both
// shapes.
func (c Config) CheckTensors(ts map[string]*safetensors.Tensor, file string) error {
	used := map[string]bool{}
	for _, p := range c.paramSpecs() {
		t, ok := ts[p.name]
		if !ok {
			return fmt.Errorf("load %s: tensor %q missing (config.json wants shape %v)", file, p.name, p.shape)
		}
		used[p.name] = true
		if !slices.Equal(t.Shape, p.shape) {
			return fmt.Errorf("load %s: tensor %q: shape %v, config.json wants %v", file, p.name, t.Shape, p.shape)
		}
	}
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := ts[n]
		if used[n] || ignoredTensor.MatchString(n) {
			continue
		}
		if e := ts["model.embed_tokens.weight"]; n == "lm_head.weight" && c.TieWordEmbeddings && e != nil && e.Equal(t) {
			continue
		}
		return fmt.Errorf("load %s: unexpected tensor %q shape %v (not used by config.json: model_type %q, num_hidden_layers %d, tie_word_embeddings %v, attention_bias %v)",
			file, n, t.Shape, c.ModelType, c.NumHiddenLayers, c.TieWordEmbeddings, c.AttentionBias)
	}
	return nil
}

// NewRandom builds a model with HF LlamaPreTrainedModel._init_weights
// initialisation: linears and embed_tokens ~ N(0, InitializerRange²),
// biases 0, RMSNorm weights 1. Deterministic in seed. For benchmarks and
// tests at real shapes (no pretrained weights are needed).
func NewRandom(backend backends.Backend, cfg Config, seed int64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("decoder.NewRandom: %w", err)
	}
	m := newModel(backend, cfg)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6465_636f))
	for _, p := range cfg.paramSpecs() {
		n := 1
		for _, d := range p.shape {
			n *= d
		}
		v := make([]float32, n)
		switch {
		case strings.HasSuffix(p.name, "norm.weight"):
			for i := range v {
				v[i] = 1
			}
		case strings.HasSuffix(p.name, ".bias"):
		default:
			for i := range v {
				v[i] = float32(rng.NormFloat64() * InitializerRange)
			}
		}
		if err := m.setParam(p.name, p.shape, v, true); err != nil {
			return nil, fmt.Errorf("decoder.NewRandom: %s: %w", p.name, err)
		}
	}
	return m, nil
}

// Save writes dir/config.json (as loaded, or built from Config) and
// dir/model.safetensors (HF names, sorted, F32, {"format":"pt"}); a tied
// model writes no lm_head.weight. LoRA variables are not written: Merge
// first for a merged checkpoint.
func (m *Model) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save %s: %w", m.Config.ModelType, err)
	}
	b, err := m.Config.MarshalConfig()
	if err != nil {
		return fmt.Errorf("save %s: %w", filepath.Join(dir, hf.ConfigName), err)
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, hf.ConfigName), b, 0o644); err != nil {
		return fmt.Errorf("save %s: %w", m.Config.ModelType, err)
	}
	var out []*safetensors.Tensor
	for _, p := range m.Config.paramSpecs() {
		v, shape, err := m.ParamValues(p.name)
		if err != nil {
			return fmt.Errorf("save %s: %w", filepath.Join(dir, WeightsFile), err)
		}
		out = append(out, safetensors.FromFloat32(p.name, shape, v))
	}
	path := filepath.Join(dir, WeightsFile)
	if err := safetensors.WriteFile(path, out, safetensors.DefaultMetadata()); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// resetExecs drops compiled executables (after weights or LoRA change shape).
func (m *Model) resetExecs() {
	m.execs = map[string]*context.Exec{}
}
