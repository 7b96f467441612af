package fusion

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

// WeightsFile is the file beside a dense encoder (in its model directory)
// holding the RRF weights chosen for it, e.g. by `ragforge selflearn` on
// held-out pseudo-queries. Hybrid retrieval with that encoder uses them
// unless weights are given explicitly.
const WeightsFile = "ragforge_fusion.json"

// Weights are hybrid RRF weights for the {dense, BM25} lists with how they
// were chosen.
type Weights struct {
	Dense float64 `json:"dense_weight"`
	BM25  float64 `json:"bm25_weight"`
	// ChosenBy says how (e.g. "nDCG@10 on 12 held-out pseudo-queries").
	ChosenBy string `json:"chosen_by,omitempty"`
}

// Validate checks both weights are finite, ≥ 0 and not both 0.
func (w Weights) Validate() error {
	for _, x := range []float64{w.Dense, w.BM25} {
		if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("fusion weights %v/%v: must be finite and >= 0", w.Dense, w.BM25)
		}
	}
	if w.Dense+w.BM25 == 0 {
		return errors.New("fusion weights: dense and bm25 are both 0")
	}
	return nil
}

// WriteWeights writes dir/WeightsFile.
func WriteWeights(dir string, w Weights) error {
	if err := w.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, WeightsFile)
	if err := atomicfile.WriteBytes(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("fusion: write %s: %w", path, err)
	}
	return nil
}

// ReadWeights reads dir/WeightsFile; ok is false when there is none.
// Errors: unreadable or malformed file, invalid weights (naming the file).
func ReadWeights(dir string) (w Weights, ok bool, err error) {
	path := filepath.Join(dir, WeightsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Weights{}, false, nil
	}
	if err != nil {
		return Weights{}, false, fmt.Errorf("fusion: %w", err)
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return Weights{}, false, fmt.Errorf("fusion: %s: %w", path, err)
	}
	if err := w.Validate(); err != nil {
		return Weights{}, false, fmt.Errorf("fusion: %s: %w", path, err)
	}
	return w, true, nil
}
