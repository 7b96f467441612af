package decoder

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/t5"
)

// GenerateOptions follow HF GenerationConfig (see Model.GenerateOptions for
// the defaults a model directory sets).
type GenerateOptions struct {
	// MaxNewTokens bounds the new tokens per row (> 0). Prompt length +
	// MaxNewTokens must not exceed max_position_embeddings.
	MaxNewTokens int
	// DoSample=false is greedy (argmax, first index on ties). With DoSample
	// the logits go through HF's warpers in HF's order: Temperature (≤ 0
	// means 1), TopK (0 disables), TopP (≥ 1 disables; the smallest set of
	// most likely tokens whose mass reaches TopP, at least one), then a token
	// is drawn from PCG(Seed) (deterministic).
	DoSample    bool
	Temperature float64
	TopK        int
	TopP        float64
	Seed        uint64
	// EOSTokenIDs end a row (finish reason "eos"); a finished row continues
	// with pad. StopTokenIDs end it the same way (reason "stop").
	EOSTokenIDs  []int
	StopTokenIDs []int
	// StopStrings end a row (reason "stop") once the decoded new tokens
	// contain one of them; Decode turns a row's new ids into text (the
	// tokenizer stays outside this package) and is required with them.
	StopStrings []string
	Decode      func(ids []int) string
	// OutputLogits keeps each step's last-position logits (HF output_logits).
	OutputLogits bool
	// Step, when set, is called after every step t (0-based) with the token
	// each row chose (pad for finished rows); an error stops decoding and is
	// returned wrapped (servers stream tokens and stop on a cancelled request).
	Step func(t int, next []int) error
}

// GenerateOptions returns the options generation_config.json sets
// (do_sample, temperature, top_k, top_p, max_new_tokens, eos_token_id; eos
// falls back to config.json's), HF GenerationConfig defaults elsewhere and
// MaxNewTokens 20 (HF's max_length default) when the file sets none.
func (m *Model) GenerateOptions() GenerateOptions {
	gc := m.Generation
	o := GenerateOptions{MaxNewTokens: gc.MaxNewTokens, DoSample: gc.DoSample, Temperature: gc.Temperature,
		TopK: gc.TopK, TopP: gc.TopP, EOSTokenIDs: slices.Clone(gc.EOSTokenIDs)}
	if o.MaxNewTokens <= 0 {
		o.MaxNewTokens = 20
	}
	if o.EOSTokenIDs == nil {
		o.EOSTokenIDs = slices.Clone(m.Config.EOSTokenIDs)
	}
	return o
}

// Generation is the result of Generate.
type Generation struct {
	// Sequences are HF generate's output: each prompt left-padded (pad id:
	// pad_token_id, else the first eos id, as HF) to the longest, then one token per step, pad after a row finished;
	// all rows have the same length.
	Sequences [][]int
	// NewTokens are each row's generated ids up to and including the token
	// that finished it.
	NewTokens [][]int
	// FinishReasons per row: "eos", "stop" or "length".
	FinishReasons []string
	// StepLogits[t][row] are the raw last-position logits of step t (only
	// with OutputLogits).
	StepLogits [][][]float32
}

