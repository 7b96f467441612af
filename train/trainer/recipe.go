package trainer

import "fmt"

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
