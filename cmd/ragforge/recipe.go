package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/train/trainer"
)

// resolveRecipe returns the recipe to use: the --recipe value when given,
// else scratch for a checkpoint marked "ragforge_random_init" in its
// config.json (`models init` output, or a model trained from one) and
// pretrained for any other.
func resolveRecipe(flag, modelDir string) (string, error) {
	switch flag {
	case trainer.RecipePretrained, trainer.RecipeScratch:
		return flag, nil
	case "", "auto":
	default:
		return "", fmt.Errorf("--recipe %q: want %s, %s or auto", flag, trainer.RecipePretrained, trainer.RecipeScratch)
	}
	random, err := hf.IsRandomInit(modelDir)
	if err != nil {
		return "", fmt.Errorf("--recipe auto: %w", err)
	}
	if random {
		return trainer.RecipeScratch, nil
	}
	return trainer.RecipePretrained, nil
}

// keepExplicit calls set for every flag of cmd the user gave, so explicit
// flags override the values a recipe applied.
func keepExplicit(cmd *cobra.Command, sets map[string]func()) {
	for name, set := range sets {
		if cmd.Flags().Changed(name) {
			set()
		}
	}
}

func addRecipeFlag(cmd *cobra.Command, p *string, what string) {
	cmd.Flags().StringVar(p, "recipe", "auto", "training recipe: pretrained (the papers' settings) | scratch (settings that make a randomly initialised "+what+" learn; see docs/recipes.md) | auto (scratch when config.json has \"ragforge_random_init\": true); explicit flags override the recipe")
}
