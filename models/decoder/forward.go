package decoder

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/ragforge/ragforge/internal/catch"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/t5"
)

// checkBatch validates ids [B, L] in [0, vocab) and mask, pos of the same
// shape (nil mask = all ones; nil pos = arange(L), HF's default). It
// returns them filled in.
func (m *Model) checkBatch(what string, ids, mask, pos [][]int) (_, _ [][]int, B, L int, err error) {
	if len(ids) == 0 || len(ids[0]) == 0 {
		return nil, nil, 0, 0, fmt.Errorf("%s: empty batch", what)
	}
	B, L = len(ids), len(ids[0])
	V := m.Config.VocabSize
	for r, row := range ids {
		if len(row) != L {
			return nil, nil, 0, 0, fmt.Errorf("%s: input_ids row %d has length %d, row 0 has %d", what, r, len(row), L)
		}
		for c, x := range row {
			if x < 0 || x >= V {
				return nil, nil, 0, 0, fmt.Errorf("%s: input_ids row %d position %d: id %d outside [0,%d)", what, r, c, x, V)
			}
		}
	}
	fill := func(name string, v [][]int, def func(c int) int) ([][]int, error) {
		if v == nil {
			v = make([][]int, B)
			for r := range v {
				v[r] = make([]int, L)
				for c := range v[r] {
					v[r][c] = def(c)
				}
			}
			return v, nil
		}
		if len(v) != B {
			return nil, fmt.Errorf("%s: %s has %d rows, input_ids %d", what, name, len(v), B)
		}
		for r, row := range v {
			if len(row) != L {
				return nil, fmt.Errorf("%s: %s row %d has length %d, input_ids %d", what, name, r, len(row), L)
			}
		}
		return v, nil
	}
	if mask, err = fill("attention_mask", mask, func(int) int { return 1 }); err != nil {
		return nil, nil, 0, 0, err
	}
	if pos, err = fill("position_ids", pos, func(c int) int { return c }); err != nil {
		return nil, nil, 0, 0, err
	}
	for r, row := range pos {
		for c, p := range row {
			if mask[r][c] != 0 && (p < 0 || p >= m.Config.MaxPositionEmbeddings) {
				return nil, nil, 0, 0, fmt.Errorf("%s: position_ids row %d position %d: %d outside [0, max_position_embeddings %d)",
					what, r, c, p, m.Config.MaxPositionEmbeddings)
			}
		}
	}
	return mask, pos, B, L, nil
}

// padID is the id written into padding slots (pad_token_id, else 0).
func (m *Model) padID() int { return max(m.Config.PadTokenID, 0) }

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
func (m *Model) run(key string, fn any, args ...any) ([]*tensors.Tensor, error) {
	e, err := m.exec(key, fn)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", m.Config.ModelType, key, err)
	}
	out, err := catch.Exec(e, args...)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", m.Config.ModelType, key, err)
	}
	return out, nil
}

// Output is what Forward returns, all float32.
type Output struct {
	Logits          *tensors.Tensor   // [B, L, vocab]
	LastHiddenState *tensors.Tensor   // [B, L, hidden], after model.norm
	HiddenStates    []*tensors.Tensor // HF hidden_states[0..layers-1]: embeddings, then each layer's output but the last
}

