package bert

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
)

// Prefix is the parameter-name prefix HF task models (BertForMaskedLM,
// BertForSequenceClassification, ...) put before the BertModel names.
const Prefix = "bert."

// WeightsFile is the single-file checkpoint name written by Save.
const WeightsFile = safetensors.WeightsName

// paramSpec is one HF parameter and the shape config.json implies for it.
type paramSpec struct {
	name  string
	shape []int
	kind  initKind
}

type initKind int

const (
	initNormal    initKind = iota // N(0, initializer_range): Linear and Embedding weights
	initEmbedding                 // N(0, initializer_range) with the padding row zeroed
	initZeros                     // biases, LayerNorm bias
	initOnes                      // LayerNorm weight
)

// group names the optional parts of a checkpoint.
const (
	groupCore       = "core"
	groupPooler     = "pooler"
	groupClassifier = "classifier"
)

// paramSpecs lists the parameters per group in HF naming (without "bert.").
// DeclaredParameters is the number of encoder parameters (embeddings and
// layers, the paramSpecs core group) config.json declares, computed without
// building them, as float64 so that absurd sizes do not overflow.
func (c Config) DeclaredParameters() float64 {
	h, in := float64(c.HiddenSize), float64(c.IntermediateSize)
	emb := float64(c.VocabSize+c.MaxPositionEmbeddings+c.TypeVocabSize)*h + 2*h
	layer := 4*(h*h+h) + 2*h + (in*h + in) + (h*in + h) + 2*h
	return emb + float64(c.NumHiddenLayers)*layer
}

func paramSpecs(c Config) map[string][]paramSpec {
	h, in := c.HiddenSize, c.IntermediateSize
	dense := func(name string, out, inp int) []paramSpec {
		return []paramSpec{{name + ".weight", []int{out, inp}, initNormal}, {name + ".bias", []int{out}, initZeros}}
	}
	ln := func(name string) []paramSpec {
		return []paramSpec{{name + ".weight", []int{h}, initOnes}, {name + ".bias", []int{h}, initZeros}}
	}
	core := []paramSpec{
		{"embeddings.word_embeddings.weight", []int{c.VocabSize, h}, initEmbedding},
		{"embeddings.position_embeddings.weight", []int{c.MaxPositionEmbeddings, h}, initNormal},
		{"embeddings.token_type_embeddings.weight", []int{c.TypeVocabSize, h}, initNormal},
	}
	core = append(core, ln("embeddings.LayerNorm")...)
	for i := 0; i < c.NumHiddenLayers; i++ {
		p := fmt.Sprintf("encoder.layer.%d.", i)
		for _, qkv := range []string{"query", "key", "value"} {
			core = append(core, dense(p+"attention.self."+qkv, h, h)...)
		}
		core = append(core, dense(p+"attention.output.dense", h, h)...)
		core = append(core, ln(p+"attention.output.LayerNorm")...)
		core = append(core, dense(p+"intermediate.dense", in, h)...)
		core = append(core, dense(p+"output.dense", h, in)...)
		core = append(core, ln(p+"output.LayerNorm")...)
	}
	return map[string][]paramSpec{
		groupCore:       core,
		groupPooler:     dense("pooler.dense", h, h),
		groupClassifier: dense("classifier", c.NumLabels, h),
	}
}

// scopeAndName maps an HF parameter name to its context scope and variable
// name: "a.b.weight" → ("/a/b", "weight").
func scopeAndName(hfName string) (scope, name string) {
	i := strings.LastIndexByte(hfName, '.')
	return "/" + strings.ReplaceAll(hfName[:i], ".", "/"), hfName[i+1:]
}

// hfName is the inverse of scopeAndName.
func hfName(scope, name string) string {
	return strings.ReplaceAll(strings.TrimPrefix(scope, "/"), "/", ".") + "." + name
}

// Model is a BERT encoder whose weights are variables of Ctx.
//
// HasPooler is false for checkpoints saved without BertPooler
// (add_pooling_layer=False); HasClassifier is true when the checkpoint holds
// a BertForSequenceClassification head ("classifier.weight"
// [num_labels, hidden], "classifier.bias" [num_labels]).
//
// Forward, Embed and Score may be called from several goroutines.
type Model struct {
	Config        Config
	Arch          Arch // BERT, or a sibling's (models/xlmr)
	Backend       backends.Backend
	Ctx           *context.Context
	HasPooler     bool
	HasClassifier bool
	// GradientCheckpointing recomputes each encoder layer in the backward
	// pass of training graphs (HF gradient_checkpointing; models/remat).
	GradientCheckpointing bool

	mu    sync.Mutex
	execs map[string]*context.Exec
}

