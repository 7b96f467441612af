package t5

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/nn"
)

// PadLen is the sequence-length bucket host-level calls pad to, so that one
// executable serves many lengths: n ≤ 64 → next multiple of 8; n ≤ 256 → next
// multiple of 32; otherwise the next multiple of 64. Encoder padding is masked
// and the decoder is causal, so padding never changes real positions.
func PadLen(n int) int {
	step := 64
	switch {
	case n <= 64:
		step = 8
	case n <= 256:
		step = 32
	}
	if n <= 0 {
		return step
	}
	return (n + step - 1) / step * step
}

// checkIDs validates a rectangular [B, L] batch of ids in [0, vocab), or,
// when allowIgnore, IgnoreIndex too.
func checkIDs(what string, ids [][]int, vocab int, allowIgnore bool) (B, L int, err error) {
	if len(ids) == 0 || len(ids[0]) == 0 {
		return 0, 0, fmt.Errorf("%s: empty batch", what)
	}
	B, L = len(ids), len(ids[0])
	for r, row := range ids {
		if len(row) != L {
			return 0, 0, fmt.Errorf("%s: row %d has length %d, row 0 has %d", what, r, len(row), L)
		}
		for c, x := range row {
			if (x < 0 || x >= vocab) && !(allowIgnore && x == IgnoreIndex) {
				return 0, 0, fmt.Errorf("%s: row %d position %d: id %d outside [0,%d)", what, r, c, x, vocab)
			}
		}
	}
	return B, L, nil
}

// intTensor packs ids [B, L] into an int32 tensor [B, Lp], filling with fill.
var intTensor = nn.IntTensor

// encoderInputs validates ids and mask (nil mask = all ones) and pads both to PadLen(L).
func (m *Model) encoderInputs(inputIDs, mask [][]int) (ids, msk *tensors.Tensor, B, L, Lp int, err error) {
	B, L, err = checkIDs("input_ids", inputIDs, m.Config.VocabSize, false)
	if err != nil {
		return
	}
	if mask == nil {
		mask = make([][]int, B)
		for r := range mask {
			mask[r] = make([]int, L)
			for c := range mask[r] {
				mask[r][c] = 1
			}
		}
	}
	if len(mask) != B {
		err = fmt.Errorf("attention_mask: %d rows, input_ids has %d", len(mask), B)
		return
	}
	for r, row := range mask {
		if len(row) != L {
			err = fmt.Errorf("attention_mask: row %d has length %d, input_ids has %d", r, len(row), L)
			return
		}
	}
	Lp = PadLen(L)
	return intTensor(inputIDs, Lp, m.Config.PadTokenID), intTensor(mask, Lp, 0), B, L, Lp, nil
}

// exec returns the cached executable for key, building it with fn once.
func (m *Model) exec(key string, fn any) (*context.Exec, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.execs[key]; ok {
		return e, nil
	}
	e, err := context.NewExecAny(m.Backend, m.Ctx, fn)
	if err != nil {
		return nil, err
	}
	m.execs[key] = e
	return e, nil
}

// run executes (compiling on first use) and converts panics to errors.
func (m *Model) run(key string, fn any, args ...any) (out []*tensors.Tensor, err error) {
	e, err := m.exec(key, fn)
	if err != nil {
		return nil, fmt.Errorf("t5 %s: %w", key, err)
	}
	if perr := catch.Do(func() { out, err = e.Exec(args...) }); perr != nil {
		return nil, fmt.Errorf("t5 %s: %w", key, perr)
	}
	if err != nil {
		return nil, fmt.Errorf("t5 %s: %w", key, err)
	}
	return out, nil
}

// cropAxis1 returns t [B, Lp, rest...] cut to [B, L, rest...] (float32).
var cropAxis1 = nn.CropAxis1

