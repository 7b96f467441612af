package retriever

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/xlmr"
)

// BenchTrainStep runs an InfoNCE update and encoding at a tiny shape for
// both architectures and reports positive rates.
func TestBenchTrainStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  bert.Config
		arch bert.Arch
	}{
		{"bert", bert.TinyConfig(300), bert.BERT},
		{"xlm-roberta", xlmr.TinyConfig(300), xlmr.Arch},
	} {
		r, err := BenchTrainStep("go:ops_sequential", tc.cfg, tc.arch,
			BenchShape{Queries: 2, Negatives: 1, Length: 16, SubBatchTokens: 32, EncodeBatch: 2, EncodeLength: 16}, 1)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !(r.MsPerStepMedian > 0 && r.TrainTokensPerSec > 0 && r.EncodePassagesPerSec > 0) {
			t.Fatalf("%s: %+v", tc.name, r)
		}
	}
	// Encoding with the weights held in bfloat16: from the init (encode
	// only) or cast after the float32 step, half the bytes of float32.
	var f32 int64
	for _, tc := range []struct {
		dt   dtypes.DType
		skip bool
	}{{dtypes.Float32, true}, {dtypes.BFloat16, true}, {dtypes.BFloat16, false}} {
		r, err := BenchTrainStep("go:ops_sequential", xlmr.TinyConfig(300), xlmr.Arch,
			BenchShape{Queries: 2, Negatives: 1, Length: 16, SubBatchTokens: 32, EncodeBatch: 2, EncodeLength: 16, SkipTrain: tc.skip, EncodeDType: tc.dt}, 1)
		if err != nil {
			t.Fatalf("%s: %v", tc.dt, err)
		}
		if tc.dt == dtypes.Float32 {
			f32 = r.EncodeWeightBytes
		}
		if r.EncodePassagesPerSec <= 0 || r.EncodeDType != strings.ToLower(tc.dt.String()) || r.EncodeWeightBytes*int64(4/tc.dt.Size()) != f32 || (r.MsPerStepMedian > 0) == tc.skip {
			t.Fatalf("%s, skip train %v: %+v (float32 weights %d bytes)", tc.dt, tc.skip, r, f32)
		}
	}
	if _, err := BenchTrainStep("go", xlmr.TinyConfig(300), xlmr.Arch, BenchShape{Queries: 1, Length: 65, EncodeBatch: 1, EncodeLength: 8}, 1); err == nil {
		t.Fatal("length 65 on a 64-token model: no error")
	}
}