// Generate continues each prompt (token ids, no padding; bos is not added)
// like HF generate(num_beams=1) on a left-padded batch: position ids
// cumsum(mask)-1, and a key/value cache. The prompt runs once (prefill,
// compiled per batch size and PadLen of the longest prompt, extra left
// padding masked); each step then feeds one token per row, writes its
// rotated key and value into cache slot Lp+t of [B, KV, Lp+MaxNewTokens, D]
// buffers and attends over the filled, unmasked slots. Decoding stops when
// every row has finished or after MaxNewTokens steps. The ids equal full
// recomputation (TestGenerateKVCacheEqualsRecompute).
func (m *Model) Generate(prompts [][]int, opt GenerateOptions) (*Generation, error) {
	c := m.Config
	if len(prompts) == 0 {
		return nil, fmt.Errorf("decoder.Generate: no prompts")
	}
	if opt.MaxNewTokens <= 0 {
		return nil, fmt.Errorf("decoder.Generate: max_new_tokens %d must be > 0", opt.MaxNewTokens)
	}
	if len(opt.StopStrings) > 0 && opt.Decode == nil {
		return nil, fmt.Errorf("decoder.Generate: stop strings %q need a Decode function", opt.StopStrings)
	}
	if opt.DoSample && (opt.TopK < 0 || opt.TopP < 0) {
		return nil, fmt.Errorf("decoder.Generate: top_k %d, top_p %g: want ≥ 0", opt.TopK, opt.TopP)
	}
	B := len(prompts)
	L := 0
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("decoder.Generate: prompt %d is empty", i)
		}
		for j, id := range p {
			if id < 0 || id >= c.VocabSize {
				return nil, fmt.Errorf("decoder.Generate: prompt %d position %d: id %d outside [0,%d)", i, j, id, c.VocabSize)
			}
		}
		L = max(L, len(p))
	}
	if L+opt.MaxNewTokens > c.MaxPositionEmbeddings {
		return nil, fmt.Errorf("decoder.Generate: prompt of %d tokens + max_new_tokens %d exceeds max_position_embeddings %d",
			L, opt.MaxNewTokens, c.MaxPositionEmbeddings)
	}
	Lp := t5.PadLen(L)
	S := Lp + opt.MaxNewTokens
	pad := m.genPadID(opt.EOSTokenIDs)
	ids := make([][]int, B)
	mask := make([][]int, B)
	for r, p := range prompts {
		ids[r] = make([]int, Lp)
		mask[r] = make([]int, Lp)
		off := Lp - len(p)
		for j := range off {
			ids[r][j] = pad
		}
		copy(ids[r][off:], p)
		for j := off; j < Lp; j++ {
			mask[r][j] = 1
		}
	}
	pos := PositionIDs(mask)
	N := c.NumHiddenLayers
	prefill := func(ctx *context.Context, ids, mask, pos *graph.Node) []*graph.Node {
		return m.prefillGraph(ctx, ids, mask, pos, S)
	}
	out, err := m.run(fmt.Sprintf("generate-prefill/%dx%dx%d", B, Lp, S), prefill,
		nn.IntTensor(ids, Lp, pad), nn.IntTensor(mask, Lp, 0), nn.IntTensor(pos, Lp, 0))
	if err != nil {
		return nil, fmt.Errorf("decoder.Generate: %w", err)
	}
	logits, caches := out[0], out[1:1+2*N]

	gen := &Generation{Sequences: make([][]int, B), NewTokens: make([][]int, B), FinishReasons: make([]string, B)}
	for r, p := range prompts {
		gen.Sequences[r] = append(slices.Repeat([]int{pad}, L-len(p)), p...)
		gen.FinishReasons[r] = "length"
	}
	keyMask := make([]int32, B*S)
	count := make([]int, B) // real tokens so far per row
	for r := range B {
		for j := range Lp {
			keyMask[r*S+j] = int32(mask[r][j])
		}
		count[r] = len(prompts[r])
	}
	finished := make([]bool, B)
	rng := rand.New(rand.NewPCG(opt.Seed, 0x6465_636f_6465))
	cur := make([]int, B)
	stepKey := fmt.Sprintf("generate-step/%dx%dx%d", B, Lp, S)
	for t := range opt.MaxNewTokens {
		rows, err := tensors.CopyFlatData[float32](logits)
		if err != nil {
			return nil, fmt.Errorf("decoder.Generate: step %d: %w", t, err)
		}
		V := len(rows) / B
		if opt.OutputLogits {
			step := make([][]float32, B)
			for r := range B {
				step[r] = slices.Clone(rows[r*V : (r+1)*V])
			}
			gen.StepLogits = append(gen.StepLogits, step)
		}
		all := true
		for r := range B {
			next := pad
			if !finished[r] {
				row := rows[r*V : (r+1)*V]
				if opt.DoSample {
					next = nn.SampleToken(row, opt.Temperature, opt.TopK, opt.TopP, rng)
				} else {
					next = nn.Argmax(row)
				}
				gen.NewTokens[r] = append(gen.NewTokens[r], next)
				switch {
				case slices.Contains(opt.EOSTokenIDs, next):
					finished[r], gen.FinishReasons[r] = true, "eos"
				case slices.Contains(opt.StopTokenIDs, next):
					finished[r], gen.FinishReasons[r] = true, "stop"
				case len(opt.StopStrings) > 0 && containsAny(opt.Decode(gen.NewTokens[r]), opt.StopStrings):
					finished[r], gen.FinishReasons[r] = true, "stop"
				}
			}
			gen.Sequences[r] = append(gen.Sequences[r], next)
			cur[r] = next
			all = all && finished[r]
		}
		if opt.Step != nil {
			if err := opt.Step(t, slices.Clone(cur)); err != nil {
				return nil, fmt.Errorf("decoder.Generate: step %d: %w", t, err)
			}
		}
		if all || t == opt.MaxNewTokens-1 {
			break
		}
		// Feed the chosen tokens: HF extends the mask by 1 for every row
		// (finished rows included, their pad is attended to as in HF).
		slot := Lp + t
		tok := make([]int32, B)
		p := make([]int32, B)
		for r := range B {
			tok[r] = int32(cur[r])
			p[r] = int32(count[r]) // cumsum(mask) - 1 after appending
			count[r]++
			keyMask[r*S+slot] = 1
		}
		args := []any{tensors.FromFlatDataAndDimensions(tok, B, 1), tensors.FromFlatDataAndDimensions(p, B, 1),
			int32(slot), tensors.FromFlatDataAndDimensions(slices.Clone(keyMask), B, S)}
		for _, x := range caches {
			args = append(args, x)
		}
		res, err := m.run(stepKey, m.stepGraph, args...)
		if err != nil {
			return nil, fmt.Errorf("decoder.Generate: step %d: %w", t, err)
		}
		logits, caches = res[0], res[1:]
	}
	return gen, nil
}

