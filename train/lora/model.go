package lora

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/train/trainer"
)

// loadModel loads the decoder at dir with a fresh adapter a (PEFT init
// from seed), or the adapter folder adapterDir when not ""; the base
// weights are frozen (decoder.AddLoRA, LoadAdapter), so the trainer keeps
// optimizer state for the LoRA weights only.
func loadModel(backendName, dir string, a decoder.LoRA, seed int64, adapterDir string) (*decoder.Model, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, err
	}
	m, err := decoder.Load(be, dir)
	if err != nil {
		return nil, err
	}
	if adapterDir != "" {
		err = m.LoadAdapter(adapterDir)
	} else {
		err = m.AddLoRA(a, uint64(seed))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return m, nil
}

// lossFn is the SFT loss of one micro-batch for train/trainer: inputs are
// Batch.Inputs (input_ids, attention_mask, position_ids, labels, weight);
// the mean over its scored tokens times the weight (MicroWeights).
func lossFn(m *decoder.Model) trainer.LossFn {
	return func(ctx *mlctx.Context, in []*graph.Node) *graph.Node {
		return graph.Mul(m.LossGraph(ctx, in[0], in[1], in[2], in[3]), in[4])
	}
}

// loraWeights returns the adapter's values by variable name (PEFT key
// without decoder.PEFTPrefix) and the modules they belong to.
func loraWeights(m *decoder.Model) (map[string][]float32, []Module, error) {
	vals := map[string][]float32{}
	var mods []Module
	for _, n := range m.LoRAVariableNames() {
		v, shape, err := m.ParamValues(n)
		if err != nil {
			return nil, nil, err
		}
		vals[n] = v
		if mod, ok := strings.CutSuffix(n, ".lora_A.weight"); ok {
			mods = append(mods, Module{Name: mod, In: shape[1]})
		}
	}
	for i := range mods {
		b, ok := vals[mods[i].BKey()]
		if !ok {
			return nil, nil, fmt.Errorf("lora: module %s has lora_A but no lora_B", mods[i].Name)
		}
		mods[i].Out = len(b) / m.LoRA.R
	}
	return vals, mods, nil
}

// paramCounts returns the trainable (LoRA) and frozen parameter counts.
func paramCounts(m *decoder.Model) (trainable, frozen int64) {
	for v := range m.Ctx.IterVariables() {
		if strings.HasPrefix(v.Scope(), trainer.StateScope) || v.Name() == mlctx.RNGStateVariableName {
			continue
		}
		n := int64(v.Shape().Size())
		if v.Trainable {
			trainable += n
		} else {
			frozen += n
		}
	}
	return trainable, frozen
}

// baseOnly reports the files of a base model directory a merged
// checkpoint must not copy: its weights (written merged by Save, any
// shard or index) and config.json (written by Save).
func baseOnly(name string) bool {
	return name == hf.ConfigName || strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".safetensors.index.json") ||
		strings.HasSuffix(name, ".bin") || strings.HasSuffix(name, ".bin.index.json") || strings.HasSuffix(name, ".pth")
}

// Merge writes outDir, the HF checkpoint of baseDir with the PEFT adapter
// at adapterDir merged in (decoder.Model.Merge: W ← W + scaling·B·A, PEFT
// merge_and_unload): config.json, model.safetensors and every other file
// of baseDir (tokenizer, generation config, chat template). outDir is written through a temporary sibling and
// renamed, so it is complete or absent. Errors: outDir exists, load or
// write failures.
func Merge(backendName, baseDir, adapterDir, outDir string) error {
	if _, err := os.Lstat(outDir); err == nil {
		return fmt.Errorf("merge lora: %s already exists (not overwritten)", outDir)
	}
	be, err := backend.New(backendName)
	if err != nil {
		return fmt.Errorf("merge lora: %w", err)
	}
	m, err := decoder.Load(be, baseDir)
	if err != nil {
		return fmt.Errorf("merge lora: %w", err)
	}
	if err := m.LoadAdapter(adapterDir); err != nil {
		return fmt.Errorf("merge lora: %w", err)
	}
	if err := m.Merge(); err != nil {
		return fmt.Errorf("merge lora: %w", err)
	}
	err = atomicfile.Dir(outDir, false, func(tmp string) error {
		if err := m.Save(tmp); err != nil {
			return err
		}
		ents, err := os.ReadDir(baseDir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || baseOnly(e.Name()) {
				continue
			}
			if err := hf.CopyFile(filepath.Join(baseDir, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("merge lora: %w", err)
	}
	return nil
}
