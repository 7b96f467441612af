package main

import (
	"fmt"
	"os"

	"github.com/ragforge/ragforge/train/trainer"
)

// modelDir resolves the --flag value dir to a model directory: dir itself,
// or, for a `train filter` output directory, its best (else latest)
// checkpoint, saying on stderr which one is used.
func modelDir(g *globals, flag, dir string) (string, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return dir, nil // the loader reports what is wrong with it
	}
	resolved, which, err := trainer.ResolveModelDir(dir)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flag, err)
	}
	if which != "" {
		fmt.Fprintf(g.Err, "--%s %s is a training output directory: using its %s checkpoint %s\n", flag, dir, which, resolved)
	}
	return resolved, nil
}
