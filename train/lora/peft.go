package lora

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/safetensors"
)

// File names of a PEFT adapter folder (peft.utils.constants CONFIG_NAME,
// SAFETENSORS_WEIGHTS_NAME).
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
)

// PEFTPrefix is the prefix PeftModelForCausalLM puts before the base model's
// parameter names in adapter_model.safetensors.
const PEFTPrefix = "base_model.model."

// Module is one adapted projection: its HF module name
// ("model.layers.0.self_attn.q_proj") and the in/out features of its
// nn.Linear weight [Out, In].
type Module struct {
	Name    string
	In, Out int
}

// AKey and BKey are the module's LoRA weight names without PEFTPrefix, as
// the decoder's variables are named: "<module>.lora_A.weight" [r, In] and
// "<module>.lora_B.weight" [Out, r].
func (m Module) AKey() string { return m.Name + ".lora_A.weight" }
func (m Module) BKey() string { return m.Name + ".lora_B.weight" }

// pyFloat marshals as Python's json.dumps writes a float: 0.0, 0.05, 1e-05.
type pyFloat float64

func (f pyFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if v == math.Trunc(v) && math.Abs(v) < 1e16 {
		return []byte(strconv.FormatFloat(v, 'f', 1, 64)), nil
	}
	return []byte(strconv.FormatFloat(v, 'g', -1, 64)), nil
}

// pyNumber marshals an integral value as an int (PEFT's lora_alpha: int),
// any other as pyFloat.
type pyNumber float64

func (f pyNumber) MarshalJSON() ([]byte, error) {
	if v := float64(f); v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return []byte(strconv.FormatInt(int64(v), 10)), nil
	}
	return pyFloat(f).MarshalJSON()
}

// adapterConfig is adapter_config.json as peft 0.15 LoraConfig.to_dict()
// saves it (save_pretrained: json.dumps(indent=2, sort_keys=True)), with
// every field at PEFT's default except those an Adapter sets. Field order is
// sorted, as the file.
type adapterConfig struct {
	AlphaPattern          map[string]any `json:"alpha_pattern"`
	AutoMapping           any            `json:"auto_mapping"`
	BaseModel             string         `json:"base_model_name_or_path"`
	Bias                  string         `json:"bias"`
	CordaConfig           any            `json:"corda_config"`
	EvaConfig             any            `json:"eva_config"`
	ExcludeModules        any            `json:"exclude_modules"`
	FanInFanOut           bool           `json:"fan_in_fan_out"`
	InferenceMode         bool           `json:"inference_mode"`
	InitLoraWeights       bool           `json:"init_lora_weights"`
	LayerReplication      any            `json:"layer_replication"`
	LayersPattern         any            `json:"layers_pattern"`
	LayersToTransform     any            `json:"layers_to_transform"`
	LoftqConfig           map[string]any `json:"loftq_config"`
	LoraAlpha             pyNumber       `json:"lora_alpha"`
	LoraBias              bool           `json:"lora_bias"`
	LoraDropout           pyFloat        `json:"lora_dropout"`
	MegatronConfig        any            `json:"megatron_config"`
	MegatronCore          string         `json:"megatron_core"`
	ModulesToSave         any            `json:"modules_to_save"`
	PeftType              string         `json:"peft_type"`
	R                     int            `json:"r"`
	RankPattern           map[string]any `json:"rank_pattern"`
	Revision              any            `json:"revision"`
	TargetModules         []string       `json:"target_modules"`
	TaskType              string         `json:"task_type"`
	TrainableTokenIndices any            `json:"trainable_token_indices"`
	UseDora               bool           `json:"use_dora"`
	UseRslora             bool           `json:"use_rslora"`
}

// newAdapterConfig returns adapter_config.json for a (validated) adapter
// of baseModel as peft 0.15.2 PeftModel.save_pretrained writes it for
// LoraConfig(r, lora_alpha, lora_dropout, target_modules,
// task_type="CAUSAL_LM"): inference_mode true, target_modules sorted.
func newAdapterConfig(a Adapter, baseModel string) (adapterConfig, error) {
	a, err := a.Normalize()
	if err != nil {
		return adapterConfig{}, err
	}
	return adapterConfig{
		AlphaPattern: map[string]any{}, BaseModel: baseModel, Bias: "none", InferenceMode: true,
		InitLoraWeights: true, LoftqConfig: map[string]any{}, LoraAlpha: pyNumber(a.Alpha),
		LoraDropout: pyFloat(a.Dropout), MegatronCore: "megatron.core", PeftType: "LORA", R: a.R,
		RankPattern: map[string]any{}, TargetModules: a.TargetModules, TaskType: "CAUSAL_LM",
	}, nil
}

