package filtertrain

import (
	"math"
	"strings"
	"testing"
)

func TestConfigValidateLabelSmoothing(t *testing.T) {
	for _, tc := range []struct {
		eps     float64
		wantErr string // "" = valid
	}{
		{0, ""},
		{0.1, ""},
		{0.999, ""},
		{1, `"LabelSmoothing": 1, want in [0, 1)`},
		{-0.1, `"LabelSmoothing": -0.1`},
		{math.NaN(), `"LabelSmoothing": NaN`},
	} {
		c := DefaultConfig()
		c.ModelDir, c.OutputDir, c.LabelSmoothing = "m", "o", tc.eps
		err := c.Validate()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("label smoothing %v: %v", tc.eps, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("label smoothing %v: error %v, want one containing %q", tc.eps, err, tc.wantErr)
		}
	}
}

// A run with label smoothing must not resume one without (it changes the
// trajectory); the default keeps the hash of checkpoints written before the
// field existed.
func TestConfigHashLabelSmoothing(t *testing.T) {
	c := DefaultConfig()
	base := configHash(c)
	c.LabelSmoothing = 0.1
	if configHash(c) == base {
		t.Error("label smoothing 0.1 has the hash of 0")
	}
}

func TestMeanProbs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members [][]float64
		want    []float64
	}{
		{"none", nil, nil},
		{"one member is itself", [][]float64{{0.2, 0.9}}, []float64{0.2, 0.9}},
		{"two", [][]float64{{0.2, 1}, {0.6, 0}}, []float64{0.4, 0.5}},
		{"three", [][]float64{{0, 0.3}, {0.3, 0.3}, {0.9, 0.3}}, []float64{0.4, 0.3}},
	} {
		got := MeanProbs(tc.members)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-12 {
				t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
			}
		}
	}
	if _, err := EvaluateEnsemble(nil, nil, EvalOptions{}); err == nil || !strings.Contains(err.Error(), "no filter checkpoint") {
		t.Errorf("no member: %v", err)
	}
}
