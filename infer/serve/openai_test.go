package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/openai"
)

// post sends a raw JSON body with the Content-Type the official clients
// use and returns the response.
func (f *fixture) post(t *testing.T, path string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", f.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// recorded loads testdata/openai/NAME.json (a request body in the exact
// shape an official client sends) with its "model" set to the server's.
func recorded(t *testing.T, name, model string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "openai", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m["model"] = model
	out, _ := json.Marshal(m)
	return out
}

// events reads a server-sent-event stream: the JSON of every data line
// before "[DONE]", and whether [DONE] ended it.
func events(t *testing.T, resp *http.Response) (evs []map[string]any, done bool) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("stream line %q", line)
		}
		if data == "[DONE]" {
			return evs, true
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		evs = append(evs, m)
	}
	return evs, false
}

// Acceptance 3: the official clients' default requests work unchanged.
func TestOpenAIRecordedRequests(t *testing.T) {
	f := newFixture(t, Options{})
	gen, emb := f.comps.Local.Name(), f.comps.Encoder.Name()

	// Embeddings: the Node client's default base64 decodes to the float vector.
	var fl, b64 struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage openai.EmbeddingUsage `json:"usage"`
	}
	decodeInto(t, readAll(t, f.post(t, "/v1/embeddings", recorded(t, "python-embeddings-float", emb))), &fl)
	decodeInto(t, readAll(t, f.post(t, "/v1/embeddings", recorded(t, "node-embeddings-default", emb))), &b64)
	var vec []float32
	var s string
	if err := json.Unmarshal(fl.Data[0].Embedding, &vec); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b64.Data[0].Embedding, &s); err != nil {
		t.Fatalf("base64 embedding is not a string: %s", b64.Data[0].Embedding)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != 4*len(vec) || len(vec) != 128 {
		t.Fatalf("base64: %d bytes for %d floats: %v", len(raw), len(vec), err)
	}
	for i := range vec {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != vec[i] {
			t.Fatalf("component %d: base64 %v, float %v", i, got, vec[i])
		}
	}
	if fl.Usage.PromptTokens < 5 || fl.Usage.TotalTokens != fl.Usage.PromptTokens {
		t.Errorf("embeddings usage %+v", fl.Usage)
	}

	// Streaming chat: role chunk, content deltas, finish, usage, [DONE].
	evs, done := events(t, f.post(t, "/v1/chat/completions", recorded(t, "node-chat-stream", gen)))
	if !done || len(evs) < 3 {
		t.Fatalf("chat stream: %d events, done %v", len(evs), done)
	}
	var text strings.Builder
	for _, e := range evs[:len(evs)-1] {
		if e["object"] != "chat.completion.chunk" || e["created"] == nil {
			t.Errorf("chunk %v", e)
		}
		for _, c := range e["choices"].([]any) {
			if d, ok := c.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
				text.WriteString(d)
			}
		}
	}
	last := evs[len(evs)-1]
	if len(last["choices"].([]any)) != 0 || last["usage"] == nil {
		t.Errorf("last chunk %v, want the usage chunk", last)
	}
	want, err := f.comps.Local.Complete(context.Background(), "be brief\n\nwhat is eosin?", 5)
	if err != nil {
		t.Fatal(err)
	}
	if text.String() != want {
		t.Errorf("streamed %q, non-streamed generation %q", text.String(), want)
	}

	// Streaming completions.
	evs, done = events(t, f.post(t, "/v1/completions", recorded(t, "node-completions-stream", gen)))
	if !done || evs[len(evs)-1]["usage"] == nil {
		t.Fatalf("completions stream: done %v, events %v", done, evs)
	}

	// n, logprobs, top_logprobs, stop list, max_tokens on chat.
	var ch openai.ChatResponse
	resp := f.post(t, "/v1/chat/completions", recorded(t, "python-chat", gen))
	decodeInto(t, readAll(t, resp), &ch)
	if resp.StatusCode != 200 || len(ch.Choices) != 2 || ch.Created == 0 {
		t.Fatalf("chat: %d %+v", resp.StatusCode, ch)
	}
	for _, c := range ch.Choices {
		if c.Logprobs == nil || len(c.Logprobs.Content) != len(ch.Choices[0].Logprobs.Content) {
			t.Fatalf("chat logprobs %+v", c.Logprobs)
		}
		for _, e := range c.Logprobs.Content {
			if e.Logprob > 0 || len(e.TopLogprobs) == 0 || len(e.TopLogprobs) > 2 || e.TopLogprobs[0].Logprob < e.Logprob-1e-9 {
				t.Errorf("token %+v", e)
			}
		}
	}

	// A list of prompts with logprobs: one choice per prompt, in order.
	var cr openai.CompletionResponse
	decodeInto(t, readAll(t, f.post(t, "/v1/completions", recorded(t, "python-completions-list", gen))), &cr)
	if len(cr.Choices) != 2 || cr.Choices[1].Index != 1 || cr.Choices[0].Logprobs == nil || cr.Created == 0 {
		t.Fatalf("prompt list: %+v", cr)
	}
	if cr.Usage == nil || cr.Usage.CompletionTokens != len(cr.Choices[0].Logprobs.Tokens)+len(cr.Choices[1].Logprobs.Tokens) {
		t.Errorf("usage %+v vs logprobs", cr.Usage)
	}

	// Token-id prompts.
	if resp := f.post(t, "/v1/completions", recorded(t, "python-completions-token-ids", gen)); resp.StatusCode != 200 {
		t.Errorf("token ids: %d %s", resp.StatusCode, readAll(t, resp))
	}

	// vLLM's prompt_logprobs next to echo's logprobs: the same numbers.
	cr = openai.CompletionResponse{}
	decodeInto(t, readAll(t, f.post(t, "/v1/completions", recorded(t, "vllm-prompt-logprobs", gen))), &cr)
	c := cr.Choices[0]
	if c.PromptLogprobs == nil || c.PromptLogprobs[0] != nil || len(c.Logprobs.TopLogprobs) == 0 {
		t.Fatalf("prompt_logprobs %+v", c)
	}
	for i := 1; i < len(c.PromptLogprobs); i++ {
		for _, v := range c.PromptLogprobs[i] {
			if v.Logprob != *c.Logprobs.TokenLogprobs[i] {
				t.Errorf("token %d: prompt_logprobs %v, logprobs %v", i, v.Logprob, *c.Logprobs.TokenLogprobs[i])
			}
		}
	}

	// ragforge's encoder_input: scored as decoder labels, ending in </s>.
	cr = openai.CompletionResponse{}
	decodeInto(t, readAll(t, f.post(t, "/v1/completions", recorded(t, "ragforge-encoder-input", gen))), &cr)
	if cr.EncoderInputTokens == 0 || cr.Choices[0].Logprobs.TokenLogprobs[0] == nil || cr.Choices[0].Logprobs.Tokens[len(cr.Choices[0].Logprobs.Tokens)-1] != "</s>" {
		t.Errorf("encoder_input answer %+v", cr)
	}

	// /v1/models/{id}.
	code, b := f.call(t, "GET", "/v1/models/"+gen, nil, "")
	if code != 200 || !strings.Contains(string(b), `"created"`) {
		t.Errorf("GET /v1/models/%s: %d %s", gen, code, b)
	}
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Each field is honoured or refused with a 400 naming it; an unknown model
// is a 404 in the OpenAI error shape.
func TestOpenAIRefusals(t *testing.T) {
	f := newFixture(t, Options{})
	gen, emb := f.comps.Local.Name(), f.comps.Encoder.Name()
	cases := []struct {
		path  string
		body  map[string]any
		code  int
		param string
	}{
		{"/v1/completions", map[string]any{"model": "gpt-9", "prompt": "x"}, 404, "model"},
		{"/v1/chat/completions", map[string]any{"model": "gpt-9", "messages": []any{map[string]any{"role": "user", "content": "x"}}}, 404, "model"},
		{"/v1/embeddings", map[string]any{"model": "gpt-9", "input": "x"}, 404, "model"},
		{"/v1/embeddings", map[string]any{"model": emb, "input": "x", "dimensions": 64}, 400, "dimensions"},
		{"/v1/embeddings", map[string]any{"model": emb, "input": []int{1, 2}}, 400, "input"},
		{"/v1/embeddings", map[string]any{"model": emb, "input": "x", "encoding_format": "int8"}, 400, "encoding_format"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "suffix": "y"}, 400, "suffix"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "best_of": 3}, 400, "best_of"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "presence_penalty": 0.5}, 400, "presence_penalty"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "logit_bias": map[string]int{"5": 1}}, 400, "logit_bias"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "frobnicate": true}, 400, "frobnicate"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "n": 99}, 400, "n"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "stop": []string{"a", "b", "c", "d", "e"}}, 400, "stop"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "prompt_logprobs": 3}, 400, "prompt_logprobs"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "stream_options": map[string]any{"include_usage": true}}, 400, "stream_options"},
		{"/v1/completions", map[string]any{"model": gen, "prompt": "x", "encoder_input": "y", "max_tokens": 0}, 400, "encoder_input"},
		{"/v1/chat/completions", map[string]any{"model": gen, "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "x"}}}}}}, 400, "messages[0].content[0]"},
		{"/v1/chat/completions", map[string]any{"model": gen, "messages": []any{map[string]any{"role": "tool", "content": "x"}}}, 400, "messages[0].role"},
		{"/v1/chat/completions", map[string]any{"model": gen, "messages": []any{map[string]any{"role": "user", "content": "x"}}, "tools": []any{}}, 400, "tools"},
		{"/v1/chat/completions", map[string]any{"model": gen, "messages": []any{map[string]any{"role": "user", "content": "x"}}, "response_format": map[string]any{"type": "json_object"}}, 400, "response_format"},
		{"/v1/chat/completions", map[string]any{"model": gen, "messages": []any{map[string]any{"role": "user", "content": "x"}}, "top_logprobs": 2}, 400, "top_logprobs"},
	}
	for _, c := range cases {
		body, _ := json.Marshal(c.body)
		resp := f.post(t, c.path, body)
		b := readAll(t, resp)
		var e struct {
			Error map[string]any `json:"error"`
		}
		decodeInto(t, b, &e)
		for _, k := range []string{"message", "type", "param", "code"} {
			if _, ok := e.Error[k]; !ok {
				t.Errorf("%s %s: error has no %q: %s", c.path, body, k, b)
			}
		}
		if resp.StatusCode != c.code || (c.param != "" && !strings.HasPrefix(asString(e.Error["param"]), c.param)) {
			t.Errorf("%s %s: %d %s, want %d naming %q", c.path, body, resp.StatusCode, b, c.code, c.param)
		}
	}
	code, b := f.call(t, "GET", "/v1/models/nope", nil, "")
	if code != 404 || !strings.Contains(string(b), `"code":"model_not_found"`) {
		t.Errorf("GET /v1/models/nope: %d %s", code, b)
	}
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// TestT5OverContext: a prompt longer than the T5's input (512 tokens) is
// refused with vLLM's 400 naming the limit on both completion endpoints,
// not cut and answered 200; one that fits is served.
func TestT5OverContext(t *testing.T) {
	f := newFixture(t, Options{})
	local, ok := f.comps.Local.Local.(*lm.T5)
	if !ok {
		t.Fatalf("fixture's local model is %T, want *lm.T5", f.comps.Local.Local)
	}
	long := strings.Repeat("uric acid crystals in the joint ", 200)
	if n := len(local.PromptIDs(long)); n <= lm.DefaultT5MaxTokens {
		t.Fatalf("long prompt has %d tokens, want over %d", n, lm.DefaultT5MaxTokens)
	}
	const want = "maximum context length is 512 tokens"
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/completions", map[string]any{"prompt": long, "max_tokens": 2}},
		{"/v1/chat/completions", map[string]any{"messages": []openai.Message{{Role: "user", Content: long}}, "max_tokens": 2}},
	} {
		code, b := f.call(t, "POST", c.path, c.body, "")
		if code != 400 || !strings.Contains(string(b), want) {
			t.Errorf("%s over the context: %d %s, want 400 naming %q", c.path, code, b, want)
		}
	}
	code, b := f.call(t, "POST", "/v1/completions", map[string]any{"prompt": "uric acid crystals", "max_tokens": 2}, "")
	if code != 200 {
		t.Errorf("short prompt: %d %s", code, b)
	}
}
