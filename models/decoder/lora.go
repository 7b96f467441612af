package decoder

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

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
)

// LoRA is a PEFT LoraConfig (Hu et al. 2021, "LoRA"; HF peft): for every
// nn.Linear whose module name matches TargetModules, y = W·x + b +
// scaling·B·(A·dropout(x)) with scaling = Alpha / R, A [R, in], B [out, R].
// Variables are named as PEFT's state-dict keys without the
// "base_model.model." prefix: "model.layers.N.self_attn.q_proj.lora_A.weight"
// and "...lora_B.weight".
type LoRA struct {
	R       int     // rank r (SL-HyDE's generator SFT: 8)
	Alpha   float64 // lora_alpha (PEFT default 8)
	Dropout float64 // lora_dropout, applied to x before A while training (PEFT default 0)
	// TargetModules are matched as PEFT does for a list: a module is
	// targeted when its name equals an entry or ends with "." + entry
	// ("q_proj" targets every layer's self_attn.q_proj).
	TargetModules []string
}

// Scaling is PEFT's alpha / r.
func (l LoRA) Scaling() float64 { return l.Alpha / float64(l.R) }

// Targets reports whether the HF module name is a LoRA target (PEFT
// check_target_module_exists for a list of names).
func (l LoRA) Targets(module string) bool {
	for _, t := range l.TargetModules {
		if module == t || strings.HasSuffix(module, "."+t) {
			return true
		}
	}
	return false
}

// Validate checks r > 0, alpha > 0, dropout in [0, 1) and a non-empty target list.
func (l LoRA) Validate() error {
	switch {
	case l.R <= 0:
		return fmt.Errorf("lora: r must be > 0, got %d", l.R)
	case l.Alpha <= 0:
		return fmt.Errorf("lora: lora_alpha must be > 0, got %g", l.Alpha)
	case l.Dropout < 0 || l.Dropout >= 1:
		return fmt.Errorf("lora: lora_dropout must be in [0,1), got %g", l.Dropout)
	case len(l.TargetModules) == 0:
		return fmt.Errorf("lora: target_modules is empty")
	}
	return nil
}

// loraModules returns the model's linear modules l targets, in layer order
// then HF order (q, k, v, o, gate, up, down; lm_head last).
func (m *Model) loraModules(l LoRA) []paramSpec {
	var out []paramSpec
	for i := range m.Config.NumHiddenLayers {
		for _, p := range m.Config.linearModules(i) {
			if l.Targets(p.name) {
				out = append(out, p)
			}
		}
	}
	if l.Targets("lm_head") {
		out = append(out, paramSpec{"lm_head", []int{m.Config.VocabSize, m.Config.HiddenSize}})
	}
	return out
}

// LoRAVariableNames returns the HF names of the LoRA variables
// ("model.layers.0.self_attn.q_proj.lora_A.weight", ...), sorted; nil
// without an adapter. Prefix them with "base_model.model." for PEFT's
// adapter_model.safetensors.
func (m *Model) LoRAVariableNames() []string {
	if m.LoRA == nil {
		return nil
	}
	var out []string
	for _, p := range m.loraModules(*m.LoRA) {
		out = append(out, p.name+".lora_A.weight", p.name+".lora_B.weight")
	}
	sort.Strings(out)
	return out
}

// LoRAVariables returns the context variables of the adapter, sorted by
// HF name (the trainable set of a LoRA fine-tuning).
func (m *Model) LoRAVariables() []*context.Variable {
	var out []*context.Variable
	for _, n := range m.LoRAVariableNames() {
		c, vn := nn.ScopeOf(m.Ctx, n)
		if v := c.GetVariable(vn); v != nil {
			out = append(out, v)
		}
	}
	return out
}

// AddLoRA attaches a fresh adapter with PEFT's init_lora_weights=True:
// A ~ kaiming_uniform_(a=√5) = U(±1/√in), B = 0 (so the model's output is
// unchanged), A drawn from PCG(seed) in module order. Every base weight
// becomes non-trainable (an optimizer keeps state for the LoRA variables
// only). Errors: an invalid config, an adapter already attached, targets
// that match no linear module (as PEFT).
func (m *Model) AddLoRA(l LoRA, seed uint64) error {
	if err := m.checkLoRA(l); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6f_7261))
	vals := map[string][]float32{}
	for _, p := range m.loraModules(l) {
		out, in := p.shape[0], p.shape[1]
		a := make([]float32, l.R*in)
		bound := 1 / math.Sqrt(float64(in))
		for i := range a {
			a[i] = float32((2*rng.Float64() - 1) * bound)
		}
		vals[p.name+".lora_A.weight"] = a
		vals[p.name+".lora_B.weight"] = make([]float32, out*l.R)
	}
	return m.attachLoRA(l, vals)
}

