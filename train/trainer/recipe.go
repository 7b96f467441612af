package trainer

import (
	"fmt"

	"github.com/ragforge/ragforge/models/hf"
)

// Recipe names shared by every training command. RecipePretrained keeps the
// papers' settings, meant for real checkpoints; RecipeScratch is for a
// randomly initialised model (`ragforge models init`, marked
// "ragforge_random_init" in config.json), which those settings barely move.
// Each trainer (train/filtertrain, train/selflearn) defines what a recipe sets.
const (
	RecipePretrained = "pretrained"
	RecipeScratch    = "scratch"
)

// LookupRecipe returns recipes[name]; an unknown name is an error.
func LookupRecipe[R any](recipes map[string]R, name string) (R, error) {
	r, ok := recipes[name]
	if !ok {
		var zero R
		return zero, fmt.Errorf("recipe %q: want %s or %s", name, RecipePretrained, RecipeScratch)
	}
	return r, nil
}

// ResolveRecipe returns the recipe to use: name when it is RecipePretrained
// or RecipeScratch, else ("" or "auto") RecipeScratch for a checkpoint
// marked "ragforge_random_init" in its config.json (`models init` output,
// or a model trained from one) and RecipePretrained for any other.
// Errors name the recipe as "recipe", which the CLI prefixes with "--".
func ResolveRecipe(name, modelDir string) (string, error) {
	switch name {
	case RecipePretrained, RecipeScratch:
		return name, nil
	case "", "auto":
	default:
		return "", fmt.Errorf("recipe %q: want %s, %s or auto", name, RecipePretrained, RecipeScratch)
	}
	random, err := hf.IsRandomInit(modelDir)
	if err != nil {
		return "", fmt.Errorf("recipe auto: %w", err)
	}
	if random {
		return RecipeScratch, nil
	}
	return RecipePretrained, nil
}