// Forward runs XForCausalLM on ids [B, L] with attention mask and
// position ids of the same shape (nil mask = all ones, nil pos = arange, HF's
// forward default; for a left-padded batch pass cumsum(mask)-1, see
// PositionIDs). Lengths are padded on the right to t5.PadLen internally
// (causal attention: appended pads never change real positions) and cropped
// back. Padded query rows are ordinary finite numbers, as in HF eager.
func (m *Model) Forward(ids, mask, pos [][]int) (*Output, error) {
	mask, pos, B, L, err := m.checkBatch("decoder.Forward", ids, mask, pos)
	if err != nil {
		return nil, err
	}
	Lp := t5.PadLen(L)
	N := m.Config.NumHiddenLayers
	fn := func(ctx *context.Context, ids, mask, pos *graph.Node) []*graph.Node {
		var keep []*graph.Node
		h := m.HiddenGraph(ctx, ids, mask, pos, &keep)
		return append([]*graph.Node{m.Linear(ctx, "lm_head", h), h}, keep...)
	}
	out, err := m.run(fmt.Sprintf("forward/%dx%d", B, Lp), fn,
		nn.IntTensor(ids, Lp, m.padID()), nn.IntTensor(mask, Lp, 0), nn.IntTensor(pos, Lp, 0))
	if err != nil {
		return nil, err
	}
	res := &Output{HiddenStates: make([]*tensors.Tensor, N)}
	if res.Logits, err = nn.CropAxis1(out[0], L); err != nil {
		return nil, err
	}
	if res.LastHiddenState, err = nn.CropAxis1(out[1], L); err != nil {
		return nil, err
	}
	for i := range N {
		if res.HiddenStates[i], err = nn.CropAxis1(out[2+i], L); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Logits is Forward's logits [B, L, vocab] float32.
func (m *Model) Logits(ids, mask, pos [][]int) (*tensors.Tensor, error) {
	out, err := m.Forward(ids, mask, pos)
	if err != nil {
		return nil, err
	}
	return out.Logits, nil
}

// PositionIDs is HF generate's position ids for a (left-)padded batch:
// cumsum(mask) - 1 along each row, with padded positions set to 1.
func PositionIDs(mask [][]int) [][]int {
	out := make([][]int, len(mask))
	for r, row := range mask {
		out[r] = make([]int, len(row))
		n := 0
		for c, x := range row {
			if x != 0 {
				n++
				out[r][c] = n - 1
			} else {
				out[r][c] = 1
			}
		}
	}
	return out
}

// Pair is one (prompt, continuation) to score: token ids, no bos added.
type Pair struct {
	Prompt, Continuation []int
}

// Score is the continuation score of one Pair.
type Score struct {
	// LogProbs[i] = ln P(continuation[i] | prompt, continuation[:i]).
	LogProbs []float32
	// MeanNLL = -mean(LogProbs); Perplexity = exp(MeanNLL) (RAG²'s helpfulness score).
	MeanNLL, Perplexity float64
}

// ScoreBatchTokens bounds one ContinuationLogProbs batch: consecutive pairs
// are packed while rows × padded length stays within it (a single longer
// pair gets a batch of its own), so memory stays flat however many pairs
// a caller scores. 4096 is the Qwen2.5-0.5B bench batch (8 × 512 tokens,
// 4.3 GiB peak RSS).
const ScoreBatchTokens = 4096

// ContinuationLogProbs scores each pair's continuation tokens given its
// prompt. Consecutive pairs are packed into right-padded batches of at most
// ScoreBatchTokens tokens (position ids arange), and for continuation token
// i the graph gathers log_softmax(logits at the token before it)[token]:
// only continuation positions go through lm_head, and the log-sum-exp is
// taken in the graph (the host never holds [B, L, vocab] logits). Rows are
// independent, so the batching never changes a score. Errors: an empty
// prompt (no bos is added, so the first token has no context), an empty
// continuation, ids outside the vocabulary, a pair longer than
// max_position_embeddings.
func (m *Model) ContinuationLogProbs(pairs []Pair) ([]Score, error) {
	if len(pairs) == 0 {
		return nil, fmt.Errorf("decoder.ContinuationLogProbs: no pairs")
	}
	for i, p := range pairs {
		if len(p.Prompt) == 0 {
			return nil, fmt.Errorf("decoder.ContinuationLogProbs: pair %d: empty prompt (the first continuation token needs a context; prepend bos)", i)
		}
		if len(p.Continuation) == 0 {
			return nil, fmt.Errorf("decoder.ContinuationLogProbs: pair %d: empty continuation", i)
		}
		n := len(p.Prompt) + len(p.Continuation)
		if n > m.Config.MaxPositionEmbeddings {
			return nil, fmt.Errorf("decoder.ContinuationLogProbs: pair %d: %d tokens exceed max_position_embeddings %d", i, n, m.Config.MaxPositionEmbeddings)
		}
	}
	var out []Score
	for lo := 0; lo < len(pairs); {
		hi, L := lo, 0
		for hi < len(pairs) {
			n := t5.PadLen(max(L, len(pairs[hi].Prompt)+len(pairs[hi].Continuation)))
			if hi > lo && (hi-lo+1)*n > ScoreBatchTokens {
				break
			}
			L = n
			hi++
		}
		s, err := m.scoreBatch(pairs[lo:hi], lo)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
		lo = hi
	}
	return out, nil
}

// scoreBatch is ContinuationLogProbs on one batch of validated pairs;
// offset is the first pair's index in the caller's list (for errors).
func (m *Model) scoreBatch(pairs []Pair, offset int) ([]Score, error) {
	B := len(pairs)
	L, T := 0, 0
	for _, p := range pairs {
		L, T = max(L, len(p.Prompt)+len(p.Continuation)), max(T, len(p.Continuation))
	}
	ids := make([][]int, B)
	mask := make([][]int, B)
	for i, p := range pairs {
		ids[i] = append(append([]int{}, p.Prompt...), p.Continuation...)
		for len(ids[i]) < L {
			ids[i] = append(ids[i], m.padID())
		}
		mask[i] = make([]int, L)
		for c := range len(p.Prompt) + len(p.Continuation) {
			mask[i][c] = 1
		}
	}
	mask, pos, _, _, err := m.checkBatch(fmt.Sprintf("decoder.ContinuationLogProbs: pairs %d-%d", offset, offset+B-1), ids, mask, nil)
	if err != nil {
		return nil, err
	}
	Lp, Tp := t5.PadLen(L), t5.PadLen(T)
	sel := make([]int32, B*Tp)
	tgt := make([]int32, B*Tp)
	valid := make([]float32, B*Tp)
	for i, p := range pairs {
		for j, tok := range p.Continuation {
			sel[i*Tp+j] = int32(len(p.Prompt) + j - 1)
			tgt[i*Tp+j] = int32(tok)
			valid[i*Tp+j] = 1
		}
	}
	fn := func(ctx *context.Context, ids, mask, pos, sel, tgt, valid *graph.Node) *graph.Node {
		return m.targetLogProbsGraph(ctx, m.HiddenGraph(ctx, ids, mask, pos, nil), sel, tgt, valid)
	}
	out, err := m.run(fmt.Sprintf("logprobs/%dx%dx%d", B, Lp, Tp), fn,
		nn.IntTensor(ids, Lp, m.padID()), nn.IntTensor(mask, Lp, 0), nn.IntTensor(pos, Lp, 0),
		tensors.FromFlatDataAndDimensions(sel, B, Tp), tensors.FromFlatDataAndDimensions(tgt, B, Tp),
		tensors.FromFlatDataAndDimensions(valid, B, Tp))
	if err != nil {
		return nil, err
	}
	flat, err := tensors.CopyFlatData[float32](out[0])
	if err != nil {
		return nil, fmt.Errorf("decoder.ContinuationLogProbs: %w", err)
	}
	scores := make([]Score, B)
	for i, p := range pairs {
		lp := append([]float32(nil), flat[i*Tp:i*Tp+len(p.Continuation)]...)
		sum := 0.0
		for _, x := range lp {
			sum += float64(x)
		}
		nll := -sum / float64(len(lp))
		scores[i] = Score{LogProbs: lp, MeanNLL: nll, Perplexity: math.Exp(nll)}
	}
	return scores, nil
}

// Loss is the HF causal-LM loss (LossGraph) of ids, mask [B, L] with labels
// [B, L] (t5.IgnoreIndex = -100 on positions not scored, e.g. the prompt
// of an SFT example) and position ids arange: the mean natural-log
// cross-entropy of labels[:, 1:] given the tokens before them.
func (m *Model) Loss(ids, mask, labels [][]int) (float32, error) {
	mask, pos, B, L, err := m.checkBatch("decoder.Loss", ids, mask, nil)
	if err != nil {
		return 0, err
	}
	if len(labels) != B {
		return 0, fmt.Errorf("decoder.Loss: labels has %d rows, input_ids %d", len(labels), B)
	}
	for r, row := range labels {
		if len(row) != L {
			return 0, fmt.Errorf("decoder.Loss: labels row %d has length %d, input_ids %d", r, len(row), L)
		}
		for c, x := range row {
			if x != t5.IgnoreIndex && (x < 0 || x >= m.Config.VocabSize) {
				return 0, fmt.Errorf("decoder.Loss: labels row %d position %d: %d outside [0,%d) and not %d", r, c, x, m.Config.VocabSize, t5.IgnoreIndex)
			}
		}
	}
	Lp := t5.PadLen(L)
	fn := func(ctx *context.Context, ids, mask, pos, labels *graph.Node) *graph.Node {
		return m.LossGraph(ctx, ids, mask, pos, labels)
	}
	out, err := m.run(fmt.Sprintf("loss/%dx%d", B, Lp), fn, nn.IntTensor(ids, Lp, m.padID()), nn.IntTensor(mask, Lp, 0),
		nn.IntTensor(pos, Lp, 0), nn.IntTensor(labels, Lp, t5.IgnoreIndex))
	if err != nil {
		return 0, err
	}
	return tensors.ToScalar[float32](out[0]), nil
}