func (m *Model) checkLoRA(l LoRA) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if m.LoRA != nil {
		return fmt.Errorf("lora: the model already has an adapter (Merge it first)")
	}
	if len(m.loraModules(l)) == 0 {
		return fmt.Errorf("lora: target_modules %v match no linear module of this %s model (names like q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)",
			l.TargetModules, m.Config.ModelType)
	}
	return nil
}

// attachLoRA creates the LoRA variables from vals (HF name → data, every
// targeted module's A and B) and freezes the base weights.
func (m *Model) attachLoRA(l LoRA, vals map[string][]float32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.loraModules(l) {
		out, in := p.shape[0], p.shape[1]
		if err := m.setParam(p.name+".lora_A.weight", []int{l.R, in}, vals[p.name+".lora_A.weight"], true); err != nil {
			return fmt.Errorf("lora: %w", err)
		}
		if err := m.setParam(p.name+".lora_B.weight", []int{out, l.R}, vals[p.name+".lora_B.weight"], true); err != nil {
			return fmt.Errorf("lora: %w", err)
		}
	}
	m.setBaseTrainable(false)
	m.LoRA = &l
	m.resetExecs()
	return nil
}

func (m *Model) setBaseTrainable(on bool) {
	for _, p := range m.Config.paramSpecs() {
		c, vn := nn.ScopeOf(m.Ctx, p.name)
		if v := c.GetVariable(vn); v != nil {
			v.SetTrainable(on)
		}
	}
}

// AdapterConfigFile and AdapterWeightsFile are PEFT's save_pretrained names.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
	// PEFTPrefix prefixes every key of a PEFT state dict (PeftModel → base_model → model).
	PEFTPrefix = "base_model.model."
)

// adapterConfig is the part of PEFT's adapter_config.json LoadAdapter reads.
type adapterConfig struct {
	PEFTType       string          `json:"peft_type"`
	R              int             `json:"r"`
	LoraAlpha      float64         `json:"lora_alpha"`
	LoraDropout    float64         `json:"lora_dropout"`
	TargetModules  json.RawMessage `json:"target_modules"`
	Bias           string          `json:"bias"`
	FanInFanOut    bool            `json:"fan_in_fan_out"`
	UseRSLoRA      bool            `json:"use_rslora"`
	UseDoRA        bool            `json:"use_dora"`
	ModulesToSave  json.RawMessage `json:"modules_to_save"`
	RankPattern    map[string]any  `json:"rank_pattern"`
	AlphaPattern   map[string]any  `json:"alpha_pattern"`
	LayersToTransf json.RawMessage `json:"layers_to_transform"`
}

// LoadAdapter reads a PEFT LoRA folder (adapter_config.json +
// adapter_model.safetensors, keys "base_model.model.<module>.lora_A.weight"
// etc.) onto the model for inference. target_modules must be a list of
// module names (suffix-matched as PEFT). Refused by name: peft_type other than LORA, use_dora, use_rslora, bias other than
// "none", fan_in_fan_out, modules_to_save, rank/alpha patterns,
// layers_to_transform. Every targeted module needs both tensors with
// shapes [r, in] and [out, r]; missing, unexpected or wrong-shaped tensors
// are errors naming the tensor and both shapes.
func (m *Model) LoadAdapter(dir string) error {
	path := filepath.Join(dir, AdapterConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("load adapter: %w", err)
	}
	var ac adapterConfig
	if err := hf.DecodeJSON(path, b, &ac); err != nil {
		return fmt.Errorf("load adapter: %w", err)
	}
	l, err := ac.lora(path)
	if err != nil {
		return err
	}
	if err := m.checkLoRA(l); err != nil {
		return fmt.Errorf("load adapter %s: %w", path, err)
	}
	wpath := filepath.Join(dir, AdapterWeightsFile)
	f, err := safetensors.ReadFile(wpath)
	if err != nil {
		return fmt.Errorf("load adapter: %w", err)
	}
	vals := map[string][]float32{}
	want := map[string][]int{}
	for _, p := range m.loraModules(l) {
		want[p.name+".lora_A.weight"] = []int{l.R, p.shape[1]}
		want[p.name+".lora_B.weight"] = []int{p.shape[0], l.R}
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t, ok := f.Tensors[PEFTPrefix+n]
		if !ok {
			return fmt.Errorf("load adapter %s: tensor %q missing (adapter_config.json wants shape %v)", wpath, PEFTPrefix+n, want[n])
		}
		if !slices.Equal(t.Shape, want[n]) {
			return fmt.Errorf("load adapter %s: tensor %q: shape %v, adapter_config.json and config.json want %v", wpath, PEFTPrefix+n, t.Shape, want[n])
		}
		if vals[n], err = t.FiniteFloat32(); err != nil {
			return fmt.Errorf("load adapter %s: tensor %q: %w", wpath, PEFTPrefix+n, err)
		}
	}
	for _, k := range f.Names() {
		if _, ok := want[strings.TrimPrefix(k, PEFTPrefix)]; !ok || !strings.HasPrefix(k, PEFTPrefix) {
			return fmt.Errorf("load adapter %s: unexpected tensor %q shape %v (not a lora_A/lora_B of target_modules %v)", wpath, k, f.Tensors[k].Shape, l.TargetModules)
		}
	}
	return m.attachLoRA(l, vals)
}

