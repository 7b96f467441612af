package bpe

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ragforge/ragforge/models/tokenizer/chat"
)

const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// The \s+(?!\S) emulation, by hand from the alternation order: a run of
// two or more spaces before a word gives back its last space, a single one
// does not; at the end of the text the run stays whole; \s is Unicode.
func TestSplitLookahead(t *testing.T) {
	sp, err := compileSplit(qwenPattern)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		text string
		want []string
	}{
		{"a  b", []string{"a", " ", " b"}},
		{"a b", []string{"a", " b"}},
		{"a \tb", []string{"a", " ", "\tb"}},
		{"a   ", []string{"a", "   "}},
		{"1  2", []string{"1", " ", " ", "2"}},
		{"x \n\ny", []string{"x", " \n\n", "y"}},
		{"a\u00a0\u00a0b", []string{"a", "\u00a0", "\u00a0b"}},
		{"  .", []string{" ", " ."}},
		{"It's 12", []string{"It", "'s", " ", "1", "2"}},
		{"", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, s := range sp.split(tt.text, nil) {
			got = append(got, tt.text[s[0]:s[1]])
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("split(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestLossyUTF8(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ok", "ok"},
		{"\xF0\x9F\x98", "\uFFFD"},             // truncated 4-byte: one maximal subpart
		{"\xF0\x9F\x98a", "\uFFFDa"},           // …followed by ASCII
		{"\xE0\x80", "\uFFFD\uFFFD"},           // 0x80 cannot follow 0xE0
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"}, // a surrogate
		{"a\xFF\xFEb", "a\uFFFD\uFFFDb"},       // two invalid bytes, two U+FFFD
		{"\xC3\xA7\xC3", "ç\uFFFD"},
	}
	for _, tt := range tests {
		if got := lossyUTF8([]byte(tt.in)); got != tt.want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// minimal is a tokenizer.json with the byte alphabet, merges "a b" → "ab"
// and "ab c" → "abc", and the given overrides.
func minimal(t *testing.T, override map[string]string) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[byteString[b]] = b
	}
	vocab["ab"], vocab["abc"] = 256, 257
	v, _ := json.Marshal(vocab)
	doc := map[string]json.RawMessage{
		"model":          json.RawMessage(`{"type": "BPE", "vocab": ` + string(v) + `, "merges": ["a b", ["ab", "c"]]}`),
		"normalizer":     json.RawMessage(`null`),
		"pre_tokenizer":  json.RawMessage(`{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}`),
		"post_processor": json.RawMessage(`{"type": "ByteLevel", "trim_offsets": true}`),
		"decoder":        json.RawMessage(`{"type": "ByteLevel"}`),
		"added_tokens":   json.RawMessage(`[{"id": 258, "content": "<x>", "special": true, "normalized": false, "lstrip": true}]`),
	}
	for k, s := range override {
		doc[k] = json.RawMessage(s)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMinimal(t *testing.T) {
	tok, err := New(minimal(t, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	// GPT-2 pattern: "abc", " abca", "  ", "<x>" (lstrip takes the spaces before it).
	ids, offs := tok.EncodeOffsets("abc abca  <x>", false)
	wantIDs := []int{257, int(runeToByte['Ġ']), 257, 'a', 258}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("ids %v, want %v", ids, wantIDs)
	}
	// trim_offsets: the token "Ġ" is all space, so its span is empty.
	wantOffs := [][2]int{{0, 3}, {4, 4}, {4, 7}, {7, 8}, {8, 13}}
	if !slices.Equal(offs, wantOffs) {
		t.Errorf("offsets %v, want %v", offs, wantOffs)
	}
	if got := tok.Decode(ids, false); got != "abc abca<x>" {
		t.Errorf("decode %q", got)
	}
	if got := tok.Decode(ids, true); got != "abc abca" {
		t.Errorf("decode skipping specials %q", got)
	}
}

// Unsupported parts are refused by their type name.
func TestRefused(t *testing.T) {
	tests := []struct {
		field, node, want string
	}{
		{"normalizer", `{"type": "Precompiled", "precompiled_charsmap": ""}`, `"Precompiled"`},
		{"normalizer", `{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace"}]}`, `"Replace"`},
		{"pre_tokenizer", `{"type": "Metaspace"}`, `"Metaspace"`},
		{"pre_tokenizer", `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Removed", "invert": false}, {"type": "ByteLevel"}]}`, `"Removed"`},
		{"pre_tokenizer", `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "a(?=b)"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel"}]}`, `look-around`},
		{"pre_tokenizer", `{"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated", "invert": false}`, `0 ByteLevel`},
		{"post_processor", `{"type": "Bogus"}`, `"Bogus"`},
		{"decoder", `{"type": "WordPiece"}`, `"WordPiece"`},
		{"model", `{"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}`, `dropout`},
		{"model", `{"type": "BPE", "vocab": {"a": 0}, "merges": []}`, `byte 0x00`},
	}
	for _, tt := range tests {
		_, err := New(minimal(t, map[string]string{tt.field: tt.node}), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s %s: error %v, want one naming %q and %s", tt.field, tt.node, err, tt.field, tt.want)
		}
	}
}

func TestOffsetsQwen3(t *testing.T) {
	tok, _ := qwen3(t)
	tests := []struct {
		text string
		want []string // the original text each token spans
	}{
		{"Olá mundo", []string{"Ol", "á", " mundo"}},
		{"<|im_start|>user\nOi", []string{"<|im_start|>", "user", "\n", "Oi"}},
		// NFD: "e" + U+0301 is normalized to "é"; the token spans both code points.
		{"cafe\u0301", []string{"ca", "fe\u0301"}},
	}
	for _, tt := range tests {
		ids, offs := tok.EncodeOffsets(tt.text, false)
		var got []string
		for _, o := range offs {
			got = append(got, tt.text[o[0]:o[1]])
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: ids %v spans %q, want %q", tt.text, ids, got, tt.want)
		}
	}
}

func TestAddTokensSave(t *testing.T) {
	tok, _ := qwen3(t)
	n := tok.Len()
	if n != 151669 {
		t.Fatalf("Len %d, want 151669 (151643 + 26 added)", n)
	}
	ids := tok.AddTokens([]string{"[HELPFUL]", "[NOT_HELPFUL]", "[HELPFUL]", "<|im_end|>"})
	if want := []int{n, n + 1, n, 151645}; !slices.Equal(ids, want) {
		t.Fatalf("AddTokens ids %v, want %v", ids, want)
	}
	text := "a[HELPFUL] b [NOT_HELPFUL]<|im_end|>"
	enc := tok.Encode(text, false)
	if !slices.Contains(enc, n) || !slices.Contains(enc, n+1) {
		t.Fatalf("added tokens not split out: %v", enc)
	}
	dir := t.TempDir()
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Len() != n+2 || !slices.Equal(back.Encode(text, false), enc) {
		t.Errorf("reloaded: Len %d ids %v, want %d %v", back.Len(), back.Encode(text, false), n+2, enc)
	}
	if back.Config().ChatTemplate == "" || back.EOSID() != 151645 || back.PadID() != 151643 {
		t.Errorf("reloaded config: eos %d pad %d template %d bytes", back.EOSID(), back.PadID(), len(back.Config().ChatTemplate))
	}
	if got := back.Decode(enc, false); got != text {
		t.Errorf("decode %q, want %q", got, text)
	}
}

// words is about n words of mixed Portuguese/English text with numbers.
func words(n int) string {
	base := strings.Fields("Fixação em formol a 10% durante 24–48 h. The EGFR L858R mutation (exon 21) responds to erlotinib; pH 7,4 e 3,5 µm — coloração HE.")
	var sb strings.Builder
	for i := range n {
		sb.WriteString(base[i%len(base)])
		if i%97 == 0 {
			sb.WriteString(string(rune('a' + i%26)))
		}
		sb.WriteByte(' ')
	}
	return sb.String()
}

// A 10k-word text must encode in well under a second.
func TestEncodeSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	tok, _ := qwen3(t)
	text := words(10000)
	r := testing.Benchmark(func(b *testing.B) {
		for range b.N {
			tok.m.mu.Lock()
			clear(tok.m.cache)
			tok.m.mu.Unlock()
			tok.Encode(text, false)
		}
	})
	per := r.NsPerOp()
	t.Logf("10k words (%d bytes), cold cache: %.1f ms", len(text), float64(per)/1e6)
	if per > 500e6 {
		t.Errorf("10k words took %.0f ms, want < 500 ms", float64(per)/1e6)
	}
}

func BenchmarkEncode10kWords(b *testing.B) {
	tok, _ := qwen3(b)
	text := words(10000)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for range b.N {
		tok.Encode(text, false)
	}
}

// The rendered ChatML encodes with its markers as the added tokens.
func TestApplyChatTemplateQwen3(t *testing.T) {
	tok, _ := qwen3(t)
	s, err := tok.ApplyChatTemplate([]chat.Message{{Role: "user", Content: "Oi"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nOi<|im_end|>\n<|im_start|>assistant\n"; s != want {
		t.Fatalf("got %q, want %q", s, want)
	}
	ids := tok.Encode(s, false)
	if ids[0] != 151644 || !slices.Contains(ids, 151645) {
		t.Errorf("ids %v: want <|im_start|> 151644 first and <|im_end|> 151645", ids)
	}
}

// chat_template as a list of named templates (the "default" one is used) or
// in chat_template.jinja beside the config.
func TestChatTemplateSources(t *testing.T) {
	tj := minimal(t, nil)
	named := `{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ messages[0].content }}"}]}`
	tok, err := New(tj, []byte(named))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tok.ApplyChatTemplate([]chat.Message{{Role: "user", Content: "x"}}, false); err != nil || got != "Dx" {
		t.Errorf("named default: %q %v", got, err)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{TokenizerFile: string(tj), ConfigFile: `{}`, ChatTemplateFile: "J{{ add_generation_prompt }}"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if tok, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := tok.ApplyChatTemplate(nil, true); err != nil || got != "JTrue" { // Jinja prints Python booleans
		t.Errorf("chat_template.jinja: %q %v", got, err)
	}
	if tok, err = New(tj, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tok.ApplyChatTemplate(nil, true); err != chat.ErrNoTemplate {
		t.Errorf("no template: %v", err)
	}
}

// Encoding is safe for concurrent use (the merge cache is shared).
func TestConcurrentEncode(t *testing.T) {
	tok, f := qwen3(t)
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(f.Cases))
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, c := range f.Cases {
				if got := tok.Encode(c.Text, false); !slices.Equal(got, c.IDs) {
					errs <- c.ID
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for id := range errs {
		t.Errorf("%s: wrong ids under concurrent encoding", id)
	}
}
