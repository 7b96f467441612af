package lm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// DefaultT5Temperature is SL-HyDE's sampling temperature.
const DefaultT5Temperature = 0.7

// defaultMaxNewTokens is T5's generation length when none is asked.
const defaultMaxNewTokens = 64

// T5 is a local encoder-decoder language model (models/t5, HF
// T5ForConditionalGeneration conventions):
//
//   - Generate (Generator): each prompt is encoded (T5 tokenizer, eos
//     appended, cut to MaxInputTokens) and decoded as one batch of opt.N
//     copies seeded with ItemSeed(opt.Seed, prompt), so results do not
//     depend on the other prompts; temperature 0 decodes greedily
//     (t5.Model.Generate, HF generate(do_sample, num_beams=1)). Per-item
//     errors: a generation failure, an empty or non-UTF-8 text (CheckText).
//     Calls are serialized.
//   - TargetLogProbs (Scorer): T5Scorer on this model (prompt = encoder
//     input, target = labels).
//   - GenerateIDs, Seq2SeqScore and Echo: the single-sequence operations
//     behind the OpenAI completions endpoints of infer/serve.
//
// Echo with logprobs (what an echo scorer sends: echo=true, logprobs=0,
// max_tokens=1): a seq2seq model has no log-probabilities for its encoder
// input, so the text is scored as the decoder target after an empty encoder
// input (just </s>): tokens are the SentencePiece pieces of the text
// (special-token strings are plain text here), token t has
// log p(piece_t | pieces_<t, "") from one teacher-forced pass, token 0's is
// null (the OpenAI convention for the first prompt token), and each token's
// string is the span of the original text up to its end (whitespace the
// normalizer dropped is attached to the next piece), so the tokens spell the
// prompt exactly and text_offset counts characters. The max_tokens
// completion is the greedy continuation of that decoder sequence, one pass
// per token.
type T5 struct {
	Model     *t5.Model
	Tokenizer tokenizer.Tokenizer
	// Dir is the checkpoint directory (for Name); may be empty.
	Dir string
	// ID, when set, is the name; else "t5:<base of Dir>" ("t5" without Dir).
	ID string
	// MaxInputTokens cuts prompts (default 512, T5's training length);
	// MaxEchoTokens limits texts Echo scores (default 2048).
	MaxInputTokens, MaxEchoTokens int

	mu sync.Mutex
}

// LoadT5 loads the model and tokenizer of an HF T5 directory on the named
// GoMLX backend ("" = default).
func LoadT5(dir, backendName string) (*T5, error) {
	return LoadT5As(dir, backendName, nn.Float32)
}

// LoadT5As is LoadT5 holding the weights as dt (t5.LoadAs): nn.Auto keeps a
// BF16 checkpoint in bfloat16 for generation and scoring (not for
// fine-tuning, which needs float32 master weights: LoadT5).
func LoadT5As(dir, backendName string, dt nn.DType) (*T5, error) {
	m, tok, err := t5.LoadWithTokenizerAs(dir, backendName, dt)
	if err != nil {
		return nil, fmt.Errorf("t5 language model %s: %w", dir, err)
	}
	return &T5{Model: m, Tokenizer: tok, Dir: dir}, nil
}

// Name is ID, or "t5:<dir base name>", or "t5".
func (l *T5) Name() string {
	switch {
	case l.ID != "":
		return l.ID
	case l.Dir == "":
		return "t5"
	}
	return "t5:" + filepath.Base(l.Dir)
}

func (l *T5) maxInput() int {
	if l.MaxInputTokens <= 0 {
		return DefaultT5MaxTokens
	}
	return l.MaxInputTokens
}

// InputIDs returns the encoder ids of a prompt as HF's truncation=True
// makes them: tokens cut to MaxInputTokens−1 (default 512), then eos. It is
// the input of Generate, UserIDs (the pipeline's prompts) and fine-tuning.
func (l *T5) InputIDs(prompt string) []int {
	return EncoderIDs(l.Tokenizer, prompt, l.maxInput())
}

