package lora

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/tokenizer/bpe"
)

// Pair is one SFT record as text: the user turn and the answer to learn.
type Pair struct {
	Prompt, Response string
}

// ReadSFT reads an SFT JSONL file in either form train/selflearn writes
// (round-<t>/sft_alpaca.jsonl and sft_messages.jsonl):
//
//	{"instruction": I, "input": X, "output": Y}   → prompt I + "\n" + X (X empty: I), response Y
//	{"messages": [{"role": "user", …}, {"role": "assistant", …}]} → the user and assistant contents
//
// The Alpaca join is LLaMA-Factory's (instruction and input on two lines).
// A messages record must be exactly one user turn then one assistant turn
// (an optional leading system turn is refused: ragforge renders no system
// prompt). Blank lines are skipped. Errors name the file, line and field.
func ReadSFT(path string) ([]Pair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read sft: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out []Pair
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec struct {
			Instruction *string `json:"instruction"`
			Input       string  `json:"input"`
			Output      *string `json:"output"`
			Messages    []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("read %s: line %d: %w", path, line, err)
		}
		bad := func(field, why string) error {
			return fmt.Errorf("read %s: line %d: field %q: %s", path, line, field, why)
		}
		var p Pair
		switch {
		case rec.Messages != nil && (rec.Instruction != nil || rec.Output != nil):
			return nil, bad("messages", "a record is either Alpaca (instruction/input/output) or messages, not both")
		case rec.Messages != nil:
			if len(rec.Messages) != 2 || rec.Messages[0].Role != "user" || rec.Messages[1].Role != "assistant" {
				return nil, bad("messages", "want one user turn then one assistant turn")
			}
			p = Pair{Prompt: rec.Messages[0].Content, Response: rec.Messages[1].Content}
		case rec.Instruction != nil && rec.Output != nil:
			p = Pair{Prompt: *rec.Instruction, Response: *rec.Output}
			if rec.Input != "" {
				p.Prompt += "\n" + rec.Input
			}
		case rec.Instruction != nil:
			return nil, bad("output", "missing")
		default:
			return nil, bad("instruction", "missing (want Alpaca instruction/input/output or messages)")
		}
		if p.Response == "" {
			return nil, bad("output", "empty response")
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read %s: no records", path)
	}
	return out, nil
}

// EncodePairs encodes pairs as Examples with the caller's prompt encoding
// (promptIDs: the generator's own rendering of a user prompt, e.g. its
// chat template with the assistant turn opened) and response encoding,
// then EncodeExample (response + eos, cut to maxLength). Errors name the
// record.
func EncodePairs(pairs []Pair, promptIDs func(string) ([]int, error), responseIDs func(string) []int, eos, maxLength int) ([]Example, error) {
	out := make([]Example, len(pairs))
	for i, p := range pairs {
		prompt, err := promptIDs(p.Prompt)
		if err != nil {
			return nil, fmt.Errorf("encode sft: record %d: prompt: %w", i+1, err)
		}
		if out[i], err = EncodeExample(prompt, responseIDs(p.Response), eos, maxLength); err != nil {
			return nil, fmt.Errorf("encode sft: record %d: %w", i+1, err)
		}
	}
	return out, nil
}

// Tokenize loads the tokenizer of the model directory dir and encodes
// pairs with EncodePairs: with chatTemplate, a prompt as the decoder
// generates from it (lm.UserPromptIDs: one user message through the chat
// template of a byte-level BPE tokenizer that has one, the assistant turn
// opened), else (or with no template) the raw prompt with the tokenizer's
// special tokens (a Llama bos); the response without them, eos the
// tokenizer's.
func Tokenize(dir string, pairs []Pair, maxLength int, chatTemplate bool) ([]Example, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("tokenize sft: %w", err)
	}
	prompt := func(s string) ([]int, error) { return tok.Encode(s, true), nil }
	if bt, ok := tok.(*bpe.Tokenizer); ok && chatTemplate {
		prompt = func(s string) ([]int, error) { return lm.UserPromptIDs(bt, s) }
	}
	return EncodePairs(pairs, prompt, func(s string) []int { return tok.Encode(s, false) }, tok.EOSID(), maxLength)
}
