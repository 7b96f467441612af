package lora

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/safetensors"
)

// Module is one adapted projection: its HF module name
// ("model.layers.0.self_attn.q_proj") and the in/out features of its
// nn.Linear weight [Out, In].
type Module struct {
	Name    string
	In, Out int
}

// AKey and BKey are the module's LoRA weight names without
// decoder.PEFTPrefix, as the decoder's variables are named
// (decoder.Model.LoRAVariableNames): "<module>.lora_A.weight" [r, In] and
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
// every field at PEFT's default except those a decoder.LoRA sets. Fields
// are in sorted order, as in the file.
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
func newAdapterConfig(a decoder.LoRA, baseModel string) (adapterConfig, error) {
	a, err := NormalizeLoRA(a)
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

// WriteAdapter writes a PEFT adapter folder dir (created if absent):
// adapter_config.json (as peft 0.15 writes it) and adapter_model.safetensors
// with weights keyed decoder.PEFTPrefix + AKey/BKey, metadata {"format": "pt"}, as
// PeftModel.save_pretrained writes them; PeftModel.from_pretrained(base,
// dir) loads it. weights maps AKey/BKey to flat float32 values; every
// module needs both.
func WriteAdapter(dir string, a decoder.LoRA, baseModel string, modules []Module, weights map[string][]float32) error {
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
			ts = append(ts, safetensors.FromFloat32(decoder.PEFTPrefix+k.key, k.shape, v))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write adapter: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, decoder.AdapterWeightsFile), ts, safetensors.DefaultMetadata()); err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	if err := hf.WriteJSON(filepath.Join(dir, decoder.AdapterConfigFile), cfg); err != nil {
		return fmt.Errorf("write adapter %s: %w", dir, err)
	}
	return nil
}
