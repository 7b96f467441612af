package lm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/tokenizer/bpe"
	"github.com/ragforge/ragforge/models/tokenizer/chat"
)

// Decoder is a local decoder-only language model (models/decoder: Llama,
// Qwen2, Qwen3) with its byte-level BPE tokenizer (models/tokenizer/bpe)
// and chat template, in vLLM's conventions:
//
//   - Echo scores a text as vLLM's /v1/completions with echo and logprobs:
//     the text is tokenized with the tokenizer's specials (bos for Llama 3,
//     none for Qwen), token 0's log-probability is null, token t's is
//     log p(token_t | tokens_<t) (only the scored positions go through
//     lm_head, decoder.ContinuationLogProbs); each token's string is its
//     span of the text up to its end, so the tokens spell the text.
//   - TargetLogProbs (Scorer) is Echo on prompt + Separator + target, with
//     the target's tokens chosen by openai.TargetFromEcho: the same numbers
//     an lm.HTTPScorer gets from a server that serves this model.
//   - Generate (Generator) renders each prompt as one user message through
//     the chat template when the tokenizer has one (else the raw text with
//     its specials) and samples opt.N rows seeded with ItemSeed;
//     GenerateIDs is the single-sequence, streaming form servers use.
//
// A prompt (plus the tokens asked for) longer than max_position_embeddings
// is refused with a *ContextError, as vLLM does; it is never truncated.
type Decoder struct {
	Model     *decoder.Model
	Tokenizer *bpe.Tokenizer
	// Dir is the checkpoint directory (for Name); may be empty.
	Dir string
	// ID, when set, is the name; else "<model_type>:<base of Dir>".
	ID string
	// Separator goes between prompt and target in TargetLogProbs (as
	// lm.HTTPScorer's decoder-only form); LoadDecoder sets " ".
	Separator string

	mu sync.Mutex
}

// LoadDecoder loads an HF decoder directory (config.json model_type llama,
// qwen2 or qwen3, safetensors, generation_config.json, tokenizer.json and
// tokenizer_config.json) on the named GoMLX backend ("" = default). Errors:
// the loaders', and a tokenizer with ids beyond the model's vocabulary.
func LoadDecoder(dir, backendName string) (*Decoder, error) {
	return LoadDecoderAs(dir, backendName, nn.Float32)
}

// LoadDecoderAs is LoadDecoder holding the weights as dt (decoder.LoadAs):
// nn.Auto keeps a BF16 checkpoint in bfloat16 for generation and scoring.
func LoadDecoderAs(dir, backendName string, dt nn.DType) (*Decoder, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, err
	}
	m, err := decoder.LoadAs(be, dir, dt)
	if err != nil {
		return nil, fmt.Errorf("decoder language model %s: %w", dir, err)
	}
	tok, err := bpe.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("decoder language model %s: %w", dir, err)
	}
	if tok.Len() > m.Config.VocabSize {
		return nil, fmt.Errorf("decoder language model %s: tokenizer.json has %d ids, config.json vocab_size %d", dir, tok.Len(), m.Config.VocabSize)
	}
	return &Decoder{Model: m, Tokenizer: tok, Dir: dir, Separator: " "}, nil
}

// Name is ID, or "<model_type>:<dir base name>".
func (d *Decoder) Name() string {
	if d.ID != "" {
		return d.ID
	}
	return d.Model.Config.ModelType + ":" + filepath.Base(d.Dir)
}

// MaxContext is max_position_embeddings: prompt and generated tokens
// together.
func (d *Decoder) MaxContext() int { return d.Model.Config.MaxPositionEmbeddings }

// ContextError is vLLM's refusal of a request over the context length; it
// wraps ErrBadPrompt (servers answer 400).
type ContextError struct {
	Limit, Prompt, Completion int
}

func (e *ContextError) Error() string {
	return fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
		e.Limit, e.Prompt+e.Completion, e.Prompt, e.Completion)
}

// Unwrap makes a ContextError an ErrBadPrompt.
func (e *ContextError) Unwrap() error { return ErrBadPrompt }

func (d *Decoder) checkContext(prompt, completion int) error {
	if prompt+completion > d.MaxContext() {
		return &ContextError{Limit: d.MaxContext(), Prompt: prompt, Completion: completion}
	}
	return nil
}

// PromptIDs tokenizes a completion prompt with the tokenizer's specials
// (HF tokenizer(text), add_special_tokens=True, as vLLM).
func (d *Decoder) PromptIDs(text string) []int { return d.Tokenizer.Encode(text, true) }

// ChatIDs renders messages with the chat template (add_generation_prompt)
// and tokenizes the result without adding specials (HF
// apply_chat_template(tokenize=True)). Errors: no template, the template's.
func (d *Decoder) ChatIDs(msgs []openai.Message) ([]int, error) {
	cm := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		cm[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	text, err := d.Tokenizer.ApplyChatTemplate(cm, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name(), err)
	}
	return d.Tokenizer.Encode(text, false), nil
}

// decodeText is the text of generated ids, special tokens dropped.
func (d *Decoder) decodeText(ids []int) string { return d.Tokenizer.Decode(ids, true) }