// Forward runs the teacher-forced model: inputIDs, mask [B, L] (mask nil =
// all ones), decoderIDs [B, T] → encHidden [B, L, d_model] (after
// encoder.final_layer_norm), decHidden [B, T, d_model] (after
// decoder.final_layer_norm, before the tied rescale), logits [B, T, vocab];
// all float32. Lengths are padded to PadLen internally and cropped back.
func (m *Model) Forward(inputIDs, mask, decoderIDs [][]int) (encHidden, decHidden, logits *tensors.Tensor, err error) {
	ids, msk, B, L, Lp, err := m.encoderInputs(inputIDs, mask)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("t5.Forward: %w", err)
	}
	B2, T, err := checkIDs("decoder_input_ids", decoderIDs, m.Config.VocabSize, false)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("t5.Forward: %w", err)
	}
	if B2 != B {
		return nil, nil, nil, fmt.Errorf("t5.Forward: decoder_input_ids has %d rows, input_ids %d", B2, B)
	}
	Tp := PadLen(T)
	dec := intTensor(decoderIDs, Tp, m.Config.PadTokenID)
	fn := func(ctx *context.Context, ids, mask, dec *graph.Node) []*graph.Node {
		enc := m.EncoderGraph(ctx, ids, mask)
		h := m.DecoderGraph(ctx, dec, enc, mask)
		return []*graph.Node{enc, h, m.lmHead(ctx, h)}
	}
	out, err := m.run(fmt.Sprintf("forward/%dx%dx%d", B, Lp, Tp), fn, ids, msk, dec)
	if err != nil {
		return nil, nil, nil, err
	}
	if encHidden, err = cropAxis1(out[0], L); err == nil {
		if decHidden, err = cropAxis1(out[1], T); err == nil {
			logits, err = cropAxis1(out[2], T)
		}
	}
	return encHidden, decHidden, logits, err
}

// labelInputs validates labels [B, T] and returns shifted decoder ids and
// labels padded to PadLen(T) (pad id / IgnoreIndex).
func (m *Model) labelInputs(labels [][]int, B int) (dec, lab *tensors.Tensor, T, Tp int, err error) {
	B2, T, err := checkIDs("labels", labels, m.Config.VocabSize, true)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	if B2 != B {
		return nil, nil, 0, 0, fmt.Errorf("labels has %d rows, input_ids %d", B2, B)
	}
	Tp = PadLen(T)
	decIDs := ShiftRight(labels, m.Config.DecoderStartTokenID, m.Config.PadTokenID)
	return intTensor(decIDs, Tp, m.Config.PadTokenID), intTensor(labels, Tp, IgnoreIndex), T, Tp, nil
}

// Loss is the HF T5ForConditionalGeneration loss for (inputIDs, mask, labels):
// decoder inputs are ShiftRight(labels); mean natural-log cross-entropy over
// all labels ≠ -100 of the batch (see LossGraph). inputIDs, mask [B, L];
// labels [B, T].
func (m *Model) Loss(inputIDs, mask, labels [][]int) (float32, error) {
	ids, msk, B, _, Lp, err := m.encoderInputs(inputIDs, mask)
	if err != nil {
		return 0, fmt.Errorf("t5.Loss: %w", err)
	}
	dec, lab, _, Tp, err := m.labelInputs(labels, B)
	if err != nil {
		return 0, fmt.Errorf("t5.Loss: %w", err)
	}
	fn := func(ctx *context.Context, ids, mask, dec, lab *graph.Node) *graph.Node {
		return LossGraph(m.LogitsGraph(ctx, ids, mask, dec), lab)
	}
	out, err := m.run(fmt.Sprintf("loss/%dx%dx%d", B, Lp, Tp), fn, ids, msk, dec, lab)
	if err != nil {
		return 0, err
	}
	return tensors.ToScalar[float32](out[0]), nil
}

// TokenLogProbs returns, per row, the teacher-forced natural-log probability
// log p(labels[t] | labels[<t], input) of every label ≠ -100, in order
// (perplexity = exp(-mean)). inputIDs, mask [B, L]; labels [B, T].
func (m *Model) TokenLogProbs(inputIDs, mask, labels [][]int) ([][]float32, error) {
	ids, msk, B, _, Lp, err := m.encoderInputs(inputIDs, mask)
	if err != nil {
		return nil, fmt.Errorf("t5.TokenLogProbs: %w", err)
	}
	dec, lab, T, Tp, err := m.labelInputs(labels, B)
	if err != nil {
		return nil, fmt.Errorf("t5.TokenLogProbs: %w", err)
	}
	fn := func(ctx *context.Context, ids, mask, dec, lab *graph.Node) *graph.Node {
		lp, _ := labelLogProbs(m.LogitsGraph(ctx, ids, mask, dec), lab)
		return lp
	}
	out, err := m.run(fmt.Sprintf("logprobs/%dx%dx%d", B, Lp, Tp), fn, ids, msk, dec, lab)
	if err != nil {
		return nil, err
	}
	flat, err := tensors.CopyFlatData[float32](out[0])
	if err != nil {
		return nil, fmt.Errorf("t5.TokenLogProbs: %w", err)
	}
	res := make([][]float32, B)
	for r := range B {
		res[r] = []float32{}
		for c := range T {
			if labels[r][c] != IgnoreIndex {
				res[r] = append(res[r], flat[r*Tp+c])
			}
		}
	}
	return res, nil
}
