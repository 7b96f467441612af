package lm

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/testutil/tinyqwen"
)

func loadQwen2Tiny(t *testing.T) *Decoder {
	t.Helper()
	m, err := Load(tinyqwen.Dir(t), "go")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := m.(*Decoder)
	if !ok {
		t.Fatalf("Load gave %T, want *Decoder for model_type qwen2", m)
	}
	return d
}

// Echo's log-probabilities come from decoder.ContinuationLogProbs (only the
// scored positions through lm_head); with top > 0 they come from the full
// logits and a float64 log-softmax. The two must agree, the tokens must
// spell the text, and token 0 (no bos for Qwen) has none.
func TestDecoderEcho(t *testing.T) {
	d := loadQwen2Tiny(t)
	ctx := context.Background()
	text := "Gout is caused by uric acid — crystals in joints."
	lp, completion, pt, gt, err := d.Echo(ctx, text, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if completion != "" || gt != 0 || pt != len(lp.Tokens) || pt != len(d.Tokenizer.Encode(text, true)) {
		t.Fatalf("completion %q, %d prompt / %d generated tokens for %d echoed", completion, pt, gt, len(lp.Tokens))
	}
	if strings.Join(lp.Tokens, "") != text {
		t.Fatalf("tokens %q do not spell %q", lp.Tokens, text)
	}
	full, _, _, _, err := d.Echo(ctx, text, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if lp.TokenLogprobs[0] != nil || full.TokenLogprobs[0] != nil {
		t.Fatal("token 0 has a log-probability; want null (no context)")
	}
	for i := 1; i < len(lp.Tokens); i++ {
		a, b := *lp.TokenLogprobs[i], *full.TokenLogprobs[i]
		if math.Abs(a-b) > 1e-4 || a > 0 {
			t.Errorf("token %d %q: %v (continuation graph) vs %v (full logits)", i, lp.Tokens[i], a, b)
		}
		if len(full.TopLogprobs[i]) == 0 {
			t.Errorf("token %d: no top alternatives", i)
		}
	}
	// With a completion: the text is followed by the greedy continuation.
	lp2, completion, _, gt, err := d.Echo(ctx, text, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := d.GenerateIDs(ctx, d.PromptIDs(text), GenOptions{MaxTokens: 3, Logprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	if completion != want.Text || gt != want.GenTokens || len(lp2.Tokens) != len(lp.Tokens)+len(want.IDs) {
		t.Errorf("echo completion %q (%d tokens, %d echoed), greedy %q (%d)", completion, gt, len(lp2.Tokens), want.Text, want.GenTokens)
	}
}

// TargetLogProbs is the echo of prompt + " " + target restricted to the
// target's tokens; when the boundary falls between tokens it equals
// ContinuationLogProbs of the two token sequences.
func TestDecoderTargetLogProbs(t *testing.T) {
	d := loadQwen2Tiny(t)
	prompt, target := "Question: what causes gout?\nAnswer:", "uric acid"
	got, err := d.TargetLogProbs(context.Background(), prompt, target)
	if err != nil {
		t.Fatal(err)
	}
	all := d.Tokenizer.Encode(prompt+" "+target, true)
	p := d.Tokenizer.Encode(prompt, true)
	if len(all) <= len(p) || !equalIDs(all[:len(p)], p) {
		t.Skipf("prompt tokens %v are not a prefix of %v; the boundary splits a token", p, all)
	}
	ref, err := d.Model.ContinuationLogProbs([]decoder.Pair{{Prompt: p, Continuation: all[len(p):]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ref[0].LogProbs) {
		t.Fatalf("%d target log-probs, want %d", len(got), len(ref[0].LogProbs))
	}
	for i := range got {
		if math.Abs(got[i]-float64(ref[0].LogProbs[i])) > 1e-5 {
			t.Errorf("target token %d: %v, want %v", i, got[i], ref[0].LogProbs[i])
		}
	}
	t.Logf("%d target tokens, log-probs %v", len(got), got)
	ppl, err := Perplexity(got)
	if err != nil || math.Abs(ppl-ref[0].Perplexity) > 1e-4*ref[0].Perplexity {
		t.Errorf("perplexity %v (%v), decoder's %v", ppl, err, ref[0].Perplexity)
	}
}

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A prompt over max_position_embeddings (128) is refused with vLLM's
// message, never truncated.
func TestDecoderContextLimit(t *testing.T) {
	d := loadQwen2Tiny(t)
	long := strings.Repeat("uric acid crystals ", 60)
	_, _, _, _, err := d.Echo(context.Background(), long, 0, 0)
	var ce *ContextError
	if !errors.As(err, &ce) || !errors.Is(err, ErrBadPrompt) || !strings.Contains(err.Error(), "maximum context length is 128 tokens") {
		t.Fatalf("echo of a long text: %v, want a ContextError naming 128", err)
	}
	ids := d.PromptIDs("short prompt")
	if _, err := d.GenerateIDs(context.Background(), ids, GenOptions{MaxTokens: 128, Logprobs: -1}); !errors.As(err, &ce) || ce.Completion != 128 || ce.Prompt != len(ids) {
		t.Fatalf("max_tokens past the context: %v", err)
	}
	if _, err := d.TargetLogProbs(context.Background(), long, "gout"); !errors.As(err, &ce) {
		t.Fatalf("scoring a long prompt: %v", err)
	}
}

// Generation: per-prompt determinism (alone or in a batch), stop strings,
// the chat template's ids.
func TestDecoderGenerate(t *testing.T) {
	d := loadQwen2Tiny(t)
	ctx := context.Background()
	prompts := []string{"what causes gout?", "aspirin dose"}
	opt := Options{MaxNewTokens: 6, Temperature: 0.7, TopK: 20, Seed: 1, N: 2}
	outs, errs := d.Generate(ctx, prompts, opt)
	alone, aerrs := d.Generate(ctx, prompts[1:], opt)
	if strings.Join(outs[1], "|") != strings.Join(alone[0], "|") || (errs[1] == nil) != (aerrs[0] == nil) {
		t.Fatalf("batch %q (%v) vs alone %q (%v)", outs[1], errs[1], alone[0], aerrs[0])
	}
	ids, err := d.ChatIDs([]openai.Message{{Role: "user", Content: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Tokenizer.Decode(ids, false); got != "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" {
		t.Fatalf("chat prompt %q", got)
	}
	g, err := d.GenerateIDs(ctx, ids, GenOptions{MaxTokens: 8, Logprobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g.Logprobs == nil || len(g.Logprobs.Tokens) != len(g.IDs) {
		t.Fatalf("logprobs %+v for %d ids", g.Logprobs, len(g.IDs))
	}
	if len(g.Text) < 2 || !utf8.RuneStart(g.Text[1]) || !utf8.RuneStart(g.Text[2]) {
		t.Skipf("greedy text %q: no one-byte stop string to cut it with", g.Text)
	}
	{
		stop := g.Text[1:2]
		t.Logf("greedy chat reply %q, stop %q", g.Text, stop)
		var deltas []string
		s, err := d.GenerateIDs(ctx, ids, GenOptions{MaxTokens: 8, Logprobs: -1, Stop: []string{stop}, OnText: func(x string) error { deltas = append(deltas, x); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := CutStop(g.Text, []string{stop})
		if s.Text != want || s.Finish != "stop" || strings.Join(deltas, "") != want {
			t.Fatalf("stop %q on %q: text %q finish %s deltas %q", stop, g.Text, s.Text, s.Finish, deltas)
		}
	}
}

// Load dispatches on model_type and names what it refuses.
func TestLoadFamilies(t *testing.T) {
	if _, ok := Families()["qwen3"]; !ok {
		t.Fatal("qwen3 missing from Families")
	}
	m, err := Load(fixture(t, "t5-flan-tiny"), "go")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(*T5); !ok {
		t.Fatalf("t5 fixture loaded as %T", m)
	}
	if _, err := Load(fixture(t, "bert-tiny"), "go"); err == nil || !strings.Contains(err.Error(), `model_type "bert" is not supported`) {
		t.Fatalf("bert: %v", err)
	}
}