// genOptions maps the request's sampling onto the model's generation
// config (eos ids from generation_config.json / config.json).
func (d *Decoder) genOptions(maxNew int, temperature, topP float64, topK int, seed int64) decoder.GenerateOptions {
	o := d.Model.GenerateOptions()
	o.MaxNewTokens = maxNew
	o.DoSample = temperature > 0
	o.Temperature, o.TopP, o.TopK, o.Seed = temperature, topP, topK, uint64(seed)
	if topP <= 0 {
		o.TopP = 1
	}
	return o
}

// Generate implements Generator.
func (d *Decoder) Generate(ctx context.Context, prompts []string, opt Options) ([][]string, []error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return eachPrompt(ctx, d.Name(), prompts, opt, func(p string, n, maxNew int) ([]string, error) {
		ids, err := d.UserIDs(p)
		if err == nil {
			err = d.checkContext(len(ids), maxNew)
		}
		if err != nil {
			return nil, err
		}
		rows := make([][]int, n)
		for k := range rows {
			rows[k] = ids
		}
		o := d.genOptions(maxNew, opt.Temperature, opt.TopP, opt.TopK, ItemSeed(opt.Seed, p))
		if len(opt.Stop) > 0 {
			o.StopStrings, o.Decode = opt.Stop, d.decodeText
		}
		g, err := d.Model.Generate(rows, o)
		if err != nil {
			return nil, err
		}
		texts := make([]string, len(g.NewTokens))
		for k, row := range g.NewTokens {
			texts[k] = d.decodeText(row)
		}
		return texts, nil
	})
}

// UserIDs is prompt as Generate encodes it: UserPromptIDs with the
// decoder's tokenizer.
func (d *Decoder) UserIDs(prompt string) ([]int, error) {
	ids, err := UserPromptIDs(d.Tokenizer, prompt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name(), err)
	}
	return ids, nil
}

// UserPromptIDs encodes prompt as a decoder generates from it: one user
// message through tok's chat template with the assistant turn opened (HF
// apply_chat_template(add_generation_prompt=True, tokenize=True): no
// specials added beyond the template's), or, when tok has no template, the
// raw prompt with the tokenizer's specials (HF tokenizer(text)). It is the
// one rendering of a user prompt: Decoder.Generate uses it, and LoRA SFT
// (train lora, selflearn's generator stage) encodes its prompts with it, so
// a tuned generator is trained on exactly the ids it is later asked with.
// Errors: the template's.
func UserPromptIDs(tok *bpe.Tokenizer, prompt string) ([]int, error) {
	if tok.Config().ChatTemplate == "" {
		return tok.Encode(prompt, true), nil
	}
	text, err := tok.ApplyChatTemplate([]chat.Message{{Role: "user", Content: prompt}}, true)
	if err != nil {
		return nil, err
	}
	return tok.Encode(text, false), nil
}

// GenerateIDs decodes one sequence from prompt ids (PromptIDs or ChatIDs)
// with the KV cache; ctx is checked after every step. The text is the
// generated tokens without specials, cut at a stop string. Errors:
// ErrBadPrompt (empty, ids outside the vocabulary), a *ContextError when
// prompt + MaxTokens exceed the context, ctx's error, the model's.
func (d *Decoder) GenerateIDs(ctx context.Context, ids []int, opt GenOptions) (GenResult, error) {
	maxTokens := opt.MaxTokens
	if maxTokens <= 0 {
		maxTokens = defaultMaxNewTokens
	}
	if len(ids) == 0 {
		return GenResult{}, fmt.Errorf("%w: empty prompt", ErrBadPrompt)
	}
	for _, id := range ids {
		if id < 0 || id >= d.Model.Config.VocabSize {
			return GenResult{}, fmt.Errorf("%w: token id %d outside the vocabulary [0, %d)", ErrBadPrompt, id, d.Model.Config.VocabSize)
		}
	}
	if err := d.checkContext(len(ids), maxTokens); err != nil {
		return GenResult{}, err
	}
	o := d.genOptions(maxTokens, opt.Temperature, opt.TopP, opt.TopK, opt.Seed)
	o.OutputLogits = opt.Logprobs >= 0
	eos := map[int]bool{}
	for _, e := range o.EOSTokenIDs {
		eos[e] = true
	}
	ts := newTextStream(d.decodeText, opt)
	o.Step = func(_ int, next []int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if eos[next[0]] {
			ts.finish = "stop"
			return nil
		}
		return ts.push(next[0])
	}
	g, err := d.Model.Generate([][]int{ids}, o)
	if err != nil && !errors.Is(err, errStopped) {
		if cerr := ctx.Err(); cerr != nil {
			return GenResult{}, cerr
		}
		return GenResult{}, fmt.Errorf("generate: %w", err)
	}
	if err := ts.flush(); err != nil {
		return GenResult{}, err
	}
	r := GenResult{Text: ts.text, PromptTokens: len(ids), GenTokens: len(ts.ids), Finish: ts.finish, IDs: ts.ids}
	if opt.Logprobs >= 0 && len(ts.ids) > 0 && g != nil {
		lp := &openai.Logprobs{}
		chars := 0
		for t, id := range ts.ids {
			row := g.StepLogits[t][0]
			v := LogSoftmaxAt(row, id)
			s := d.tokenText(id)
			lp.Tokens = append(lp.Tokens, s)
			lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
			lp.TextOffset = append(lp.TextOffset, chars)
			chars += utf8.RuneCountInString(s)
			if opt.Logprobs > 0 {
				lp.TopLogprobs = append(lp.TopLogprobs, topLogprobs(row, opt.Logprobs, d.tokenText))
			}
		}
		r.Logprobs = lp
	}
	return r, nil
}

