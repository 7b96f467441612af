package selflearn

import (
	"fmt"
	"io"
	"slices"

	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/train/lora"
	"github.com/ragforge/ragforge/train/trainer"
)

// Settings are what a caller asks of a run beyond Config: the recipe and
// which fields it set explicitly (they win over the recipe and the start
// retriever's files).
type Settings struct {
	// Recipe is pretrained, scratch, or auto/"" (by the retriever's
	// config.json, trainer.ResolveRecipe).
	Recipe string
	// Explicit names the fields given explicitly: RetrieverLR,
	// RetrieverBatch, Epochs, FusionHoldout, QueriesPerChunk keep their
	// value over the recipe's; MaxLength over the retriever's; GeneratorLR,
	// GeneratorBatch, Epochs, LoRAWarmupSteps, LoRASaveSteps make a decoder
	// generator's LoRA (GeneratorLoRA) from lora.DefaultConfig().
	Explicit []string
	// A decoder generator's LoRA warmup and checkpoint spacing, used when
	// named in Explicit.
	LoRAWarmupSteps, LoRASaveSteps int
}

// Prepare returns c with the recipe applied (Settings.Recipe, recorded in
// Config.Recipe), a decoder generator's LoRA from the explicit generator
// settings, and the start retriever's token limit, prompts and
// normalization (encode.DirSettings; an explicit MaxLength that differs is
// noted on note), validated.
func Prepare(c Config, s Settings, note io.Writer) (Config, error) {
	explicit := func(f string) bool { return slices.Contains(s.Explicit, f) }
	if c.RetrieverDir != "" {
		name, err := trainer.ResolveRecipe(s.Recipe, c.RetrieverDir)
		if err != nil {
			return c, err
		}
		r, err := LookupRecipe(name)
		if err != nil {
			return c, err
		}
		x := c
		r.Apply(&c)
		for f, keep := range map[string]func(){
			"RetrieverLR": func() { c.RetrieverLR = x.RetrieverLR }, "RetrieverBatch": func() { c.RetrieverBatch = x.RetrieverBatch },
			"Epochs": func() { c.Epochs = x.Epochs }, "FusionHoldout": func() { c.FusionHoldout = x.FusionHoldout },
			"QueriesPerChunk": func() { c.QueriesPerChunk = x.QueriesPerChunk },
		} {
			if explicit(f) {
				keep()
			}
		}
		c.Recipe = name
	}
	setGeneratorLoRA(&c, s, explicit)
	if err := retrieverSettings(&c, explicit("MaxLength"), note); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// setGeneratorLoRA sets c.GeneratorLoRA, a decoder generator's LoRA SFT,
// from lora.DefaultConfig() (AutoMIR) and the generator settings given
// explicitly. With none given, or a generator that is not a local decoder,
// it stays zero (the defaults; the config hash of T5 runs stays).
func setGeneratorLoRA(c *Config, s Settings, explicit func(string) bool) {
	spec, err := generate.ParseGeneratorSpec(c.Generator)
	if err != nil || spec.Dir == "" {
		return // Validate reports a bad spec
	}
	if mt, err := hf.ModelType(spec.Dir); err != nil || !slices.Contains(decoder.ModelTypes(), mt) {
		return
	}
	lc := lora.DefaultConfig()
	changed := false
	for f, apply := range map[string]func(){
		"GeneratorLR":     func() { lc.LearningRate = c.GeneratorLR },
		"GeneratorBatch":  func() { lc.BatchSize = c.GeneratorBatch },
		"Epochs":          func() { lc.Epochs = c.Epochs },
		"LoRAWarmupSteps": func() { lc.WarmupSteps = s.LoRAWarmupSteps },
		"LoRASaveSteps":   func() { lc.SaveSteps = s.LoRASaveSteps },
	} {
		if explicit(f) {
			apply()
			changed = true
		}
	}
	if changed {
		c.GeneratorLoRA = lc
	}
}

// retrieverSettings takes the token limit, the query and document prompts
// and the normalization of the rounds from the start retriever's
// sentence-transformers files (encode.DirSettings) when it has them; an
// explicit MaxLength overrides the limit and says so on note. Every
// round's retriever is trained and exported with them, so the next round
// reads them back the same way.
func retrieverSettings(c *Config, maxLengthSet bool, note io.Writer) error {
	if c.RetrieverDir == "" {
		return nil // Validate reports it
	}
	s, src, err := encode.DirSettings(c.RetrieverDir)
	if err != nil {
		return err
	}
	if src.MaxLength == encode.SourceModel {
		switch {
		case !maxLengthSet:
			c.MaxLength = s.MaxLength
		case c.MaxLength != s.MaxLength:
			fmt.Fprintf(note, "retriever %s: --max-length %d overrides the model's %d\n", c.RetrieverDir, c.MaxLength, s.MaxLength)
		}
	}
	if src.QueryPrefix == encode.SourceModel {
		c.QueryInstruction, c.DocInstruction, c.Unnormalized = s.QueryPrefix, s.PassagePrefix, !s.Normalize
	}
	return nil
}