// ReadAdapterConfig reads the LoRA settings and base_model_name_or_path of
// a PEFT adapter folder's adapter_config.json. Errors name the file and
// field: not LORA, a feature ragforge does not implement (DoRA, rsLoRA,
// fan_in_fan_out, bias other than "none", rank/alpha patterns), values
// Adapter.Validate refuses.
func ReadAdapterConfig(dir string) (Adapter, string, error) {
	path := filepath.Join(dir, AdapterConfigFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return Adapter{}, "", fmt.Errorf("read adapter config: %w", err)
	}
	var c struct {
		PeftType      string          `json:"peft_type"`
		BaseModel     string          `json:"base_model_name_or_path"`
		R             int             `json:"r"`
		LoraAlpha     float64         `json:"lora_alpha"`
		LoraDropout   float64         `json:"lora_dropout"`
		TargetModules json.RawMessage `json:"target_modules"`
		Bias          string          `json:"bias"`
		UseDora       bool            `json:"use_dora"`
		UseRslora     bool            `json:"use_rslora"`
		FanInFanOut   bool            `json:"fan_in_fan_out"`
		RankPattern   map[string]any  `json:"rank_pattern"`
		AlphaPattern  map[string]any  `json:"alpha_pattern"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return Adapter{}, "", fmt.Errorf("read %s: %w", path, err)
	}
	refuse := func(field string, v any) error {
		return fmt.Errorf("read %s: field %q: %v is not supported", path, field, v)
	}
	switch {
	case c.PeftType != "LORA":
		return Adapter{}, "", refuse("peft_type", fmt.Sprintf("%q", c.PeftType))
	case c.UseDora:
		return Adapter{}, "", refuse("use_dora", true)
	case c.UseRslora:
		return Adapter{}, "", refuse("use_rslora", true)
	case c.FanInFanOut:
		return Adapter{}, "", refuse("fan_in_fan_out", true)
	case c.Bias != "none" && c.Bias != "":
		return Adapter{}, "", refuse("bias", fmt.Sprintf("%q", c.Bias))
	case len(c.RankPattern) > 0:
		return Adapter{}, "", refuse("rank_pattern", c.RankPattern)
	case len(c.AlphaPattern) > 0:
		return Adapter{}, "", refuse("alpha_pattern", c.AlphaPattern)
	}
	a := Adapter{R: c.R, Alpha: c.LoraAlpha, Dropout: c.LoraDropout}
	// target_modules is a list or one string (a regex in PEFT, or "all-linear").
	var one string
	if err := json.Unmarshal(c.TargetModules, &a.TargetModules); err != nil {
		if err := json.Unmarshal(c.TargetModules, &one); err != nil {
			return Adapter{}, "", fmt.Errorf("read %s: field %q: want a list of names or %q", path, "target_modules", AllLinear)
		}
		a.TargetModules = []string{one}
	}
	if err := a.Validate(); err != nil {
		return Adapter{}, "", fmt.Errorf("read %s: %w", path, err)
	}
	return a, c.BaseModel, nil
}

// InitA draws the lora_A weights of modules as PEFT's
// reset_lora_parameters(init_lora_weights=True):
// nn.init.kaiming_uniform_(A, a=√5), i.e. U(−1/√In, 1/√In) (gain
// √(2/(1+5)) times √(3/fan_in)). Values come from one PCG(seed, 0x10ea)
// stream consumed in the order of modules, so a seed gives the same
// adapter on every run (not torch's values). Returns flat [r, In] slices
// by AKey. lora_B starts at zero.
func InitA(modules []Module, r int, seed int64) map[string][]float32 {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x10ea))
	out := make(map[string][]float32, len(modules))
	for _, m := range modules {
		bound := 1 / math.Sqrt(float64(m.In))
		v := make([]float32, r*m.In)
		for i := range v {
			v[i] = float32((2*rng.Float64() - 1) * bound)
		}
		out[m.AKey()] = v
	}
	return out
}

// WriteAdapter writes a PEFT adapter folder dir (created if absent):
// adapter_config.json (AdapterConfigJSON) and adapter_model.safetensors
// with weights keyed PEFTPrefix + AKey/BKey, metadata {"format": "pt"}, as
// PeftModel.save_pretrained writes them; PeftModel.from_pretrained(base,
// dir) loads it. weights maps AKey/BKey to flat float32 values; every
// module needs both.
func WriteAdapter(dir string, a Adapter, baseModel string, modules []Module, weights map[string][]float32) error {
	cfg, err := newAdapterConfig(a, baseModel)
	if err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	var ts []*safetensors.Tensor
	for _, m := range modules {
		for _, k := range []struct {
			key   string
			shape []int
		}{{m.AKey(), []int{a.R, m.In}}, {m.BKey(), []int{m.Out, a.R}}} {
			v, ok := weights[k.key]
			if !ok || len(v) != k.shape[0]*k.shape[1] {
				return fmt.Errorf("write adapter %s: tensor %q: %d values, want shape %v", dir, k.key, len(v), k.shape)
			}
			ts = append(ts, safetensors.FromFloat32(PEFTPrefix+k.key, k.shape, v))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write adapter: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, AdapterWeightsFile), ts, safetensors.DefaultMetadata()); err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	if err := hf.WriteJSON(filepath.Join(dir, AdapterConfigFile), cfg); err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	return nil
}

// ReadAdapterWeights reads adapter_model.safetensors of dir into flat
// float32 values keyed without PEFTPrefix. Errors: a key without the
// prefix, or that is not a lora_A/lora_B weight.
func ReadAdapterWeights(dir string) (map[string][]float32, map[string][]int, error) {
	path := filepath.Join(dir, AdapterWeightsFile)
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read adapter weights: %w", err)
	}
	vals, shapes := map[string][]float32{}, map[string][]int{}
	for name, t := range f.Tensors {
		k, ok := strings.CutPrefix(name, PEFTPrefix)
		if !ok || !(strings.HasSuffix(k, ".lora_A.weight") || strings.HasSuffix(k, ".lora_B.weight")) {
			return nil, nil, fmt.Errorf("read %s: tensor %q: want %s<module>.lora_{A,B}.weight", path, name, PEFTPrefix)
		}
		v, err := t.Float32()
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: tensor %q: %w", path, name, err)
		}
		vals[k], shapes[k] = v, t.Shape
	}
	return vals, shapes, nil
}
