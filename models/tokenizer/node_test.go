package tokenizer

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ragforge/ragforge/internal/testutil"
)

// transformersJS returns a directory where node resolves
// @huggingface/transformers (installed by `make setup` into .cache/npm or
// $RAGFORGE_NPM_TOKENIZERS), or skips saying what is missing.
func transformersJS(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("SKIP: node not found (apt-get install nodejs npm) — transformers.js did not read the exported tokenizer.json")
	}
	pkg := testutil.NPMPackage(t, "@huggingface/transformers")
	dir := t.TempDir()
	// Node resolves packages from the script's directory upwards.
	if err := os.Symlink(filepath.Dir(filepath.Dir(pkg)), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "node", "tokenize.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenize.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// jsDiffers are the (tokenizer, text) pairs where transformers.js and
// SentencePiece (whose ids ragforge's fixture tests pin) disagree by design.
var jsDiffers = map[[2]string]string{
	// The same two pieces of the NFKC-expanded "…" dots in either order:
	// equal Viterbi scores, a tie SentencePiece and transformers.js break
	// differently.
	{"t5", "Água destilada ………………………. 1000 mL"}:       "equal-score Viterbi tie",
	{"xlmr", "Água destilada ………………………. 1000 mL"}:     "equal-score Viterbi tie",
	{"xlmr-spm", "Água destilada ………………………. 1000 mL"}: "equal-score Viterbi tie",
	// HF fast tokenizers normalize the text around a normalized added token
	// as one string, so the space before [NOT_HELPFUL] stays a "▁" token;
	// the slow T5Tokenizer (and ragforge's T5) strips it per chunk.
	{"t5", "[HELPFUL] O tempo é 24 horas. [NOT_HELPFUL]"}: "HF slow/fast split at added tokens",
	{"t5", "[HELPFUL] azul [NOT_HELPFUL]"}:                "HF slow/fast split at added tokens",
}

// transformers.js (AutoTokenizer, the JS port of HF tokenizers) loads each
// exported tokenizer.json from a folder holding only it and its
// tokenizer_config.json, and encodes the fixture texts to the ids of the
// source tokenizer.
func TestTransformersJSReadsExports(t *testing.T) {
	run := transformersJS(t)
	exps := append(exports(t), qwen3Export(t))
	root := t.TempDir()
	type job struct {
		Model string   `json:"model"`
		Texts []string `json:"texts"`
	}
	var jobs []job
	for _, e := range exps {
		if err := os.Rename(e.dir, filepath.Join(root, e.name)); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{e.name, e.texts})
	}
	buf, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	jobsFile := filepath.Join(run, "jobs.json")
	if err := os.WriteFile(jobsFile, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", filepath.Join(run, "tokenize.mjs"), root+"/", jobsFile).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
	var got map[string][][]int
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, e := range exps {
		back, err := Load(filepath.Join(root, e.name))
		if err != nil {
			t.Fatal(err)
		}
		if len(got[e.name]) != len(e.texts) {
			t.Fatalf("%s: transformers.js gave %d encodings for %d texts", e.name, len(got[e.name]), len(e.texts))
		}
		for i, text := range e.texts {
			if why, ok := jsDiffers[[2]string{e.name, text}]; ok {
				t.Logf("%s %q: not compared (%s): transformers.js %v, ragforge %v", e.name, text, why, got[e.name][i], back.Encode(text, true))
				continue
			}
			if want := back.Encode(text, true); !slices.Equal(got[e.name][i], want) {
				t.Errorf("%s %q: transformers.js %v, ragforge %v", e.name, text, got[e.name][i], want)
			}
		}
	}
}

// qwen3Export is the Qwen3 fixture tokenizer with a label token added,
// saved by ragforge (tokenizer.json rewritten with the new added token).
func qwen3Export(t *testing.T) exported {
	src := testutil.SharedPath(t, "fixtures/tokenizer-qwen3")
	tok, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	tok.AddTokens([]string{"[HELPFUL]"})
	dir := t.TempDir()
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	buf, err := os.ReadFile(filepath.Join(src, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Cases []struct{ Text string } `json:"cases"`
	}
	if err := json.Unmarshal(buf, &exp); err != nil {
		t.Fatal(err)
	}
	texts := []string{"Azul[HELPFUL] de toluidina", "<|im_start|>user\n[HELPFUL]<|im_end|>"}
	for _, c := range exp.Cases {
		texts = append(texts, c.Text)
	}
	return exported{"qwen3", dir, tok, texts}
}
