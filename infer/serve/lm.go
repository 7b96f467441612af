package serve

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// LLM writes a text for a prompt: the rationale, the answer and the HyDE
// documents of the pipeline. An empty text is a valid answer, not an error.
type LLM interface {
	Complete(ctx context.Context, prompt string, maxTokens int) (string, error)
	Name() string
}

// GeneratorLLM adapts a models/generate.Generator (an OpenAI-compatible
// server: Ollama, llama.cpp server, vLLM) to LLM, decoding greedily
// (temperature 0, one text). generate.ErrEmpty becomes "".
type GeneratorLLM struct{ G generate.Generator }

// Complete implements LLM.
func (g GeneratorLLM) Complete(ctx context.Context, prompt string, maxTokens int) (string, error) {
	outs, errs := g.G.Generate(ctx, []string{prompt}, generate.Options{MaxNewTokens: maxTokens, N: 1})
	if errs[0] != nil {
		if errors.Is(errs[0], generate.ErrEmpty) {
			return "", nil
		}
		return "", errs[0]
	}
	return outs[0][0], nil
}

// Name implements LLM.
func (g GeneratorLLM) Name() string { return g.G.Name() }

// LocalLM is the local T5 generator behind /v1/completions and
// /v1/chat/completions, and the pipeline's LLM when no server is given.
//
// Generation (echo false): the prompt is the encoder input (T5 tokenizer,
// </s> appended, cut to MaxInputTokens) and t5.Model.Generate decodes
// greedily, or samples with a temperature > 0 (HF generate conventions).
//
// Echo with logprobs (what the perplexity labeler's HTTP scorer sends:
// echo=true, logprobs=0, max_tokens=1): a seq2seq model has no
// log-probabilities for its encoder input, so the text is scored as the
// decoder target after an empty encoder input (just </s>): tokens are the
// SentencePiece pieces of the text (special-token strings are plain text
// here), token t has log p(piece_t | pieces_<t, "") from one teacher-forced
// pass, token 0's is null (the OpenAI convention for the first prompt
// token), and each token's string is the span of the original text up to
// its end (whitespace the normalizer dropped is attached to the next piece),
// so the tokens spell the prompt exactly and text_offset counts characters.
// The max_tokens completion is the greedy continuation of that decoder
// sequence, one pass per token.
type LocalLM struct {
	Model     *t5.Model
	Tokenizer tokenizer.Tokenizer
	ID        string // model name reported by /v1/models
	// MaxInputTokens cuts generation prompts (default 512); MaxEchoTokens
	// limits scored texts (default 2048).
	MaxInputTokens, MaxEchoTokens int
}

// LoadLocalLM loads an HF T5 directory on the named backend.
func LoadLocalLM(dir, backendName string) (*LocalLM, error) {
	m, tok, err := t5.LoadWithTokenizer(dir, backendName)
	if err != nil {
		return nil, fmt.Errorf("load generator: %w", err)
	}
	return &LocalLM{Model: m, Tokenizer: tok, ID: "t5:" + filepath.Base(dir)}, nil
}

// Name implements LLM.
func (l *LocalLM) Name() string { return l.ID }

// ErrBadPrompt reports a prompt the local model cannot take (empty, too
// long); the server answers 400.
var ErrBadPrompt = errors.New("bad prompt")

// errStopped ends decoding early from GenOptions' callbacks (a stop
// string was produced).
var errStopped = errors.New("stop string reached")

