package t5

import (
	"fmt"
	"math/rand/v2"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/nn"
)

// GenerateOptions follow HF GenerationConfig. MaxNewTokens ≤ 0 means 20 (HF's
// default max_length). DoSample=false is greedy (argmax, first index on
// ties). With DoSample, logits are divided by Temperature (≤ 0 means 1), then
// filtered by TopP (HF TopPLogitsWarper: keep the smallest set of most likely
// tokens whose mass reaches TopP, at least one; TopP ≤ 0 or ≥ 1 disables it)
// and sampled with a PCG generator seeded by Seed (deterministic).
type GenerateOptions struct {
	MaxNewTokens int
	DoSample     bool
	Temperature  float64
	TopP         float64
	Seed         int64
	// Step, when set, is called after every decoding step t (0-based) with
	// the token each row chose (pad for finished rows); a non-nil error
	// stops decoding and Generate returns it wrapped. Servers use it to
	// stream tokens and to stop on a cancelled request.
	Step func(t int, next []int) error
}

// Generate decodes like HF generate(num_beams=1): every row starts with
// decoder_start_token_id (column 0 of the result), appends one token per step;
// a row that emitted eos is finished and gets pad afterwards; decoding stops
// when every row has finished or after MaxNewTokens steps. Result rows have
// equal length 1+steps. inputIDs, mask [B, L] (mask nil = all ones).
//
// It uses a key/value cache: the encoder and each block's cross-attention K/V
// run once; the step graph appends the new self-attention K/V to fixed buffers
// [B, H, MaxNewTokens+1, d_kv] and masks unfilled slots, so it compiles once
// per (B, PadLen(L), MaxNewTokens). At step t the query position is t and the
// self-attention bias row is bucket(k - t), k = 0..t (unidirectional).
func (m *Model) Generate(inputIDs, mask [][]int, opt GenerateOptions) ([][]int, error) {
	ids, msk, B, _, Lp, err := m.encoderInputs(inputIDs, mask)
	if err != nil {
		return nil, fmt.Errorf("t5.Generate: %w", err)
	}
	c := m.Config
	maxNew := opt.MaxNewTokens
	if maxNew <= 0 {
		maxNew = 20
	}
	S := maxNew + 1
	N := c.NumDecoderLayers

	prefill := func(ctx *context.Context, ids, mask *graph.Node) []*graph.Node {
		enc := m.EncoderGraph(ctx, ids, mask)
		g := enc.Graph()
		out := make([]*graph.Node, 2*N)
		for i := range N {
			p := fmt.Sprintf("decoder.block.%d.layer.1.EncDecAttention.", i)
			out[i] = m.splitHeads(linear(enc, weight(ctx, g, p+"k.weight")))
			out[N+i] = m.splitHeads(linear(enc, weight(ctx, g, p+"v.weight")))
		}
		return out
	}
	cross, err := m.run(fmt.Sprintf("generate-prefill/%dx%d", B, Lp), prefill, ids, msk)
	if err != nil {
		return nil, fmt.Errorf("t5.Generate: %w", err)
	}
	selfCache := make([]*tensors.Tensor, 2*N)
	for i := range selfCache {
		selfCache[i] = tensors.FromShape(shapes.Make(dtypes.Float32, B, c.NumHeads, S, c.DKV))
	}

	rng := rand.New(rand.NewPCG(uint64(opt.Seed), 0x7435_6765_6e))
	out := make([][]int, B)
	cur := make([]int, B)
	finished := make([]bool, B)
	for r := range out {
		out[r] = []int{c.DecoderStartTokenID}
		cur[r] = c.DecoderStartTokenID
	}
	key := fmt.Sprintf("generate-step/%dx%dx%d", B, Lp, S)
	for t := range maxNew {
		rel := make([]int, S)
		selfMask := make([]float32, S)
		for k := range S {
			rel[k] = k - t
			if k > t {
				selfMask[k] = maskValue
			}
		}
		b := RelativePositionBucket(rel, false, c.RelativeAttentionNumBuckets, c.RelativeAttentionMaxDistance)
		buckets := make([]int32, S)
		for k, x := range b {
			buckets[k] = int32(x)
		}
		tok := make([][]int, B)
		for r := range tok {
			tok[r] = []int{cur[r]}
		}
		args := []any{intTensor(tok, 1, 0), int32(t), tensors.FromFlatDataAndDimensions(buckets, S),
			tensors.FromFlatDataAndDimensions(selfMask, S), msk}
		for _, x := range cross {
			args = append(args, x)
		}
		for _, x := range selfCache {
			args = append(args, x)
		}
		res, err := m.run(key, m.stepGraph, args...)
		if err != nil {
			return nil, fmt.Errorf("t5.Generate: step %d: %w", t, err)
		}
		copy(selfCache, res[1:])
		logits, err := tensors.CopyFlatData[float32](res[0])
		if err != nil {
			return nil, fmt.Errorf("t5.Generate: step %d: %w", t, err)
		}
		V := len(logits) / B
		all := true
		for r := range B {
			next := c.PadTokenID
			if !finished[r] {
				row := logits[r*V : (r+1)*V]
				if opt.DoSample {
					next = sampleToken(row, opt.Temperature, opt.TopP, rng)
				} else {
					next = argmax(row)
				}
				if next == c.EOSTokenID {
					finished[r] = true
				}
			}
			out[r] = append(out[r], next)
			cur[r] = next
			all = all && finished[r]
		}
		if opt.Step != nil {
			if err := opt.Step(t, cur); err != nil {
				return nil, fmt.Errorf("t5.Generate: step %d: %w", t, err)
			}
		}
		if all {
			break
		}
	}
	return out, nil
}