// PromptIDs returns the encoder ids of an OpenAI completions prompt: all
// its tokens, then eos, not cut, so that GenerateIDs refuses a prompt over
// MaxInputTokens (vLLM answers 400 there, it never truncates).
func (l *T5) PromptIDs(prompt string) []int {
	return append(l.Tokenizer.Encode(prompt, false), l.Tokenizer.EOSID())
}

// ChatIDs is how chat messages become the T5 encoder input: the contents
// of all messages, in order, joined by a blank line (Flan-T5 has no chat
// template; roles are not written), through PromptIDs (not cut).
func (l *T5) ChatIDs(msgs []openai.Message) ([]int, error) {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = m.Content
	}
	return l.PromptIDs(strings.Join(parts, "\n\n")), nil
}

// UserIDs is InputIDs (a T5 takes the instruction as its encoder input;
// a pipeline prompt longer than the model's input is cut, as HF's).
func (l *T5) UserIDs(prompt string) ([]int, error) { return l.InputIDs(prompt), nil }

// EchoIDs are the SentencePiece piece ids Echo scores (no eos); nil for a
// tokenizer that is not SentencePiece.
func (l *T5) EchoIDs(text string) []int {
	sp, ok := l.Tokenizer.(*sentencepiece.T5)
	if !ok {
		return nil
	}
	var ids []int
	for _, t := range sp.SentencePiece().Encode(text) {
		ids = append(ids, t.ID)
	}
	return ids
}

// EncoderIDs tokenizes a T5 encoder input as HF T5Tokenizer with
// truncation=True and max_length limit (≥ 1): pieces cut to limit−1, then
// </s>.
func EncoderIDs(tok tokenizer.Tokenizer, text string, limit int) []int {
	ids := tok.Encode(text, false)
	if len(ids) > limit-1 {
		ids = ids[:max(limit-1, 0)]
	}
	return append(ids, tok.EOSID())
}

// Scorer returns the T5Scorer of this model, named Name(), with its
// encoder input cut at MaxInputTokens (default 512) and labels at 512.
func (l *T5) Scorer() *T5Scorer {
	s := NewT5Scorer("", l.Model, l.Tokenizer)
	s.ID = l.Name()
	return s
}

// TargetLogProbs implements Scorer through T5Scorer.
func (l *T5) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
	return l.Scorer().TargetLogProbs(ctx, prompt, target)
}

// Generate implements Generator. Stop strings cut each text after
// decoding; TopK is refused (models/t5 samples with temperature and top-p
// only).
func (l *T5) Generate(ctx context.Context, prompts []string, opt Options) ([][]string, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return eachPrompt(ctx, l.Name(), prompts, opt, func(p string, n, maxNew int) ([]string, error) {
		if opt.TopK > 0 {
			return nil, fmt.Errorf("top_k %d: the t5 backend samples with temperature and top_p only", opt.TopK)
		}
		ids := l.InputIDs(p)
		rows := make([][]int, n)
		for k := range rows {
			rows[k] = ids
		}
		res, err := l.Model.Generate(rows, nil, t5.GenerateOptions{MaxNewTokens: maxNew,
			DoSample: opt.Temperature > 0, Temperature: opt.Temperature, TopP: opt.TopP, Seed: ItemSeed(opt.Seed, p)})
		if err != nil {
			return nil, err
		}
		texts := make([]string, len(res))
		for k, row := range res {
			texts[k] = l.Tokenizer.Decode(row, true)
		}
		return texts, nil
	})
}

// ErrBadPrompt reports a prompt the local model cannot take (empty, too
// long, ids outside the vocabulary); servers answer 400.
var ErrBadPrompt = errors.New("bad prompt")