// newModel creates the context and fills it with the given tensors (HF names
// without prefix, all validated).
func newModel(backend backends.Backend, cfg Config, a Arch, values map[string]*tensors.Tensor, pooler, classifier bool) *Model {
	ctx := context.New()
	// Create variables in name order: optimizers and gradient-norm sums walk
	// them in creation order, so a map's random order would make identical
	// runs differ in the last bit.
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		scope, vname := scopeAndName(name)
		ctx.InAbsPath(scope).VariableWithValue(vname, values[name])
	}
	return &Model{Config: cfg, Arch: a, Backend: backend, Ctx: ctx, HasPooler: pooler, HasClassifier: classifier,
		execs: map[string]*context.Exec{}}
}

// Weights yields the variables of the model's HF parameters (encoder, and
// pooler and classifier when present), not the optimizer state a trainer
// keeps in the same context.
func (m *Model) Weights() iter.Seq[*context.Variable] {
	return func(yield func(*context.Variable) bool) {
		groups := []string{groupCore}
		if m.HasPooler {
			groups = append(groups, groupPooler)
		}
		if m.HasClassifier {
			groups = append(groups, groupClassifier)
		}
		specs := paramSpecs(m.Config)
		for _, g := range groups {
			for _, s := range specs[g] {
				scope, vname := scopeAndName(s.name)
				if v := m.Ctx.GetVariableByScopeAndName(scope, vname); v != nil && !yield(v) {
					return
				}
			}
		}
	}
}

// Load reads an HF BERT checkpoint directory: config.json plus
// model.safetensors (or a sharded model.safetensors.index.json).
//
// Accepted layouts: BertModel names ("embeddings.*", "encoder.*",
// "pooler.*") and task-model names with the "bert." prefix (stripped), with
// an optional BertForSequenceClassification head "classifier.{weight,bias}"
// (no prefix). The pooler and the classifier are optional, but each must be
// complete. MLM/NSP heads ("cls.predictions.*", "cls.seq_relationship.*")
// and the "embeddings.position_ids" buffer are ignored on purpose.
//
// Errors name the file and tensor: a missing tensor, an unexpected tensor, a
// tensor whose shape disagrees with config.json (both shapes given), a
// non-F32 dtype, or an invalid config.
func Load(backend backends.Backend, dir string) (*Model, error) { return LoadFor(backend, dir, BERT) }

// LoadFor is Load for the BERT-family architecture a: config.json must carry
// a.ModelType, a.Prefix is stripped, a.Ignored tensors are skipped and the
// classifier head is accepted only when a.Classifier.
func LoadFor(backend backends.Backend, dir string, a Arch) (*Model, error) {
	return LoadAs(backend, dir, a, nn.Float32)
}