// stepGraph decodes one position with the KV cache. Inputs: tokens [B, 1],
// position t (scalar int32), buckets [S] int32 (bucket(k - t)), selfMask [S]
// (0 for k ≤ t, float32_min otherwise), encoder mask [B, L], cross K (N×), cross
// V (N×) [B, H, L, d_kv], self K (N×), self V (N×) [B, H, S, d_kv]. Outputs:
// logits [B, vocab], then the updated self K and V caches.
func (m *Model) stepGraph(ctx *context.Context, in []*graph.Node) []*graph.Node {
	c := m.Config
	N := c.NumDecoderLayers
	tok, pos, buckets, selfMask, encMask := in[0], in[1], in[2], in[3], in[4]
	crossK, crossV := in[5:5+N], in[5+N:5+2*N]
	selfK := append([]*graph.Node(nil), in[5+2*N:5+3*N]...)
	selfV := append([]*graph.Node(nil), in[5+3*N:5+4*N]...)
	g := tok.Graph()
	S := buckets.Shape().Dimensions[0]
	B := tok.Shape().Dimensions[0]
	H := c.NumHeads

	table := weight(ctx, g, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
	pb := graph.Gather(table, graph.ExpandAxes(buckets, -1)) // [S, H]
	pb = graph.Reshape(graph.Transpose(pb, 0, 1), 1, H, 1, S)
	selfBias := graph.Add(pb, graph.BroadcastToDims(graph.Reshape(selfMask, 1, 1, 1, S), 1, H, 1, S))
	crossBias := paddingBias(encMask)

	// One-hot of the cache slot t, [1, 1, S, 1]: the new K/V row is written as
	// cache·(1-oh) + kv·oh (exact for 0/1 weights); simplego lacks DynamicUpdateSlice.
	slot := graph.Equal(graph.Iota(g, shapes.Make(dtypes.Int32, S), 0), graph.ConvertDType(pos, dtypes.Int32))
	oh := graph.Reshape(graph.ConvertDType(slot, dtypes.Float32), 1, 1, S, 1)
	cacheDims := []int{B, H, S, c.DKV}
	ohB := graph.BroadcastToDims(oh, cacheDims...)
	keepB := graph.OneMinus(ohB)
	write := func(cache, row *graph.Node) *graph.Node {
		return graph.Add(graph.Mul(cache, keepB), graph.Mul(graph.BroadcastToDims(row, cacheDims...), ohB))
	}
	h := embed(ctx, tok) // [B, 1, d_model]
	for i := range N {
		p := fmt.Sprintf("decoder.block.%d.layer.", i)
		n := rmsNorm(h, weight(ctx, g, p+"0.layer_norm.weight"), c.LayerNormEpsilon)
		q := m.splitHeads(linear(n, weight(ctx, g, p+"0.SelfAttention.q.weight")))
		k := m.splitHeads(linear(n, weight(ctx, g, p+"0.SelfAttention.k.weight")))
		v := m.splitHeads(linear(n, weight(ctx, g, p+"0.SelfAttention.v.weight")))
		selfK[i] = write(selfK[i], k)
		selfV[i] = write(selfV[i], v)
		a := m.mergeHeads(m.attend(ctx, q, selfK[i], selfV[i], selfBias))
		h = graph.Add(h, linear(a, weight(ctx, g, p+"0.SelfAttention.o.weight")))

		n = rmsNorm(h, weight(ctx, g, p+"1.layer_norm.weight"), c.LayerNormEpsilon)
		q = m.splitHeads(linear(n, weight(ctx, g, p+"1.EncDecAttention.q.weight")))
		a = m.mergeHeads(m.attend(ctx, q, crossK[i], crossV[i], crossBias))
		h = graph.Add(h, linear(a, weight(ctx, g, p+"1.EncDecAttention.o.weight")))
		h = m.layerFF(ctx, p+"2", h)
	}
	h = rmsNorm(h, weight(ctx, g, "decoder.final_layer_norm.weight"), c.LayerNormEpsilon)
	logits := graph.Reshape(m.lmHead(ctx, h), B, c.VocabSize)
	out := append([]*graph.Node{logits}, selfK...)
	return append(out, selfV...)
}

var argmax = nn.Argmax

// sampleToken applies temperature and top-p (HF TopPLogitsWarper) to one row
// of logits and draws a token (nn.SampleToken without top-k).
func sampleToken(row []float32, temperature, topP float64, rng *rand.Rand) int {
	return nn.SampleToken(row, temperature, 0, topP, rng)
}