// GenOptions configure T5.GenerateIDs (OpenAI completions fields).
type GenOptions struct {
	MaxTokens   int     // ≤ 0: 64
	Temperature float64 // 0: greedy
	TopP        float64 // nucleus sampling; 0 or 1: off
	Seed        int64
	// TopK keeps the K most likely tokens when sampling (0: off); the T5
	// backend refuses it.
	TopK int
	// Stop strings end the text before their first occurrence (finish
	// reason "stop"); the text never contains one.
	Stop []string
	// Logprobs ≥ 0 returns the log-probability of every generated token
	// and its Logprobs most likely alternatives (OpenAI logprobs /
	// top_logprobs); -1 none.
	Logprobs int
	// OnText, when set, receives the text as it grows (deltas that
	// concatenate to the final text) and can stop decoding with an error.
	OnText func(delta string) error
}

// GenResult is what GenerateIDs produced.
type GenResult struct {
	Text                    string
	PromptTokens, GenTokens int
	Finish                  string           // "stop" (eos or a stop string) or "length"
	Logprobs                *openai.Logprobs // generated tokens; nil unless asked
	IDs                     []int            // generated token ids (without eos)
}

// GenerateIDs decodes from encoder input ids (as given; PromptIDs makes
// them from text) with t5.Model.Generate, one sequence. ctx is checked
// after every decoding step, so a cancelled request stops within one step.
// The text is the decoded tokens without special tokens and leading
// spaces. Errors: ErrBadPrompt for ids outside the vocabulary, a
// *ContextError (an ErrBadPrompt, vLLM's message) over MaxInputTokens,
// ctx's error, the model's.
func (l *T5) GenerateIDs(ctx context.Context, ids []int, opt GenOptions) (GenResult, error) {
	maxTokens := opt.MaxTokens
	if maxTokens <= 0 {
		maxTokens = defaultMaxNewTokens
	}
	if opt.TopK > 0 {
		return GenResult{}, fmt.Errorf("%w: top_k %d: the t5 backend samples with temperature and top_p only", ErrBadPrompt, opt.TopK)
	}
	limit := l.maxInput()
	if len(ids) == 0 {
		return GenResult{}, fmt.Errorf("%w: no prompt tokens", ErrBadPrompt)
	}
	if len(ids) > limit {
		// The decoder's tokens do not share T5's encoder input, so the
		// completion counts 0 towards this limit.
		return GenResult{}, &ContextError{Limit: limit, Prompt: len(ids)}
	}
	for _, id := range ids {
		if id < 0 || id >= l.Model.Config.VocabSize {
			return GenResult{}, fmt.Errorf("%w: token id %d outside the vocabulary [0, %d)", ErrBadPrompt, id, l.Model.Config.VocabSize)
		}
	}
	eos := l.Model.Config.EOSTokenID
	ts := newTextStream(func(ids []int) string { return strings.TrimLeft(l.Tokenizer.Decode(ids, true), " ") }, opt)
	step := func(_ int, next []int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if next[0] == eos {
			ts.finish = "stop"
			return nil
		}
		return ts.push(next[0])
	}
	_, err := l.Model.Generate([][]int{ids}, nil, t5.GenerateOptions{
		MaxNewTokens: maxTokens, DoSample: opt.Temperature > 0, Temperature: opt.Temperature, TopP: opt.TopP, Seed: opt.Seed, Step: step,
	})
	if err != nil && !errors.Is(err, errStopped) {
		if cerr := ctx.Err(); cerr != nil {
			return GenResult{}, cerr
		}
		return GenResult{}, fmt.Errorf("generate: %w", err)
	}
	if err := ts.flush(); err != nil {
		return GenResult{}, err
	}
	gen := ts.ids
	r := GenResult{Text: ts.text, PromptTokens: len(ids), GenTokens: len(gen), Finish: ts.finish, IDs: gen}
	if opt.Logprobs >= 0 && len(gen) > 0 {
		if r.Logprobs, err = l.generatedLogprobs(ids, gen, opt.Logprobs); err != nil {
			return GenResult{}, err
		}
	}
	return r, nil
}