// genPadID is the id HF generate writes after a row finished (and into
// the left padding): generation_config.json's pad_token_id, else
// config.json's, else the first eos id ("Setting pad_token_id to
// eos_token_id"), else 0.
func (m *Model) genPadID(eos []int) int {
	switch {
	case m.Generation.PadTokenID >= 0:
		return m.Generation.PadTokenID
	case m.Config.PadTokenID >= 0:
		return m.Config.PadTokenID
	case len(eos) > 0:
		return eos[0]
	}
	return 0
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// prefillGraph runs the left-padded prompts ids, mask, pos [B, Lp] and
// returns the last position's logits [B, vocab], then every layer's K
// caches, then V caches [B, KV, S, D] (slots ≥ Lp zero).
func (m *Model) prefillGraph(ctx *context.Context, ids, mask, pos *graph.Node, S int) []*graph.Node {
	c := m.Config
	g := ids.Graph()
	d := ids.Shape().Dimensions
	B, Lp := d[0], d[1]
	h := embed(ctx, ids)
	cos, sin := m.rope(pos)
	bias := causalPaddingBias(mask)
	zeros := graph.Zeros(g, shapes.Make(dtypes.Float32, B, c.NumKeyValueHeads, S-Lp, c.HeadDim))
	ks := make([]*graph.Node, c.NumHiddenLayers)
	vs := make([]*graph.Node, c.NumHiddenLayers)
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		x := nn.RMSNorm(h, nn.Param(ctx, g, p+"input_layernorm.weight"), c.RMSNormEps)
		q, k, v := m.qkv(ctx, p, x, cos, sin)
		h = graph.Add(h, m.Linear(ctx, p+"self_attn.o_proj", m.attend(ctx, q, k, v, bias)))
		x = nn.RMSNorm(h, nn.Param(ctx, g, p+"post_attention_layernorm.weight"), c.RMSNormEps)
		h = graph.Add(h, m.mlp(ctx, p, x))
		ks[i] = graph.Concatenate([]*graph.Node{k, zeros}, 2)
		vs[i] = graph.Concatenate([]*graph.Node{v, zeros}, 2)
	}
	last := graph.Slice(h, graph.AxisRange(), graph.AxisRange(Lp-1, Lp), graph.AxisRange()) // [B, 1, hidden]
	last = nn.RMSNorm(last, nn.Param(ctx, g, "model.norm.weight"), c.RMSNormEps)
	logits := graph.Reshape(m.Linear(ctx, "lm_head", last), B, c.VocabSize)
	return append(append([]*graph.Node{logits}, ks...), vs...)
}