// GenOptions configure LocalLM.GenerateIDs (OpenAI completions fields).
type GenOptions struct {
	MaxTokens   int     // ≤ 0: 64
	Temperature float64 // 0: greedy
	TopP        float64 // nucleus sampling; 0 or 1: off
	Seed        int64
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

// PromptIDs tokenizes a generation prompt: T5 pieces with </s> appended,
// cut to MaxInputTokens (default 512), as HF T5Tokenizer(truncation=True).
func (l *LocalLM) PromptIDs(prompt string) []int {
	limit := l.MaxInputTokens
	if limit <= 0 {
		limit = 512
	}
	return generate.EncoderIDs(l.Tokenizer, prompt, limit)
}

// Generate decodes up to maxTokens tokens (≤ 0: 64) for prompt with
// temperature (0: greedy) and seed, and returns the text (special tokens
// dropped), the number of prompt and generated tokens, and whether it
// stopped at </s>.
func (l *LocalLM) Generate(prompt string, maxTokens int, temperature float64, seed int64) (text string, promptTokens, genTokens int, stopped bool, err error) {
	r, err := l.GenerateIDs(context.Background(), l.PromptIDs(prompt), GenOptions{MaxTokens: maxTokens, Temperature: temperature, Seed: seed, Logprobs: -1})
	if err != nil {
		return "", 0, 0, false, err
	}
	return r.Text, r.PromptTokens, r.GenTokens, r.Finish == "stop", nil
}

// GenerateIDs decodes from encoder input ids (as given; PromptIDs makes
// them from text) with t5.Model.Generate, one sequence. ctx is checked
// after every decoding step, so a cancelled request stops within one step.
// The text is the decoded tokens without special tokens and leading
// spaces. Errors: ErrBadPrompt for ids outside the vocabulary or over
// MaxInputTokens, ctx's error, the model's.
func (l *LocalLM) GenerateIDs(ctx context.Context, ids []int, opt GenOptions) (GenResult, error) {
	maxTokens := opt.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 64
	}
	limit := l.MaxInputTokens
	if limit <= 0 {
		limit = 512
	}
	if len(ids) == 0 || len(ids) > limit {
		return GenResult{}, fmt.Errorf("%w: %d prompt tokens, want 1..%d", ErrBadPrompt, len(ids), limit)
	}
	for _, id := range ids {
		if id < 0 || id >= l.Model.Config.VocabSize {
			return GenResult{}, fmt.Errorf("%w: token id %d outside the vocabulary [0, %d)", ErrBadPrompt, id, l.Model.Config.VocabSize)
		}
	}
	eos := l.Model.Config.EOSTokenID
	var gen []int
	emitted, text := "", ""
	finish := "length"
	hold := 0 // characters held back while they could start a stop string
	for _, s := range opt.Stop {
		hold = max(hold, len(s)-1)
	}
	step := func(_ int, next []int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if next[0] == eos {
			finish = "stop"
			return nil
		}
		gen = append(gen, next[0])
		text = strings.TrimLeft(l.Tokenizer.Decode(gen, true), " ")
		for _, s := range opt.Stop {
			if i := strings.Index(text, s); i >= 0 {
				text, finish = text[:i], "stop"
				return errStopped
			}
		}
		if opt.OnText != nil && strings.HasPrefix(text, emitted) && len(text)-hold > len(emitted) {
			cut := len(text) - hold
			for cut > len(emitted) && cut < len(text) && !utf8.RuneStart(text[cut]) {
				cut--
			}
			if cut > len(emitted) {
				d := text[len(emitted):cut]
				emitted = text[:cut]
				return opt.OnText(d)
			}
		}
		return nil
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
	if opt.OnText != nil && len(text) > len(emitted) && strings.HasPrefix(text, emitted) {
		if err := opt.OnText(text[len(emitted):]); err != nil {
			return GenResult{}, err
		}
	}
	r := GenResult{Text: text, PromptTokens: len(ids), GenTokens: len(gen), Finish: finish, IDs: gen}
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
func (l *LocalLM) generatedLogprobs(ids, gen []int, top int) (*openai.Logprobs, error) {
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
		v := logSoftmaxAt(row, id)
		s := l.pieceText(id)
		lp.Tokens = append(lp.Tokens, s)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
		if top > 0 {
			lp.TopLogprobs = append(lp.TopLogprobs, l.topLogprobs(row, top))
		}
	}
	return lp, nil
}

// pieceText is a token's text: its piece with ▁ as a space.
func (l *LocalLM) pieceText(id int) string {
	return strings.ReplaceAll(l.Tokenizer.IDToToken(id), "▁", " ")
}

// topLogprobs returns the k most likely tokens of a logit row by their
// text (the OpenAI completions top_logprobs map).
func (l *LocalLM) topLogprobs(row []float32, k int) map[string]float64 {
	idx := make([]int, len(row))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return row[idx[a]] > row[idx[b]] })
	out := map[string]float64{}
	for _, i := range idx[:min(k, len(idx))] {
		s := l.pieceText(i)
		if _, dup := out[s]; !dup {
			out[s] = logSoftmaxAt(row, i)
		}
	}
	return out
}

// Complete implements LLM with greedy decoding; ctx stops it between
// decoding steps.
func (l *LocalLM) Complete(ctx context.Context, prompt string, maxTokens int) (string, error) {
	r, err := l.GenerateIDs(ctx, l.PromptIDs(prompt), GenOptions{MaxTokens: maxTokens, Logprobs: -1})
	return r.Text, err
}

// Seq2SeqScore is the encoder-decoder scoring of /v1/completions'
// encoder_input extension: target's tokens and their teacher-forced
// log-probabilities given the encoder input, computed by
// label.LocalT5Scorer on this model (so they equal `--scorer t5:DIR`
// exactly): both texts tokenized with </s> appended and cut to 512 tokens,
// the final </s> scored too. Tokens are the pieces' texts (▁ as a space;
// the last is "</s>"). top > 0 adds the top alternatives per token.
func (l *LocalLM) Seq2SeqScore(ctx context.Context, encoderInput, target string, top int) (lp *openai.Logprobs, encTokens int, err error) {
	sc := label.NewLocalT5Scorer(l.ID, l.Model, l.Tokenizer)
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
		s := l.pieceText(id)
		v := vals[t]
		lp.Tokens = append(lp.Tokens, s)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
		if top > 0 {
			lp.TopLogprobs = append(lp.TopLogprobs, l.topLogprobs(logits[t*V:(t+1)*V], top))
		}
	}
	return lp, len(in), nil
}

// Echo scores text as described on LocalLM and appends the greedy
// continuation of up to maxTokens tokens (0: none). It returns the logprobs
// object of the whole (text + completion), the completion, and the token
// counts. Errors: ErrBadPrompt for an empty text, a text of more than
// MaxEchoTokens pieces or a tokenizer that is not SentencePiece; the
// model's errors.
func (l *LocalLM) Echo(ctx context.Context, text string, maxTokens, top int) (lp *openai.Logprobs, completion string, promptTokens, genTokens int, err error) {
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
				v := logSoftmaxAt(row, toks[t].ID)
				lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
				if top > 0 {
					lp.TopLogprobs = append(lp.TopLogprobs, l.topLogprobs(row, top))
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
		v := logSoftmaxAt(last, best)
		s := strings.ReplaceAll(sp.IDToToken(best), "▁", " ")
		lp.Tokens = append(lp.Tokens, s)
		lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
		if top > 0 {
			lp.TopLogprobs = append(lp.TopLogprobs, l.topLogprobs(last, top))
		}
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
		completion += s
		dec = append(dec, best)
	}
	return lp, completion, len(toks), genTokens, nil
}

// logSoftmaxAt is log softmax(row)[i], computed in float64 with the maximum
// subtracted.
func logSoftmaxAt(row []float32, i int) float64 {
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