// generatedLogprobs scores gen given the encoder input ids in one
// teacher-forced pass: the model's own log-probabilities (before
// temperature or top-p, as vLLM's default raw logprobs) and the top
// alternatives.
func (l *T5) generatedLogprobs(ids, gen []int, top int) (*openai.Logprobs, error) {
	dec := append([]int{l.Model.Config.DecoderStartTokenID}, gen[:len(gen)-1]...)
	_, _, logits, err := l.Model.Forward([][]int{ids}, nil, [][]int{dec})
	if err != nil {
		return nil, fmt.Errorf("generate: logprobs: %w", err)
	}
	lg := tensors.MustCopyFlatData[float32](logits) // [1, T, V]
	V := len(lg) / len(dec)
	lp := &openai.Logprobs{}
	chars := 0
	for t, id := range gen {
		row := lg[t*V : (t+1)*V]
		v := LogSoftmaxAt(row, id)
		s := l.PieceText(id)
		lp.Tokens = append(lp.Tokens, s)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
		if top > 0 {
			lp.TopLogprobs = append(lp.TopLogprobs, topLogprobs(row, top, l.PieceText))
		}
	}
	return lp, nil
}

// PieceText is a token's text: its piece with ▁ as a space.
func (l *T5) PieceText(id int) string {
	return strings.ReplaceAll(l.Tokenizer.IDToToken(id), "▁", " ")
}

// Seq2SeqScore is the encoder-decoder scoring of /v1/completions'
// encoder_input extension: target's tokens and their teacher-forced
// log-probabilities given the encoder input, computed by Scorer() (so they
// equal the local T5 scorer exactly): both texts tokenized with </s>
// appended and cut to 512 tokens, the final </s> scored too. Tokens are the
// pieces' texts (▁ as a space; the last is "</s>"). top > 0 adds the top
// alternatives per token. Errors: ErrBadPrompt wrapping the scorer's.
func (l *T5) Seq2SeqScore(ctx context.Context, encoderInput, target string, top int) (lp *openai.Logprobs, encTokens int, err error) {
	sc := l.Scorer()
	in, lab := sc.Tokens(encoderInput, target)
	vals, err := sc.TargetLogProbs(ctx, encoderInput, target)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrBadPrompt, err)
	}
	var logits []float32
	V := 0
	if top > 0 {
		dec := t5.ShiftRight([][]int{lab}, l.Model.Config.DecoderStartTokenID, l.Model.Config.PadTokenID)
		_, _, lg, err := l.Model.Forward([][]int{in}, nil, dec)
		if err != nil {
			return nil, 0, fmt.Errorf("score: %w", err)
		}
		logits = tensors.MustCopyFlatData[float32](lg)
		V = len(logits) / len(lab)
	}
	lp = &openai.Logprobs{}
	chars := 0
	for t, id := range lab {
		s := l.PieceText(id)
		v := vals[t]
		lp.Tokens = append(lp.Tokens, s)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
		if top > 0 {
			lp.TopLogprobs = append(lp.TopLogprobs, topLogprobs(logits[t*V:(t+1)*V], top, l.PieceText))
		}
	}
	return lp, len(in), nil
}

