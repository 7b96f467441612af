package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/train/trainer"
)

// models init output must load and run through every infer command, and
// inspect must report what init wrote.
func TestModelsInitLoadsAndRuns(t *testing.T) {
	spm := sharedDir(t, "fixtures/tokenizer/spiece.model")
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	t5dir, bertdir := filepath.Join(dir, "t5"), filepath.Join(dir, "bert")
	run(t, "models", "init", "--db", db, "--arch", "t5", "--size", "tiny", "--tokenizer", spm, "--add-tokens", "[HELPFUL],[NOT_HELPFUL]", "--out", t5dir)
	run(t, "models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", bertdir)

	var info struct {
		ModelType    string         `json:"model_type"`
		Parameters   int64          `json:"parameters"`
		TokenizerLen int            `json:"tokenizer_len"`
		AddedTokens  map[string]int `json:"added_tokens"`
		Config       map[string]any `json:"config"`
	}
	if err := json.Unmarshal([]byte(run(t, "models", "inspect", t5dir, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.ModelType != "t5" || info.TokenizerLen != 2102 || info.AddedTokens["[HELPFUL]"] != 2100 || info.AddedTokens["[NOT_HELPFUL]"] != 2101 {
		t.Errorf("inspect t5: %+v", info)
	}
	// The table is for people: no Go map or slice syntax.
	text := run(t, "models", "inspect", t5dir)
	for _, want := range []string{"architectures T5ForConditionalGeneration\n", "added tokens  [HELPFUL] (id 2100), [NOT_HELPFUL] (id 2101)\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "map[") {
		t.Errorf("inspect prints a Go map:\n%s", text)
	}
	if v, _ := info.Config["vocab_size"].(float64); int(v) != 2102 {
		t.Errorf("config vocab_size %v, want 2102 (tokenizer length incl. added tokens)", info.Config["vocab_size"])
	}

	var gen struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	if err := json.Unmarshal([]byte(run(t, "infer", "generate", "--model", t5dir, "--input", "Which stain shows amyloid?", "--max-new-tokens", "4", "--json")), &gen); err != nil {
		t.Fatal(err)
	}
	if len(gen.IDs) < 2 || gen.IDs[0] != 0 {
		t.Errorf("generate ids %v: want the decoder start 0 then new tokens", gen.IDs)
	}
	var sc scoreResult
	if err := json.Unmarshal([]byte(run(t, "infer", "score", "--model", t5dir, "--input", "q", "--target", "answer text", "--json")), &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Tokens == 0 || !(sc.Perplexity > 1) || sc.MeanNLL <= 0 {
		t.Errorf("score: %+v", sc)
	}
	var emb struct {
		Dim       int       `json:"dim"`
		Embedding []float32 `json:"embedding"`
	}
	if err := json.Unmarshal([]byte(run(t, "infer", "embed", "--model", bertdir, "--input", "HER2 scoring", "--json")), &emb); err != nil {
		t.Fatal(err)
	}
	var norm float64
	for _, x := range emb.Embedding {
		norm += float64(x) * float64(x)
	}
	if emb.Dim != 128 || norm < 0.999 || norm > 1.001 {
		t.Errorf("embed: dim %d, squared norm %f (want 128 and 1)", emb.Dim, norm)
	}
	if code, stderr := runErr("infer", "embed", "--model", t5dir, "--input", "x"); code == 0 || !strings.Contains(stderr, "BERT") {
		t.Errorf("embedding with a T5 model should fail naming BERT: %d %s", code, stderr)
	}
}

// models init adds the filter's label tokens to a T5 by default (none with
// --add-tokens ”), and marks every checkpoint it writes as random, which
// --recipe auto reads.
func TestModelsInitLabelTokensAndRandomMark(t *testing.T) {
	spm := sharedDir(t, "fixtures/tokenizer/spiece.model")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	for _, tc := range []struct {
		name  string
		extra []string
		len   int
	}{{"default", nil, 2102}, {"none", []string{"--add-tokens", ""}, 2100}} {
		out := filepath.Join(dir, tc.name)
		run(t, append([]string{"models", "init", "--db", db, "--arch", "t5", "--size", "tiny", "--tokenizer", spm, "--out", out}, tc.extra...)...)
		var info struct {
			TokenizerLen int            `json:"tokenizer_len"`
			Config       map[string]any `json:"config"`
		}
		if err := json.Unmarshal([]byte(run(t, "models", "inspect", out, "--json")), &info); err != nil {
			t.Fatal(err)
		}
		if info.TokenizerLen != tc.len {
			t.Errorf("%s: tokenizer length %d, want %d", tc.name, info.TokenizerLen, tc.len)
		}
		if info.Config["ragforge_random_init"] != true {
			t.Errorf("%s: config has no ragforge_random_init mark: %v", tc.name, info.Config["ragforge_random_init"])
		}
		recipe, err := resolveRecipe("auto", out)
		if err != nil || recipe != trainer.RecipeScratch {
			t.Errorf("%s: auto recipe = %q, %v; want scratch", tc.name, recipe, err)
		}
	}
	if r, err := resolveRecipe("auto", sharedDir(t, "fixtures/t5-flan-tiny")); err != nil || r != trainer.RecipePretrained {
		t.Errorf("auto recipe for an HF checkpoint = %q, %v; want pretrained", r, err)
	}
	if _, err := resolveRecipe("fast", "."); err == nil {
		t.Error("--recipe fast accepted")
	}
}

// --token-match-heads records its settings in config.json (the tensors are
// checked in models/t5); a value that makes no sense is an error.
func TestModelsInitTokenMatch(t *testing.T) {
	spm := sharedDir(t, "fixtures/tokenizer/spiece.model")
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	out := filepath.Join(dir, "match")
	run(t, "models", "init", "--db", db, "--arch", "t5", "--tokenizer", spm, "--token-match-heads", "4", "--token-match-score", "6", "--out", out)
	var info struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal([]byte(run(t, "models", "inspect", out, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(info.Config["ragforge_init"]); got != "map[token_match_heads:4 token_match_score:6]" {
		t.Errorf("config ragforge_init = %s", got)
	}
	for _, tc := range []struct {
		flag string
		args []string
	}{
		{"--token-match-heads", []string{"--arch", "t5", "--tokenizer", spm, "--token-match-heads", "5"}},
		{"--token-match-heads", []string{"--arch", "t5", "--tokenizer", spm, "--token-match-heads", "-1"}},
		{"--token-match-score", []string{"--arch", "t5", "--tokenizer", spm, "--token-match-heads", "2", "--token-match-score", "0"}},
		{"--token-match-heads", []string{"--arch", "bert", "--tokenizer", vocab, "--token-match-heads", "2"}},
	} {
		code, stderr := runErr(append([]string{"--db", db, "models", "init", "--out", filepath.Join(dir, "bad")}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.flag) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %s", tc.args, code, stderr, tc.flag)
		}
	}
}

// models init declares a BERT bi-encoder's pooling in sentence-transformers
// files (mean unless --pooling says otherwise), the one place encode, eval,
// selflearn and pipeline build read it from; nonsense is an error.
func TestModelsInitBERTPooling(t *testing.T) {
	vocab := sharedDir(t, "fixtures/bert-tiny/vocab.txt")
	spm := sharedDir(t, "fixtures/tokenizer/spiece.model")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	for _, tc := range []struct {
		name  string
		args  []string
		want  bert.Pooling
		error string
	}{
		{"default", nil, bert.PoolMean, ""},
		{"cls", []string{"--pooling", "cls"}, bert.PoolCLS, ""},
		{"max", []string{"--pooling", "max"}, "", "want mean or cls"},
		{"classifier", []string{"--classifier", "--pooling", "mean"}, "", "has no pooling"},
		{"t5", []string{"--arch", "t5", "--tokenizer", spm, "--pooling", "mean"}, "", "only a bert bi-encoder"},
	} {
		out := filepath.Join(dir, tc.name)
		args := append([]string{"models", "init", "--db", db, "--arch", "bert", "--size", "tiny", "--tokenizer", vocab, "--out", out}, tc.args...)
		if tc.error != "" {
			if code, stderr := runErr(args...); code == 0 || !strings.Contains(stderr, tc.error) {
				t.Errorf("%s: exit %d, stderr %q; want an error with %q", tc.name, code, stderr, tc.error)
			}
			continue
		}
		run(t, args...)
		if p, err := encode.DirPooling(out); err != nil || p != tc.want {
			t.Errorf("%s: pooling %q, %v; want %q", tc.name, p, err, tc.want)
		}
	}
}

// inspect on a decoder-only checkpoint prints its shape and that it loads;
// bench refuses an unknown configuration by listing the known ones.
func TestModelsInspectDecoder(t *testing.T) {
	dir := sharedDir(t, "fixtures/qwen3-tiny")
	text := run(t, "models", "inspect", dir)
	for _, want := range []string{
		"model_type    qwen3\n",
		"decoder       2 layers, hidden 64, intermediate 160, 4 heads / 2 kv heads × head_dim 32, vocab 512\n",
		"context       128 positions, rope_theta 10000, tied embeddings false, eos [2]",
		"loads         yes (models/decoder)\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, text)
		}
	}
	if code, stderr := runErr("bench", "models", "--only", "qwen"); code == 0 || !strings.Contains(stderr, "want one of mini, small") || !strings.Contains(stderr, "qwen2.5-0.5b") {
		t.Errorf("bench models --only qwen: exit %d, stderr %s", code, stderr)
	}
}

// models init --arch xlm-roberta writes an XLM-R with XLMRobertaTokenizer's
// ids that inspect and infer embed read back; flags that do not apply are
// errors naming them.
func TestModelsInitXLMR(t *testing.T) {
	spm := sharedDir(t, "fixtures/tokenizer/spiece.model")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	xdir := filepath.Join(dir, "xlmr")
	run(t, "models", "init", "--db", db, "--arch", "xlm-roberta", "--size", "tiny", "--tokenizer", spm, "--out", xdir)
	var info struct {
		ModelType    string         `json:"model_type"`
		Tokenizer    string         `json:"tokenizer"`
		TokenizerLen int            `json:"tokenizer_len"`
		Config       map[string]any `json:"config"`
	}
	if err := json.Unmarshal([]byte(run(t, "models", "inspect", xdir, "--json")), &info); err != nil {
		t.Fatal(err)
	}
	// 2000 pieces + <s>/<pad>/</s>/<unk> offset + <mask>.
	if info.ModelType != "xlm-roberta" || info.Tokenizer != "tokenizer.json" || info.TokenizerLen != 2002 ||
		info.Config["vocab_size"] != float64(2002) || info.Config["pad_token_id"] != float64(1) || info.Config["layer_norm_eps"] != 1e-5 {
		t.Errorf("inspect xlm-roberta: %+v", info)
	}
	var emb struct {
		Dim       int       `json:"dim"`
		Embedding []float32 `json:"embedding"`
	}
	if err := json.Unmarshal([]byte(run(t, "infer", "embed", "--model", xdir, "--input", "Coloração de Gram", "--json")), &emb); err != nil {
		t.Fatal(err)
	}
	var norm float64
	for _, x := range emb.Embedding {
		norm += float64(x) * float64(x)
	}
	if emb.Dim != 64 || norm < 0.999 || norm > 1.001 {
		t.Errorf("embed: dim %d, squared norm %f (want 64 and 1)", emb.Dim, norm)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--size", "mini"}, "--size"},
		{[]string{"--classifier"}, "--classifier"},
		{[]string{"--pooling", "colbert"}, "dense only"},
		{[]string{"--tokenizer", sharedDir(t, "fixtures/bert-tiny/vocab.txt")}, "SentencePiece"},
	} {
		args := append([]string{"models", "init", "--db", db, "--arch", "xlm-roberta", "--tokenizer", spm, "--out", filepath.Join(dir, "bad")}, tc.args...)
		if code, stderr := runErr(args...); code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %q", tc.args, code, stderr, tc.want)
		}
	}
}

// models init --arch qwen2 writes a random tiny decoder that loads as a
// language model with the tokenizer's eos/pad ids; sizes other than tiny,
// a tokenizer that is not byte-level BPE and unknown architectures are
// refused by name.
func TestModelsInitDecoder(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	tok := filepath.Join("..", "..", "models", "testutil", "tinyqwen", "tokenizer")
	out := filepath.Join(dir, "qwen2")
	run(t, "models", "init", "--db", db, "--backend", "go", "--arch", "qwen2", "--size", "tiny", "--tokenizer", tok, "--out", out)
	cfg, err := decoder.LoadConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ModelType != "qwen2" || cfg.VocabSize != 512 || cfg.HiddenSize != 64 || cfg.MaxPositionEmbeddings != 1024 ||
		!reflect.DeepEqual(cfg.EOSTokenIDs, []int{2}) || cfg.PadTokenID != 0 || cfg.BOSTokenID != -1 {
		t.Errorf("config %+v: want tiny qwen2, vocab 512, eos <|im_end|> 2, pad 0, no bos", cfg)
	}
	g, err := lm.LoadDecoder(out, "go")
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := g.UserIDs("hi"); err != nil || ids[0] != 1 {
		t.Errorf("user prompt ids %v (%v): want the ChatML template from the tokenizer (<|im_start|> 1 first)", ids, err)
	}
	if s := run(t, "models", "inspect", "--db", db, out); !strings.Contains(s, "Qwen2ForCausalLM") {
		t.Errorf("models inspect:\n%s", s)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--arch", "qwen2", "--size", "mini", "--tokenizer", tok}, `--size "mini": want tiny`},
		{[]string{"--arch", "llama", "--tokenizer", filepath.Join("..", "..", "train", "selflearn", "testdata", "vocab.txt")}, "byte-level BPE"},
		{[]string{"--arch", "mistral", "--tokenizer", tok}, "llama, qwen2, qwen3"},
	} {
		code, stderr := runErr(append([]string{"--db", db, "models", "init", "--out", filepath.Join(dir, "bad")}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error containing %q", tc.args, code, stderr, tc.want)
		}
	}
}