// tokenText is one token's text as the logprobs objects show it.
func (d *Decoder) tokenText(id int) string { return d.Tokenizer.Decode([]int{id}, false) }

// EchoIDs are the ids Echo scores: text with the tokenizer's specials.
func (d *Decoder) EchoIDs(text string) []int { return d.PromptIDs(text) }

// Echo scores text as described on Decoder and appends the greedy
// continuation of up to maxTokens tokens (0: none). It returns the logprobs
// object of the whole (text + completion), the completion, and the token
// counts. top > 0 adds the top alternatives per token (this path runs the
// full-vocabulary logits of the text). Errors: ErrBadPrompt for an empty
// text, a *ContextError over the context, the model's errors.
func (d *Decoder) Echo(ctx context.Context, text string, maxTokens, top int) (lp *openai.Logprobs, completion string, promptTokens, genTokens int, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", 0, 0, err
	}
	ids, offs := d.Tokenizer.EncodeOffsets(text, true)
	if len(ids) == 0 {
		return nil, "", 0, 0, fmt.Errorf("%w: empty prompt", ErrBadPrompt)
	}
	if err := d.checkContext(len(ids), maxTokens); err != nil {
		return nil, "", 0, 0, err
	}
	lp = &openai.Logprobs{}
	prev, chars := 0, 0
	for i := range ids {
		end := max(offs[i][1], prev)
		if i == len(ids)-1 {
			end = len(text)
		}
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end++
		}
		s := text[prev:end]
		prev = end
		lp.Tokens = append(lp.Tokens, s)
		lp.TextOffset = append(lp.TextOffset, chars)
		chars += utf8.RuneCountInString(s)
	}
	lp.TokenLogprobs = append(lp.TokenLogprobs, nil)
	if top > 0 {
		lp.TopLogprobs = append(lp.TopLogprobs, nil)
	}
	if len(ids) > 1 {
		if top > 0 {
			logits, err := d.Model.Logits([][]int{ids}, nil, nil)
			if err != nil {
				return nil, "", 0, 0, fmt.Errorf("echo: %w", err)
			}
			lg := tensors.MustCopyFlatData[float32](logits) // [1, L, V]
			V := len(lg) / len(ids)
			for t := 1; t < len(ids); t++ {
				row := lg[(t-1)*V : t*V]
				v := LogSoftmaxAt(row, ids[t])
				lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
				lp.TopLogprobs = append(lp.TopLogprobs, topLogprobs(row, top, d.tokenText))
			}
		} else {
			sc, err := d.Model.ContinuationLogProbs([]decoder.Pair{{Prompt: ids[:1], Continuation: ids[1:]}})
			if err != nil {
				return nil, "", 0, 0, fmt.Errorf("echo: %w", err)
			}
			for _, x := range sc[0].LogProbs {
				v := float64(x)
				lp.TokenLogprobs = append(lp.TokenLogprobs, &v)
			}
		}
	}
	if maxTokens > 0 {
		g, err := d.GenerateIDs(ctx, ids, GenOptions{MaxTokens: maxTokens, Logprobs: max(top, 0)})
		if err != nil {
			return nil, "", 0, 0, err
		}
		if g.Logprobs != nil {
			for i, s := range g.Logprobs.Tokens {
				lp.Tokens = append(lp.Tokens, s)
				lp.TokenLogprobs = append(lp.TokenLogprobs, g.Logprobs.TokenLogprobs[i])
				lp.TextOffset = append(lp.TextOffset, chars)
				chars += utf8.RuneCountInString(s)
				if top > 0 {
					lp.TopLogprobs = append(lp.TopLogprobs, g.Logprobs.TopLogprobs[i])
				}
			}
		}
		completion, genTokens = g.Text, g.GenTokens
	}
	return lp, completion, len(ids), genTokens, nil
}

// TargetLogProbs implements Scorer: the log-probabilities of the tokens of
// Separator+target after prompt, from Echo on the whole text (see Decoder).
func (d *Decoder) TargetLogProbs(ctx context.Context, prompt, target string) ([]float64, error) {
	if strings.TrimSpace(target) == "" {
		return nil, fmt.Errorf("%s: empty target", d.Name())
	}
	text := prompt + d.Separator + target
	lp, _, _, _, err := d.Echo(ctx, text, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name(), err)
	}
	out, err := openai.TargetFromEcho(lp, prompt, text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name(), err)
	}
	return out, nil
}
