package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/train/trainer"
)

// resolveRecipe is trainer.ResolveRecipe for the --recipe flag.
func resolveRecipe(flag, modelDir string) (string, error) {
	r, err := trainer.ResolveRecipe(flag, modelDir)
	if err != nil {
		return "", fmt.Errorf("--%w", err)
	}
	return r, nil
}

func addRecipeFlag(cmd *cobra.Command, p *string, what string) {
	cmd.Flags().StringVar(p, "recipe", "auto", "training recipe: pretrained (the papers' settings) | scratch (settings that make a randomly initialised "+what+" learn; see docs/recipes.md) | auto (scratch when config.json has \"ragforge_random_init\": true); explicit flags override the recipe")
}