// LoadAs is LoadFor holding the weights as dt (nn.DType, HF's torch_dtype;
// Load and LoadFor use float32, the master weights training updates):
// nn.Auto keeps a BF16 checkpoint in bfloat16, half the memory, and the
// encoder still computes in float32. Errors: LoadFor's, and a dt the
// backend cannot hold (float16 on the pure-Go backend).
func LoadAs(backend backends.Backend, dir string, a Arch, dt nn.DType) (*Model, error) {
	if err := dt.CheckOn(backend); err != nil {
		return nil, fmt.Errorf("%s: load %s: %w", a.ModelType, dir, err)
	}
	cfg, err := LoadConfigFor(dir, a)
	if err != nil {
		return nil, err
	}
	tag := a.ModelType
	cfgPath := filepath.Join(dir, ConfigFile)
	raw, err := safetensors.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: load %s: %w", tag, dir, err)
	}
	file := weightsPath(dir)

	// Strip the "bert." prefix; a name present with and without it is ambiguous.
	byName := map[string]*safetensors.Tensor{}
	origName := map[string]string{}
	for name, t := range raw {
		n := strings.TrimPrefix(name, a.Prefix)
		if prev, dup := origName[n]; dup {
			return nil, fmt.Errorf("%s: load %s: tensors %q and %q name the same parameter", tag, file, prev, name)
		}
		byName[n], origName[n] = t, name
	}

	// Before building specs or allocating: a num_hidden_layers of 1e9 would
	// otherwise allocate until the process is killed. Small mismatches get
	// the per-tensor errors below, which name the tensor.
	var held float64
	for _, t := range raw {
		held += float64(t.NumElements())
	}
	if d := cfg.DeclaredParameters(); d > 2*held {
		return nil, fmt.Errorf("%s: load %s: config %s declares %.4g encoder parameters (vocab_size %d, hidden_size %d, num_hidden_layers %d, intermediate_size %d, max_position_embeddings %d) but the checkpoint holds %.0f: config and weights do not match",
			tag, file, cfgPath, d, cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.IntermediateSize, cfg.MaxPositionEmbeddings, held)
	}
	specs := paramSpecs(cfg)
	has := func(group string) (bool, error) {
		found := 0
		var missing string
		for _, s := range specs[group] {
			if _, ok := byName[s.name]; ok {
				found++
			} else if missing == "" {
				missing = s.name
			}
		}
		switch {
		case found == len(specs[group]):
			return true, nil
		case found == 0 && group != groupCore:
			return false, nil
		}
		return false, fmt.Errorf("%s: load %s: missing tensor %q (config %s wants shape %v)",
			tag, file, missing, cfgPath, shapeOf(specs[group], missing))
	}
	values := map[string]*tensors.Tensor{}
	groups := map[string]bool{}
	groupList := []string{groupCore, groupPooler}
	if a.Classifier {
		groupList = append(groupList, groupClassifier)
	}
	for _, group := range groupList {
		ok, err := has(group)
		if err != nil {
			return nil, err
		}
		groups[group] = ok
		if !ok {
			continue
		}
		for _, s := range specs[group] {
			t := byName[s.name]
			if !slices.Equal(t.Shape, s.shape) {
				return nil, fmt.Errorf("%s: load %s: tensor %q: shape %v in checkpoint, config %s wants %v",
					tag, file, origName[s.name], t.Shape, cfgPath, s.shape)
			}
			v, err := nn.LoadWeight(t, dt, backend)
			if err != nil {
				return nil, fmt.Errorf("%s: load %s: tensor %q: %w", tag, file, origName[s.name], err)
			}
			values[s.name] = v
		}
	}
	if groups[groupClassifier] && !groups[groupPooler] {
		return nil, fmt.Errorf("%s: load %s: classifier present but pooler missing (tensor %q): BertForSequenceClassification classifies the pooler output",
			tag, file, "pooler.dense.weight")
	}
	var unexpected []string
	for n := range byName {
		if _, ok := values[n]; ok || ignored(a, n) {
			continue
		}
		unexpected = append(unexpected, origName[n])
	}
	if len(unexpected) > 0 {
		sort.Strings(unexpected)
		return nil, fmt.Errorf("%s: load %s: unexpected tensor %q shape %v (%d unexpected in all; not a %s parameter for config %s)",
			tag, file, unexpected[0], raw[unexpected[0]].Shape, len(unexpected), a.Architecture, cfgPath)
	}
	return newModel(backend, cfg, a, values, groups[groupPooler], groups[groupClassifier]), nil
}