// lora converts the PEFT config, refusing what the forward does not implement.
func (ac adapterConfig) lora(path string) (LoRA, error) {
	bad := func(field string, v any, why string) (LoRA, error) {
		return LoRA{}, fmt.Errorf("load adapter %s: field %q: %v is not supported (%s)", path, field, v, why)
	}
	switch {
	case ac.PEFTType != "LORA":
		return bad("peft_type", ac.PEFTType, "only LORA")
	case ac.UseDoRA:
		return bad("use_dora", true, "DoRA adds a magnitude vector")
	case ac.UseRSLoRA:
		return bad("use_rslora", true, "scaling alpha/sqrt(r)")
	case ac.Bias != "" && ac.Bias != "none":
		return bad("bias", ac.Bias, "only \"none\"")
	case ac.FanInFanOut:
		return bad("fan_in_fan_out", true, "Conv1D layouts")
	case len(ac.RankPattern) > 0:
		return bad("rank_pattern", ac.RankPattern, "per-module ranks")
	case len(ac.AlphaPattern) > 0:
		return bad("alpha_pattern", ac.AlphaPattern, "per-module alphas")
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"modules_to_save", ac.ModulesToSave}, {"layers_to_transform", ac.LayersToTransf}} {
		if s := strings.TrimSpace(string(f.raw)); s != "" && s != "null" {
			return bad(f.name, s, "must be null")
		}
	}
	l := LoRA{R: ac.R, Alpha: ac.LoraAlpha, Dropout: ac.LoraDropout}
	raw := strings.TrimSpace(string(ac.TargetModules))
	switch {
	case strings.HasPrefix(raw, "["):
		if err := json.Unmarshal(ac.TargetModules, &l.TargetModules); err != nil {
			return LoRA{}, fmt.Errorf("load adapter %s: field %q: %w", path, "target_modules", err)
		}
	default:
		return LoRA{}, fmt.Errorf("load adapter %s: field %q: want a list of module names, got %s (a regular expression is not supported: list the modules)", path, "target_modules", raw)
	}
	if err := l.Validate(); err != nil {
		return LoRA{}, fmt.Errorf("load adapter %s: %w", path, err)
	}
	return l, nil
}

// Merge folds the adapter into the base weights, W ← W + scaling·B·A for
// every targeted module (PEFT merge_and_unload), removes the LoRA variables
// and makes the base weights trainable again. A model without an adapter is
// left unchanged.
func (m *Model) Merge() error {
	if m.LoRA == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := *m.LoRA
	s := float32(l.Scaling())
	for _, p := range m.loraModules(l) {
		wName := p.name + ".weight"
		if p.name == "lm_head" && m.Config.TieWordEmbeddings {
			return fmt.Errorf("lora merge: lm_head is tied to embed_tokens; merging would change the input embeddings too")
		}
		w, shape, err := m.ParamValues(wName)
		if err != nil {
			return fmt.Errorf("lora merge: %w", err)
		}
		a, _, err := m.ParamValues(p.name + ".lora_A.weight")
		if err != nil {
			return fmt.Errorf("lora merge: %w", err)
		}
		b, _, err := m.ParamValues(p.name + ".lora_B.weight")
		if err != nil {
			return fmt.Errorf("lora merge: %w", err)
		}
		out, in := shape[0], shape[1]
		for o := range out {
			for i := range in {
				var acc float32
				for r := range l.R {
					acc += b[o*l.R+r] * a[r*in+i]
				}
				w[o*in+i] += s * acc
			}
		}
		if err := m.setParam(wName, shape, w, true); err != nil {
			return fmt.Errorf("lora merge: %w", err)
		}
		for _, n := range []string{".lora_A.weight", ".lora_B.weight"} {
			c, vn := nn.ScopeOf(m.Ctx, p.name+n)
			if v := c.GetVariable(vn); v != nil {
				if err := m.Ctx.DeleteVariable(v.Scope(), vn); err != nil {
					return fmt.Errorf("lora merge: %w", err)
				}
			}
		}
	}
	m.LoRA = nil
	m.setBaseTrainable(true)
	m.resetExecs()
	return nil
}
