package t5

import "github.com/gomlx/gomlx/pkg/core/tensors"

// TrainBatch packs one teacher-forcing micro-batch for LossGraph (the inputs
// of a trainer.LossFn over LogitsGraph): encoder ids and mask [rows, L],
// decoder ids (ShiftRight of the labels) and labels [rows, T], int32, with L
// = PadLen(longest input) and T = PadLen(longest label row), so that one
// executable serves many lengths. Encoder padding is pad with mask 0;
// decoder padding is pad with label IgnoreIndex. Rows past len(inputs) are
// padding rows (one visible key, no labels: they add nothing to the loss),
// so a short last batch keeps the graph of a full one. inputs and labels
// are parallel; rows must be ≥ len(inputs).
func (c Config) TrainBatch(inputs, labels [][]int, rows int) []*tensors.Tensor {
	L, T := 1, 1
	for i := range inputs {
		L, T = max(L, len(inputs[i])), max(T, len(labels[i]))
	}
	L, T = PadLen(L), PadLen(T)
	iv, mv := make([]int32, rows*L), make([]int32, rows*L)
	dv, lv := make([]int32, rows*T), make([]int32, rows*T)
	for r := range rows {
		for j := range L {
			iv[r*L+j] = int32(c.PadTokenID)
		}
		for j := range T {
			dv[r*T+j], lv[r*T+j] = int32(c.PadTokenID), IgnoreIndex
		}
		if r >= len(inputs) {
			mv[r*L] = 1 // padding row: one visible key, no labels
			continue
		}
		for j, x := range inputs[r] {
			iv[r*L+j], mv[r*L+j] = int32(x), 1
		}
		lab := labels[r]
		dec := ShiftRight([][]int{lab}, c.DecoderStartTokenID, c.PadTokenID)[0]
		for j := range lab {
			dv[r*T+j], lv[r*T+j] = int32(dec[j]), int32(lab[j])
		}
	}
	return []*tensors.Tensor{
		tensors.FromFlatDataAndDimensions(iv, rows, L), tensors.FromFlatDataAndDimensions(mv, rows, L),
		tensors.FromFlatDataAndDimensions(dv, rows, T), tensors.FromFlatDataAndDimensions(lv, rows, T),
	}
}