func ignored(a Arch, name string) bool {
	for _, p := range a.Ignored {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func shapeOf(specs []paramSpec, name string) []int {
	for _, s := range specs {
		if s.name == name {
			return s.shape
		}
	}
	return nil
}

// weightsPath names the checkpoint file for error messages.
func weightsPath(dir string) string {
	p := filepath.Join(dir, WeightsFile)
	if _, err := os.Stat(p); err != nil {
		if idx := filepath.Join(dir, safetensors.WeightsIndexName); fileExists(idx) {
			return idx
		}
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// NewRandom creates a model with HF BertPreTrainedModel._init_weights
// initialisation: Linear and Embedding weights ~ N(0, initializer_range),
// the pad_token_id row of word_embeddings zero, biases 0, LayerNorm weight 1
// and bias 0. The pooler is always created; the classifier
// ([NumLabels, HiddenSize]) only when withClassifier. The same seed gives
// the same weights.
func NewRandom(backend backends.Backend, cfg Config, withClassifier bool, seed int64) (*Model, error) {
	return NewRandomFor(backend, cfg, BERT, withClassifier, seed)
}

// NewRandomFor is NewRandom for the BERT-family architecture a (a classifier
// only when a.Classifier). For XLM-R the padding row of
// position_embeddings is zeroed too, as HF's padding_idx does.
func NewRandomFor(backend backends.Backend, cfg Config, a Arch, withClassifier bool, seed int64) (*Model, error) {
	return NewRandomAs(backend, cfg, a, withClassifier, seed, dtypes.Float32)
}

// NewRandomAs is NewRandomFor holding the weights as dt (float32, bfloat16
// or float16, rounded to nearest even from the same draws), built tensor by
// tensor without a float32 copy (nn.NewWeight): a bench shape initialised
// in bfloat16 never holds its float32 size.
func NewRandomAs(backend backends.Backend, cfg Config, a Arch, withClassifier bool, seed int64, dt dtypes.DType) (*Model, error) {
	if err := cfg.ValidateFor(a); err != nil {
		return nil, fmt.Errorf("%s: new random: %w", a.ModelType, err)
	}
	if withClassifier && !a.Classifier {
		return nil, fmt.Errorf("%s: new random: no sequence-classification head for this architecture", a.ModelType)
	}
	if withClassifier && cfg.NumLabels <= 0 {
		return nil, fmt.Errorf("%s: new random: field %q: classifier needs num_labels > 0, got %d", a.ModelType, "num_labels", cfg.NumLabels)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6265727421))
	specs := paramSpecs(cfg)
	groups := []string{groupCore, groupPooler}
	if withClassifier {
		groups = append(groups, groupClassifier)
	}
	values := map[string]*tensors.Tensor{}
	h := cfg.HiddenSize
	for _, g := range groups {
		for _, s := range specs[g] {
			// The padding row of word_embeddings is zero; so is XLM-R's
			// position row padding_idx (positions counted from
			// padding_idx+1 give pads that row, which
			// nn.Embedding(padding_idx=…) keeps at 0). It is drawn and then
			// zeroed, so the draws of every other row do not depend on it.
			zeroRow := -1
			if s.kind == initEmbedding {
				zeroRow = cfg.PadTokenID
			}
			if s.name == "embeddings.position_embeddings.weight" && a.FirstPosition != nil && cfg.PadTokenID < cfg.MaxPositionEmbeddings {
				zeroRow = cfg.PadTokenID
			}
			t, err := nn.NewWeight(backend, s.shape, dt, func(i int) float32 {
				var x float32
				switch s.kind {
				case initNormal, initEmbedding:
					x = float32(rng.NormFloat64() * cfg.InitializerRange)
				case initOnes:
					x = 1
				}
				if i/h == zeroRow {
					return 0
				}
				return x
			})
			if err != nil {
				return nil, fmt.Errorf("%s: new random: %s: %w", a.ModelType, s.name, err)
			}
			values[s.name] = t
		}
	}
	return newModel(backend, cfg, a, values, true, withClassifier), nil
}

// Save writes dir/config.json and dir/model.safetensors (metadata
// {"format": "pt"}, tensors sorted by name, F32) from the current variable
// values. A model without classifier is written with BertModel names (no
// prefix, architectures ["BertModel"] if unset); a model with classifier is
// written as BertForSequenceClassification ("bert." prefix on the encoder and
// pooler, "classifier.*" without, architectures
// ["BertForSequenceClassification"] if unset), which is what transformers
// expects for that class. Save→Load→Save reproduces both files byte for byte.
func (m *Model) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bert: save: %w", err)
	}
	cfg := m.Config
	a := m.Arch
	if a.ModelType == "" {
		a = BERT
	}
	if len(cfg.Architectures) == 0 {
		cfg.Architectures = []string{a.Architecture}
		if m.HasClassifier {
			cfg.Architectures = []string{"BertForSequenceClassification"}
		}
	}
	specs := paramSpecs(cfg)
	groups := []string{groupCore}
	if m.HasPooler {
		groups = append(groups, groupPooler)
	}
	if m.HasClassifier {
		groups = append(groups, groupClassifier)
	}
	var out []*safetensors.Tensor
	for _, g := range groups {
		for _, s := range specs[g] {
			scope, vname := scopeAndName(s.name)
			v := m.Ctx.GetVariableByScopeAndName(scope, vname)
			if v == nil {
				return fmt.Errorf("bert: save %s: variable %q (scope %q) missing from context", dir, s.name, scope)
			}
			t, err := v.Value()
			if err != nil {
				return fmt.Errorf("bert: save %s: variable %q: %w", dir, s.name, err)
			}
			if !slices.Equal(t.Shape().Dimensions, s.shape) {
				return fmt.Errorf("bert: save %s: variable %q: shape %v, config wants %v", dir, s.name, t.Shape().Dimensions, s.shape)
			}
			data, err := nn.TensorFloat32(t)
			if err != nil {
				return fmt.Errorf("bert: save %s: variable %q: %w", dir, s.name, err)
			}
			name := s.name
			if m.HasClassifier && g != groupClassifier {
				name = a.Prefix + name
			}
			out = append(out, safetensors.FromFloat32(name, s.shape, data))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if err := hf.WriteJSON(filepath.Join(dir, ConfigFile), cfg); err != nil {
		return fmt.Errorf("bert: save %s: %w", dir, err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), out, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("bert: save %s: %w", dir, err)
	}
	return nil
}