// stepGraph decodes one token per row with the cache. Inputs: tokens
// [B, 1], positions [B, 1], the cache slot (scalar int32), the key mask
// [B, S] (1 on filled real slots, the new one included), then the K
// caches and V caches [B, KV, S, D] of every layer. Outputs: logits
// [B, vocab], then the updated K and V caches.
func (m *Model) stepGraph(ctx *context.Context, in []*graph.Node) []*graph.Node {
	c := m.Config
	N := c.NumHiddenLayers
	tok, pos, slot, keyMask := in[0], in[1], in[2], in[3]
	ks := slices.Clone(in[4 : 4+N])
	vs := slices.Clone(in[4+N : 4+2*N])
	g := tok.Graph()
	B := tok.Shape().Dimensions[0]
	S := keyMask.Shape().Dimensions[1]
	real := graph.NotEqual(keyMask, graph.ZerosLike(keyMask))
	bias := graph.Where(real, graph.Scalar(g, dtypes.Float32, 0), graph.Scalar(g, dtypes.Float32, maskValue))
	bias = graph.Reshape(bias, B, 1, 1, 1, S)
	// One-hot of the slot, [1, 1, S, 1]: the new K/V row is written as
	// cache·(1-oh) + kv·oh (exact for 0/1 weights; the pure-Go backend has
	// no DynamicUpdateSlice).
	at := graph.Equal(graph.Iota(g, shapes.Make(dtypes.Int32, S), 0), graph.ConvertDType(slot, dtypes.Int32))
	dims := []int{B, c.NumKeyValueHeads, S, c.HeadDim}
	oh := graph.BroadcastToDims(graph.Reshape(graph.ConvertDType(at, dtypes.Float32), 1, 1, S, 1), dims...)
	keep := graph.OneMinus(oh)
	write := func(cache, row *graph.Node) *graph.Node {
		return graph.Add(graph.Mul(cache, keep), graph.Mul(graph.BroadcastToDims(row, dims...), oh))
	}
	h := embed(ctx, tok)
	cos, sin := m.rope(pos)
	for i := range N {
		p := fmt.Sprintf("model.layers.%d.", i)
		x := nn.RMSNorm(h, nn.Param(ctx, g, p+"input_layernorm.weight"), c.RMSNormEps)
		q, k, v := m.qkv(ctx, p, x, cos, sin)
		ks[i] = write(ks[i], k)
		vs[i] = write(vs[i], v)
		h = graph.Add(h, m.Linear(ctx, p+"self_attn.o_proj", m.attend(ctx, q, ks[i], vs[i], bias)))
		x = nn.RMSNorm(h, nn.Param(ctx, g, p+"post_attention_layernorm.weight"), c.RMSNormEps)
		h = graph.Add(h, m.mlp(ctx, p, x))
	}
	h = nn.RMSNorm(h, nn.Param(ctx, g, "model.norm.weight"), c.RMSNormEps)
	logits := graph.Reshape(m.Linear(ctx, "lm_head", h), B, c.VocabSize)
	return append(append([]*graph.Node{logits}, ks...), vs...)
}
