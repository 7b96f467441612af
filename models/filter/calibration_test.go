package filter

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

// Calibration's features equal scripts/filter-lexical-auc.py's (the Python
// reference docs/recipes.md uses): the golden file is its output for these
// cases, IDF over the file's distinct doc_texts.
func TestCalibrationFeatureValuesGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/calibration_features.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		DocTexts []string `json:"doc_texts"`
		Cases    []struct {
			Name, Evidence, Question string
			PHelpful                 float64 `json:"p_helpful"`
			Want                     []float64
		}
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	c := DefaultCalibration()
	c.DocFreq = c.CountDocFreq(g.DocTexts)
	if c.DocFreq.Docs != 3 {
		t.Fatalf("doc_freq over %d texts, want the 3 distinct ones", c.DocFreq.Docs)
	}
	for _, tc := range g.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			got, err := c.FeatureValues(tc.PHelpful, Instruction(tc.Evidence, tc.Question))
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range c.Features {
				if math.Abs(got[i]-tc.Want[i]) > 1e-9 {
					t.Errorf("%s = %v, want %v", f, got[i], tc.Want[i])
				}
			}
		})
	}
}

func TestCalibrationCheck(t *testing.T) {
	good := DefaultCalibration()
	good.Weights = []float64{0, 1, 2, 3}
	good.DocFreq = &DocFreq{Docs: 1, Counts: map[string]int{}}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*Calibration)
		want string
	}{
		{func(c *Calibration) { c.Features = nil }, "no features"},
		{func(c *Calibration) { c.Features = []string{"bm25"} }, `feature "bm25"`},
		{func(c *Calibration) { c.Features = []string{FeatureCoverage, FeatureLogOdds, FeatureLevelSum} }, "each once in the order"},
		{func(c *Calibration) { c.Weights = c.Weights[:3] }, "3 weights for 3 features"},
		{func(c *Calibration) { c.Weights = []float64{0, math.Inf(1), 0, 0} }, "weight 1 is +Inf"},
		{func(c *Calibration) { c.DocFreq = nil }, `"coverage" needs doc_freq`},
		{func(c *Calibration) { c.MinChars = 0 }, "min_chars 0"},
		{func(c *Calibration) { c.MaxRun = 0 }, "max_run 0"},
		{func(c *Calibration) { c.PrefixChars = -1 }, "prefix_chars -1"},
	} {
		c := good
		c.Weights = append([]float64(nil), good.Weights...)
		tc.edit(&c)
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", c, err, tc.want)
		}
	}
	// Without coverage no document frequencies are needed.
	words := Calibration{Features: []string{FeatureLevelSum}, Weights: []float64{0, 1}, MinChars: 3, MaxRun: 5}
	if err := words.Check(); err != nil {
		t.Error(err)
	}
}

func TestCalibrationOf(t *testing.T) {
	if c, err := CalibrationOf(nil, false); c != nil || err != nil {
		t.Errorf("absent key: %v, %v", c, err)
	}
	raw := json.RawMessage(`{"features":["level_sum"],"weights":[0,1],"prefix_chars":5,"min_chars":3,"max_run":5,"bias":1}`)
	if _, err := CalibrationOf(raw, true); err == nil || !strings.Contains(err.Error(), `"ragforge_filter_calibration"`) || !strings.Contains(err.Error(), "bias") {
		t.Errorf("unknown field: %v", err)
	}
	raw = json.RawMessage(`{"features":["level_sum"],"weights":[-1, 2],"prefix_chars":5,"min_chars":3,"max_run":5}`)
	c, err := CalibrationOf(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	// "Lavar em água" shares a run of 3 words: level sum 9, feature 9/50.
	p, err := c.Apply(0.5, Instruction("Lavar em água corrente.", "Lavar em água?"))
	if want := Sigmoid(-1 + 2*9.0/50); err != nil || math.Abs(p-want) > 1e-15 {
		t.Errorf("Apply = %v, %v; want %v", p, err, want)
	}
	if _, err := c.Apply(0.5, "no instruction"); err == nil {
		t.Error("Apply of a non-RAG² instruction: no error")
	}
}
