package trainbench

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := func(shape string, f func(*Options)) Options {
		o := DefaultOptions(shape)
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string // substring of the error; "" = valid
	}{
		{"filter default", DefaultOptions("flan-t5-large"), ""},
		{"bge-large default", DefaultOptions("bge-large"), ""},
		{"bge-m3 checkpointed", ok("bge-m3", func(o *Options) { o.GradientCheckpointing = true }), ""},
		{"unknown shape", DefaultOptions("t5-xxl"), `--shape "t5-xxl"`},
		{"batch 0", ok("bge-large", func(o *Options) { o.Batch = 0 }), "--batch 0: must be at least 1"},
		{"seq 1", ok("flan-t5-large", func(o *Options) { o.Seq = 1 }), "--seq 1: must be at least 2"},
		{"negative override", ok("bge-large", func(o *Options) { o.Layers = -1 }), "--layers -1: must be at least 0"},
		{"negatives on t5", ok("flan-t5-large", func(o *Options) { o.Negatives = 3 }), "apply to bge-large and bge-m3, not flan-t5-large"},
		{"target tokens on bge", ok("bge-m3", func(o *Options) { o.TargetTokens = 2 }), "applies to flan-t5-large, not bge-m3"},
		{"heads do not divide", ok("bge-large", func(o *Options) { o.Hidden = 100 }), "--hidden 100 is not a multiple of --heads 16"},
	} {
		err := tc.o.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRunSmall runs the step of each shape shrunk, with and without
// checkpointing: it completes, is timed and says which estimate it used.
func TestRunSmall(t *testing.T) {
	for _, shape := range Shapes {
		for _, ckpt := range []bool{false, true} {
			o := DefaultOptions(shape)
			o.Layers, o.Hidden, o.Heads, o.FFN, o.Vocab, o.Seq, o.Batch = 2, 64, 4, 128, 300, 24, 2
			o.GradientCheckpointing = ckpt
			if o.Negatives > 0 {
				o.Negatives = 2
			}
			r, err := Run(o)
			if err != nil {
				t.Fatalf("%s checkpointing %t: %v", shape, ckpt, err)
			}
			if r.SecondsPerStep <= 0 || r.PeakRSS <= 0 || r.Estimate.GradientCheckpointing != ckpt {
				t.Errorf("%s checkpointing %t: %+v", shape, ckpt, r)
			}
		}
	}
}
