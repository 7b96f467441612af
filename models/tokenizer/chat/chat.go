// Package chat renders the Jinja chat templates of tokenizer_config.json
// (transformers apply_chat_template with tokenize=False) through
// github.com/ardanlabs/jinja, a Go Jinja engine written for LLM chat
// templates. It is checked on Qwen3's ChatML template and on Llama 3
// Instruct's header template.
package chat

import (
	"errors"
	"fmt"

	"github.com/ardanlabs/jinja"
)

// Message is one turn of a conversation (OpenAI / transformers format).
type Message struct {
	Role    string `json:"role"` // "system", "user", "assistant"
	Content string `json:"content"`
}

// Tokens are the special tokens a template may print (bos_token, eos_token
// in transformers' render context); "" when the tokenizer has none.
type Tokens struct {
	BOS, EOS string
}

// Template is a compiled chat_template.
type Template struct {
	tmpl *jinja.Template
}

// ErrNoTemplate is returned for a tokenizer without chat_template.
var ErrNoTemplate = errors.New("chat template: tokenizer_config.json has no chat_template")

// Compile parses a chat_template.
func Compile(src string) (*Template, error) {
	if src == "" {
		return nil, ErrNoTemplate
	}
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return &Template{t}, nil
}

// Apply renders messages. addGenerationPrompt asks the template to open an
// assistant turn (add_generation_prompt). Errors: a template error, or
// raise_exception called by the template (e.g. roles out of order).
func (t *Template) Apply(messages []Message, addGenerationPrompt bool, tok Tokens) (string, error) {
	msgs := make([]any, len(messages))
	for i, m := range messages {
		msgs[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	data := map[string]any{
		"messages":              msgs,
		"add_generation_prompt": addGenerationPrompt,
	}
	// transformers passes the special tokens map; an absent token is undefined.
	if tok.BOS != "" {
		data["bos_token"] = tok.BOS
	}
	if tok.EOS != "" {
		data["eos_token"] = tok.EOS
	}
	out, err := t.tmpl.Render(data)
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}
