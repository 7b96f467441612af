package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/label"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
	"github.com/ragforge/ragforge/models/testutil/tinyqwen"
)

// decoderFixture serves the pipeline fixture with a Qwen2 decoder as the
// local model (--llm hf:DIR) and returns the server and the same
// checkpoint loaded a second time, locally.
func decoderFixture(t *testing.T) (*fixture, *lm.Decoder) {
	t.Helper()
	qdir := tinyqwen.Dir(t)
	c, err := Load(Config{PipelineDir: buildPipeline(t), LLM: "hf:" + qdir})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{comps: c}
	if f.srv, err = New(Options{}, c); err != nil {
		t.Fatal(err)
	}
	f.ts = httptest.NewServer(f.srv.Handler())
	t.Cleanup(func() {
		f.ts.Close()
		f.srv.Close()
		c.Pipeline.Close()
	})
	m, err := lm.Load(qdir, "")
	if err != nil {
		t.Fatal(err)
	}
	return f, m.(*lm.Decoder)
}

// `label perplexity --scorer hf:DIR` (a local decoder) and `--scorer
// openai:<ragforge serve --llm hf:DIR>` (the same checkpoint through
// /v1/completions echo + logprobs) give the same perplexities (float32
// tolerance) and labels. The HTTP scorer sees a decoder (encoder_input is
// refused) and keeps the echo form. Both sides tokenize and score with the
// same code (lm.Decoder.Echo); what this shows is that the OpenAI route
// (JSON, offsets, openai.TargetFromEcho on the client) loses nothing.
func TestDecoderPerplexityOverHTTPEqualsLocal(t *testing.T) {
	f, local := decoderFixture(t)
	remote := lm.NewHTTPScorer(openai.New(f.ts.URL, openai.Options{MaxRetries: -1}))
	if err := remote.Detect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if remote.Seq2Seq {
		t.Fatal("a decoder server was taken for encoder-decoder")
	}
	facts := []struct{ q, a, own string }{
		{"What causes gout?", "uric acid crystals", "Gout comes from uric acid crystals in joints."},
		{"Which stain shows nuclei?", "hematoxylin", "Hematoxylin stains nuclei blue."},
		{"How long to fix tissue?", "a day in formalin", "Formalin fixes tissue within a day."},
		{"What lowers fever?", "aspirin", "Aspirin lowers fever in adults."},
	}
	var tasks []label.Task
	for i, x := range facts {
		tasks = append(tasks, label.Task{QueryID: fmt.Sprint("q", i), Question: x.q, Target: x.a, Candidates: []data.Chunk{
			{ID: "own", Text: x.own}, {ID: "next", Text: facts[(i+1)%len(facts)].own},
		}})
	}
	want, err := (&label.PerplexityLabeler{Scorer: local}).Label(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&label.PerplexityLabeler{Scorer: remote}).Label(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 || len(want) != 8 {
		t.Fatalf("%d and %d labels, want 8", len(got), len(want))
	}
	rel := func(a, b float64) float64 { return math.Abs(a-b) / math.Abs(b) }
	for i := range want {
		g, w := got[i], want[i]
		if rel(g.PPLWithout, w.PPLWithout) > 1e-6 || rel(g.PPLWith, w.PPLWith) > 1e-6 || g.Label != w.Label {
			t.Errorf("%s: %v / %v %s over HTTP, %v / %v %s locally", w.ExampleID, g.PPLWithout, g.PPLWith, g.Label, w.PPLWithout, w.PPLWith, w.Label)
		}
	}
	t.Logf("8 pairs equal, e.g. %s: ppl %.4f without, %.4f with the snippet", want[0].ExampleID, want[0].PPLWithout, want[0].PPLWith)
}

// /v1/chat/completions renders the chat template and decodes greedily as
// the local model does; streaming sends the same text in deltas; stop and
// max_tokens apply; a prompt over the context is a 400 with vLLM's message.
func TestDecoderChatCompletions(t *testing.T) {
	f, local := decoderFixture(t)
	msgs := []openai.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "what is eosin?"}}
	ids, err := local.ChatIDs(msgs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := local.GenerateIDs(context.Background(), ids, lm.GenOptions{MaxTokens: 6, Logprobs: -1})
	if err != nil {
		t.Fatal(err)
	}
	code, b := f.call(t, "POST", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 6, "temperature": 0}, "")
	if code != 200 {
		t.Fatalf("chat: %d %s", code, b)
	}
	var ch openai.ChatResponse
	decodeInto(t, b, &ch)
	if ch.Choices[0].Message.Content != want.Text || ch.Usage.PromptTokens != len(ids) || ch.Model != local.Name() {
		t.Fatalf("chat %q (%d prompt tokens, model %q), local %q (%d, %q)", ch.Choices[0].Message.Content, ch.Usage.PromptTokens, ch.Model, want.Text, len(ids), local.Name())
	}
	// Streaming: the deltas spell the same text.
	code, b = f.call(t, "POST", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 6, "temperature": 0, "stream": true}, "")
	if code != 200 {
		t.Fatalf("stream: %d %s", code, b)
	}
	var text strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c openai.ChatChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		for _, x := range c.Choices {
			if x.Delta.Content != nil {
				text.WriteString(*x.Delta.Content)
			}
		}
	}
	if text.String() != want.Text {
		t.Errorf("streamed %q, want %q", text.String(), want.Text)
	}
	// stop: the text ends before the stop string (finish "stop").
	if len(want.Text) >= 2 {
		stop := want.Text[1:2]
		code, b = f.call(t, "POST", "/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": 6, "temperature": 0, "stop": stop}, "")
		var sc openai.ChatResponse
		decodeInto(t, b, &sc)
		cut, _ := lm.CutStop(want.Text, []string{stop})
		if code != 200 || sc.Choices[0].Message.Content != cut || sc.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %q: %d %q %s, want %q", stop, code, sc.Choices[0].Message.Content, sc.Choices[0].FinishReason, cut)
		}
	}
	// Over the context (128 positions): refused, not truncated.
	var cr0 openai.CompletionResponse
	long := []openai.Message{{Role: "user", Content: strings.Repeat("uric acid crystals ", 60)}}
	code, b = f.call(t, "POST", "/v1/chat/completions", map[string]any{"messages": long, "max_tokens": 4}, "")
	if code != 400 || !strings.Contains(string(b), "maximum context length is 128 tokens") {
		t.Errorf("long prompt: %d %s", code, b)
	}
	// Without max_tokens the default (16) is bounded by what the context
	// leaves: a 120-token prompt gets at most 8 new tokens, not a 400.
	near := strings.Repeat("a ", 200)
	pids := local.PromptIDs(near)
	for len(pids) > 120 {
		near = near[:len(near)-2]
		pids = local.PromptIDs(near)
	}
	if len(pids) <= 128-16 {
		t.Fatalf("prompt of %d tokens leaves room for the default 16", len(pids))
	}
	code, b = f.call(t, "POST", "/v1/completions", map[string]any{"prompt": near, "temperature": 0}, "")
	decodeInto(t, b, &cr0)
	if code != 200 || cr0.Usage.CompletionTokens > 128-len(pids) {
		t.Errorf("%d-token prompt without max_tokens: %d %s", len(pids), code, b)
	}
	code, b = f.call(t, "POST", "/v1/completions", map[string]any{"prompt": "short", "max_tokens": 200}, "")
	if code != 400 || !strings.Contains(string(b), "maximum context length is 128 tokens") {
		t.Errorf("max_tokens past the context: %d %s", code, b)
	}
	// Echo with logprobs: the prompt's tokens spell it, the first has none.
	code, b = f.call(t, "POST", "/v1/completions", map[string]any{"prompt": "Gout is uric acid.", "max_tokens": 1, "echo": true, "logprobs": 0}, "")
	if code != 200 {
		t.Fatalf("echo: %d %s", code, b)
	}
	var cr openai.CompletionResponse
	decodeInto(t, b, &cr)
	lp := cr.Choices[0].Logprobs
	if lp == nil || !strings.HasPrefix(strings.Join(lp.Tokens, ""), "Gout is uric acid.") || lp.TokenLogprobs[0] != nil || lp.TokenLogprobs[1] == nil {
		t.Errorf("echo logprobs %+v", lp)
	}
	// prompt_logprobs (vLLM): one entry per prompt token, keyed by its id.
	code, b = f.call(t, "POST", "/v1/completions", map[string]any{"prompt": "Gout is uric acid.", "max_tokens": 1, "prompt_logprobs": 0}, "")
	if code != 200 {
		t.Fatalf("prompt_logprobs: %d %s", code, b)
	}
	decodeInto(t, b, &cr)
	eids := local.EchoIDs("Gout is uric acid.")
	pl := cr.Choices[0].PromptLogprobs
	if len(pl) != len(eids) || pl[0] != nil {
		t.Fatalf("prompt_logprobs %v for eids %v", pl, eids)
	}
	if e, ok := pl[1][fmt.Sprint(eids[1])]; !ok || e.Logprob != *lp.TokenLogprobs[1] {
		t.Errorf("prompt_logprobs[1] %v, want id %d with %v", pl[1], eids[1], *lp.TokenLogprobs[1])
	}
}
