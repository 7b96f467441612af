package filter

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