// Echo scores text as described on T5 and appends the greedy continuation
// of up to maxTokens tokens (0: none). It returns the logprobs object of
// the whole (text + completion), the completion, and the token counts.
// Errors: ErrBadPrompt for an empty text, a text of more than MaxEchoTokens
// pieces or a tokenizer that is not SentencePiece; the model's errors.
func (l *T5) Echo(ctx context.Context, text string, maxTokens, top int) (lp *openai.Logprobs, completion string, promptTokens, genTokens int, err error) {
	sp, ok := l.Tokenizer.(*sentencepiece.T5)
	if !ok {
		return nil, "", 0, 0, fmt.Errorf("%w: echo needs a SentencePiece (T5) tokenizer", ErrBadPrompt)
	}
	toks := sp.SentencePiece().Encode(text)
	if len(toks) == 0 {
		return nil, "", 0, 0, fmt.Errorf("%w: empty prompt", ErrBadPrompt)
	}
	limit := l.MaxEchoTokens
	if limit <= 0 {
		limit = 2048
	}
	if len(toks) > limit {
		return nil, "", 0, 0, fmt.Errorf("%w: %d tokens, the limit is %d", ErrBadPrompt, len(toks), limit)
	}
	lp = &openai.Logprobs{}
	prev, chars := 0, 0
	dec := []int{l.Model.Config.DecoderStartTokenID}
	for i, t := range toks {
		end := max(t.End, prev)
		if i == len(toks)-1 {
			end = len(text)
		}
		s := text[prev:end]
		prev = end
		lp.Tokens = append(lp.Tokens, s)
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
		dec = append(dec, t.ID)
	}
	enc := [][]int{{l.Tokenizer.EOSID()}}
	eos := l.Model.Config.EOSTokenID
	for step := 0; ; step++ {
		if err := ctx.Err(); err != nil {
			return nil, "", 0, 0, err
		}
		_, _, logits, err := l.Model.Forward(enc, nil, [][]int{dec})
		if err != nil {
			return nil, "", 0, 0, fmt.Errorf("echo: %w", err)
		}
		lg := tensors.MustCopyFlatData[float32](logits) // [1, T, V]
		V := len(lg) / len(dec)
		if step == 0 {
			for t := range toks {
				if t == 0 {
					lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
					if top > 0 {
						lp.TopLogprobs = append(lp.TopLogprobs, nil)
					}
					continue
				}
				// Decoder position t (inputs decoder_start, pieces <t)
				// predicts piece t.
				row := lg[t*V : (t+1)*V]
				v := LogSoftmaxAt(row, toks[t].ID)
				lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
				if top > 0 {
					lp.TopLogprobs = append(lp.TopLogprobs, topLogprobs(row, top, l.PieceText))
				}
			}
		}
		if step >= maxTokens {
			break
		}
		last := lg[(len(dec)-1)*V : len(dec)*V]
		best := 0
		for j, x := range last {
			if x > last[best] {
				best = j
			}
		}
		genTokens++
		if best == eos {
			break
		}
		v := LogSoftmaxAt(last, best)
		s := l.PieceText(best)
		lp.Tokens = append(lp.Tokens, s)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		if top > 0 {
			lp.TopLogprobs = append(lp.TopLogprobs, topLogprobs(last, top, l.PieceText))
		}
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
		completion += s
		dec = append(dec, best)
	}
	return lp, completion, len(toks), genTokens, nil
}

// topLogprobs returns the k most likely tokens of a logit row by their
// text (the OpenAI completions top_logprobs map; a text two tokens share
// keeps the likelier).
func topLogprobs(row []float32, k int, text func(id int) string) map[string]float64 {
	idx := make([]int, len(row))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return row[idx[a]] > row[idx[b]] })
	out := map[string]float64{}
	for _, i := range idx[:min(k, len(idx))] {
		s := text(i)
		if _, dup := out[s]; !dup {
			out[s] = LogSoftmaxAt(row, i)
		}
	}
	return out
}

// LogSoftmaxAt is log softmax(row)[i], computed in float64 with the maximum
// subtracted.
func LogSoftmaxAt(row []float32, i int) float64 {
	m := math.Inf(-1)
	for _, x := range row {
		m = math.Max(m, float64(x))
	}
	var s float64
	for _, x := range row {
		s += math.Exp(float64(x) - m)
	}
	return float64(row[i]) - m - math.Log(s)
}
