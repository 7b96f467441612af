package hf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSentenceTransformerRoundTripAndTokenizerConfig(t *testing.T) {
	dir := t.TempDir()
	tc := `{"tokenizer_class": "BertTokenizer", "model_max_length": 128, "do_lower_case": true}`
	if err := os.WriteFile(filepath.Join(dir, TokenizerConfig), []byte(tc), 0o644); err != nil {
		t.Fatal(err)
	}
	st := SentenceTransformer{Dim: 8, Pooling: "mean", Normalize: true, MaxSeqLength: 256, QueryPrompt: "query: "}
	if err := WriteSentenceTransformer(dir, st); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadSentenceTransformer(dir)
	if err != nil || !ok || got != st {
		t.Fatalf("read back %+v (ok %v, %v), want %+v", got, ok, err, st)
	}
	var cfg map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, TokenizerConfig))
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["model_max_length"] != 256.0 || cfg["tokenizer_class"] != "BertTokenizer" || cfg["do_lower_case"] != true {
		t.Errorf("tokenizer_config.json = %v, want model_max_length 256 and the other keys kept", cfg)
	}
	// Rewritten without normalization, 2_Normalize goes away.
	st.Normalize = false
	if err := WriteSentenceTransformer(dir, st); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, STNormalizeDir)); !os.IsNotExist(err) {
		t.Errorf("2_Normalize kept after rewriting without normalization: %v", err)
	}
	if got, _, _ := ReadSentenceTransformer(dir); got.Normalize {
		t.Error("read back Normalize true")
	}
	if _, ok, err := ReadSentenceTransformer(t.TempDir()); ok || err != nil {
		t.Errorf("plain directory: ok %v, err %v; want false, nil", ok, err)
	}
}

func TestSentenceTransformerErrors(t *testing.T) {
	for _, st := range []SentenceTransformer{
		{Dim: 0, Pooling: "cls", MaxSeqLength: 8},
		{Dim: 4, Pooling: "max", MaxSeqLength: 8},
		{Dim: 4, Pooling: "cls", MaxSeqLength: 1},
	} {
		if err := WriteSentenceTransformer(t.TempDir(), st); err == nil {
			t.Errorf("%+v accepted", st)
		}
	}
	tests := []struct{ modules, pooling, want string }{
		{`[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Dense"}]`, "", `type "sentence_transformers.models.Dense"`},
		{`[{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]`,
			`{"word_embedding_dimension": 4, "pooling_mode_max_tokens": true}`, "exactly one of cls or mean"},
		{`{"not": "a list"}`, "", "modules.json"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, STModulesFile), []byte(tt.modules), 0o644)
		if tt.pooling != "" {
			os.MkdirAll(filepath.Join(dir, STPoolingDir), 0o755)
			os.WriteFile(filepath.Join(dir, STPoolingDir, ConfigName), []byte(tt.pooling), 0o644)
		}
		if _, _, err := ReadSentenceTransformer(dir); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.modules, err, tt.want)
		}
	}
}

// Prompts resolve as SentenceTransformer.encode_query / encode_document
// (sentence-transformers v5.1): "query" for queries, the first of
// "document", "passage", "corpus" for documents, else default_prompt_name's.
func TestSentenceTransformerPrompts(t *testing.T) {
	tests := []struct {
		name, version string
		query, doc    string
		err           string
	}{
		{"query and document", `{"prompts": {"query": "q: ", "document": "d: "}}`, "q: ", "d: ", ""},
		{"passage", `{"prompts": {"query": "q: ", "passage": "p: ", "corpus": "c: "}}`, "q: ", "p: ", ""},
		{"corpus", `{"prompts": {"corpus": "c: "}}`, "", "c: ", ""},
		{"document before passage", `{"prompts": {"passage": "p: ", "document": "d: "}}`, "", "d: ", ""},
		{"default prompt", `{"prompts": {"retrieval": "r: ", "query": "q: "}, "default_prompt_name": "retrieval"}`, "q: ", "r: ", ""},
		{"null default", `{"prompts": {"document": "d: "}, "default_prompt_name": null}`, "", "d: ", ""},
		{"unknown default", `{"prompts": {}, "default_prompt_name": "x"}`, "", "", `"default_prompt_name": "x" is not in prompts`},
		{"no file", "", "", "", ""},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		if err := WriteSentenceTransformer(dir, SentenceTransformer{Dim: 4, Pooling: "cls", MaxSeqLength: 8}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, STVersionFile)
		if tt.version == "" {
			os.Remove(path)
		} else if err := os.WriteFile(path, []byte(tt.version), 0o644); err != nil {
			t.Fatal(err)
		}
		got, _, err := ReadSentenceTransformer(dir)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || got.QueryPrompt != tt.query || got.DocumentPrompt != tt.doc {
			t.Errorf("%s: query %q document %q (%v), want %q %q", tt.name, got.QueryPrompt, got.DocumentPrompt, err, tt.query, tt.doc)
		}
	}
	// Settings ragforge cannot follow are refused, naming the field.
	for _, c := range []struct{ file, body, want string }{
		{filepath.Join(STPoolingDir, ConfigName), `{"word_embedding_dimension": 4, "pooling_mode_mean_tokens": true, "include_prompt": false}`, "include_prompt"},
		{STConfigFile, `{"max_seq_length": 8, "do_lower_case": true}`, "do_lower_case"},
	} {
		dir := t.TempDir()
		if err := WriteSentenceTransformer(dir, SentenceTransformer{Dim: 4, Pooling: "cls", MaxSeqLength: 8}); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, c.file), []byte(c.body), 0o644)
		if _, _, err := ReadSentenceTransformer(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.body, err, c.want)
		}
	}
}
