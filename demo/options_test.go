package demo

import (
	"strings"
	"testing"
)

// Settings that make no sense together are refused before any work, with
// the flag names of `ragforge demo`.
func TestOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Options)
		want string // "" = valid
	}{
		{func(*Options) {}, ""},
		{func(o *Options) { o.Corpus = "c.jsonl" }, "--corpus and --qa go together"},
		{func(o *Options) { o.Recipe = "fast" }, `--recipe "fast": want pretrained, scratch or auto`},
		{func(o *Options) { o.FilterMatchMarksRare = []float64{0.05} }, "--filter-match-marks-rare needs --filter-match-marks"},
		{func(o *Options) { o.FilterMatchMarks, o.FilterMatchMarksRare = true, []float64{0, 0.1} }, "--filter-match-marks-rare: [0 0.1] holds 0"},
		{func(o *Options) { o.FilterCalibrate, o.FilterEnsembleSeeds = true, []int64{7} }, "--filter-calibrate with --filter-ensemble-seeds"},
		{func(o *Options) { o.FilterCalibrate, o.FilterFinetuneEpochs = true, 1 }, "--filter-calibrate with --filter-finetune-epochs"},
		{func(o *Options) { o.ICTPerChunk = 0 }, "--ict-per-chunk 0: must be at least 1"},
		{func(o *Options) { o.Negatives = -2 }, "--negatives -2: must be at least -1"},
		{func(o *Options) { o.FilterEnsembleSeeds = []int64{42} }, "--filter-ensemble-seeds: seed 42 twice"},
		{func(o *Options) { o.FilterEnsembleSeeds = []int64{7, 7} }, "--filter-ensemble-seeds: seed 7 twice"},
		{func(o *Options) { o.BM25.Preset = "okapi" }, `--bm25-preset "okapi"`},
	} {
		o := DefaultOptions()
		tc.edit(&o)
		err := o.Check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", o, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}
