package t5

import (
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

func TestTrainBatch(t *testing.T) {
	c := DefaultConfig() // pad 0, decoder start 0
	c.PadTokenID, c.DecoderStartTokenID = 0, 0
	out := c.TrainBatch([][]int{{5, 6, 1}, {7, 1}}, [][]int{{9, 1}, {8, 4, 3, 1}}, 3)
	want := []struct {
		dims []int
		v    []int32
	}{
		{[]int{3, 8}, []int32{5, 6, 1, 0, 0, 0, 0, 0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{[]int{3, 8}, []int32{1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}},
		{[]int{3, 8}, []int32{0, 9, 0, 0, 0, 0, 0, 0, 0, 8, 4, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{[]int{3, 8}, []int32{9, 1, -100, -100, -100, -100, -100, -100, 8, 4, 3, 1, -100, -100, -100, -100,
			-100, -100, -100, -100, -100, -100, -100, -100}},
	}
	names := []string{"input_ids", "attention_mask", "decoder_input_ids", "labels"}
	for i, w := range want {
		got := tensors.MustCopyFlatData[int32](out[i])
		if !slices.Equal(out[i].Shape().Dimensions, w.dims) || !slices.Equal(got, w.v) {
			t.Errorf("%s: %v %v, want %v %v", names[i], out[i].Shape().Dimensions, got, w.dims, w.v)
		}
	}
}
