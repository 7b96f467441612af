package lora

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/models/t5"
)

// IgnoreIndex is the label of a token the loss skips (PyTorch
// CrossEntropyLoss ignore_index, HF's -100): prompt tokens and padding.
const IgnoreIndex = t5.IgnoreIndex

// Example is one SFT example as token ids: the prompt (context, not
// scored) and the response (scored; it ends with eos).
type Example struct {
	Prompt, Response []int
}

// EncodeExample builds an Example from prompt and response ids: eos is
// appended to the response, and when prompt + response + eos exceeds
// maxLength the response is cut (eos kept) — the prompt is the model's
// context and is never cut. Errors: an empty response, or a prompt that
// leaves no room for one response token and eos.
func EncodeExample(prompt, response []int, eos, maxLength int) (Example, error) {
	if len(response) == 0 {
		return Example{}, fmt.Errorf("sft example: empty response")
	}
	room := maxLength - len(prompt) - 1
	if room < 1 {
		return Example{}, fmt.Errorf("sft example: prompt of %d tokens leaves no room for a response within max length %d", len(prompt), maxLength)
	}
	r := append(append([]int(nil), response[:min(len(response), room)]...), eos)
	return Example{Prompt: append([]int(nil), prompt...), Response: r}, nil
}

// Batch is one right-padded SFT micro-batch, flat [Rows, Len] int32:
// input_ids = prompt + response then pad; attention_mask 1 on real tokens;
// labels = input_ids on response tokens, IgnoreIndex on prompt and padding
// (transformers' DataCollatorForSeq2Seq with label_pad_token_id -100). Rows
// beyond the examples are all padding with one visible key and no label,
// so a short last batch keeps the compiled shape.
type Batch struct {
	Rows, Len            int
	IDs, Mask, Labels    []int32
	Positions            []int32 // arange(Len) per row: HF forward's default position_ids
	ScoredTokens, Tokens int     // labels ≠ IgnoreIndex; real tokens
}

// NewBatch pads examples into a batch of rows rows (≥ len(examples)) and
// length t5.PadLen(longest), so that few executables serve a run; padding
// on the right never changes a real position's logits (causal attention).
func NewBatch(examples []Example, rows, pad int) Batch {
	L := 1
	for _, e := range examples {
		L = max(L, len(e.Prompt)+len(e.Response))
	}
	L = t5.PadLen(L)
	rows = max(rows, len(examples))
	b := Batch{Rows: rows, Len: L, IDs: make([]int32, rows*L), Mask: make([]int32, rows*L),
		Labels: make([]int32, rows*L), Positions: make([]int32, rows*L)}
	for r := range rows {
		row := r * L
		for j := range L {
			b.IDs[row+j], b.Labels[row+j], b.Positions[row+j] = int32(pad), IgnoreIndex, int32(j)
		}
		if r >= len(examples) {
			b.Mask[row] = 1
			continue
		}
		e := examples[r]
		for j, id := range e.Prompt {
			b.IDs[row+j], b.Mask[row+j] = int32(id), 1
		}
		for j, id := range e.Response {
			k := row + len(e.Prompt) + j
			b.IDs[k], b.Mask[k], b.Labels[k] = int32(id), 1, int32(id)
		}
		b.ScoredTokens += len(e.Response)
		b.Tokens += len(e.Prompt) + len(e.Response)
	}
	// The first token is never a target (nothing predicts it): a response
	// starting the row would count one label the loss cannot score.
	for r := range len(examples) {
		if len(examples[r].Prompt) == 0 {
			b.ScoredTokens--
		}
	}
	return b
}

// Inputs returns the trainer inputs of the batch: input_ids,
// attention_mask, position_ids and labels as [Rows, Len] int32 tensors, then
// the scalar float32 weight of its mean loss (see MicroWeights).
func (b Batch) Inputs(weight float32) []*tensors.Tensor {
	t := func(v []int32) *tensors.Tensor { return tensors.FromFlatDataAndDimensions(v, b.Rows, b.Len) }
	return []*tensors.Tensor{t(b.IDs), t(b.Mask), t(b.Positions), t(b.Labels), tensors.FromScalar(weight)}
}

// MicroWeights returns the loss weight of each micro-batch of one update,
// n_i·A/N for n_i scored tokens of A micro-batches and N in all: the
// trainer averages the A weighted means, which gives Σ NLL / N, the token
// mean over the whole update, as transformers' Trainer computes an
// accumulated causal-LM loss (num_items_in_batch, since 4.46). So A
// micro-batches of B examples give the gradient of one batch of A·B, and
// one micro-batch has weight 1.
func MicroWeights(batches []Batch) []float32 {
	n := 0
	for _, b := range batches {
		n += b.ScoredTokens
	}
	out := make([]float32, len(batches))
	for i, b := range batches {
		if n > 0 {
			out[i] = float32(float64(b.ScoredTokens) * float64(len(batches)) / float64(n))
		}
	}
	return out
}
