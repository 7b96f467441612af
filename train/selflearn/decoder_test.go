package selflearn

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/models/testutil/tinyqwen"
	"github.com/ragforge/ragforge/models/tokenizer/bpe"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/train/lora"
	"github.com/ragforge/ragforge/train/pretrain"
)

// sampleSubset is the first chunks of the demo corpus (data/sample) and
// the sample questions about them, with their chunk qrels.
func sampleSubset(t *testing.T, nChunks, nQueries int) ([]data.Chunk, []data.Query, data.Qrels) {
	t.Helper()
	corpus, qa, err := sample.WriteTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	docs, err := data.LoadCorpus(corpus, data.FieldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, _, err := chunk.SplitAll(docs[:4], chunk.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	chunks = chunks[:min(nChunks, len(chunks))]
	all, _, err := data.OpenQueries(qa, "")
	if err != nil {
		t.Fatal(err)
	}
	qrels, err := eval.BuildQrels(all, chunks, eval.Rule{})
	if err != nil {
		t.Fatal(err)
	}
	var qs []data.Query
	for _, q := range all {
		if len(qrels[q.ID]) > 0 && len(qs) < nQueries {
			qs = append(qs, q)
		}
	}
	return chunks, qs, qrels
}

// sampleGenerator is a random tiny Qwen2 (`models init --arch qwen2 --size
// tiny`) pretrained on the demo corpus (pretrain.CausalLM, as `ragforge
// pretrain` does it): the random one writes invalid UTF-8, every item of
// which would be an error.
func sampleGenerator(t *testing.T) string {
	t.Helper()
	corpus, _, err := sample.WriteTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	docs, err := data.LoadCorpus(corpus, data.FieldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, _, err := chunk.SplitAll(docs, chunk.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(chunks))
	for i, c := range chunks {
		texts[i] = c.Text
	}
	cfg := pretrain.DefaultConfig()
	cfg.ModelDir, cfg.OutputDir, cfg.Backend = tinyqwen.Random(t, 3), filepath.Join(t.TempDir(), "qwen2-tiny-pt"), "go"
	cfg.MaxSeqLength, cfg.BatchSize, cfg.Epochs, cfg.LearningRate = 128, 8, 30, 1e-2
	if _, err := pretrain.CausalLM(context.Background(), cfg, corpus, texts, nil, nil); err != nil {
		t.Fatal(err)
	}
	return cfg.OutputDir
}

// decoderConfig is a self-learning round with a random tiny Qwen2
// generator (the `models init --arch qwen2 --size tiny` shape) LoRA-tuned
// with a checkpoint per update.
func decoderConfig(t *testing.T, ret, gen string) Config {
	cfg := toyConfig(t, ret)
	cfg.Generator = "qwen2:" + gen
	cfg.L, cfg.MaxQueryTokens, cfg.MaxDocTokens, cfg.MaxTargetTokens = 2, 8, 12, 12
	cfg.GenTemperature = 1.0
	lc := lora.DefaultConfig()
	lc.LearningRate, lc.WarmupSteps, lc.SaveSteps = 1e-3, 0, 1
	lc.LoRA.TargetModules = []string{lora.AllLinear}
	cfg.GeneratorLoRA = lc
	return cfg
}

// The SFT examples of a decoder generator are the prompt it generates
// from (lm.UserPromptIDs of the Eq. 3 prompt: ChatML, assistant turn
// opened) and d* cut to MaxTargetTokens−1 tokens plus <|im_end|>.
func TestDecoderSFTExamples(t *testing.T) {
	dir := t.TempDir()
	tinyqwen.WriteTokenizer(t, dir)
	tok, err := bpe.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := DecoderSFTExamples(tok, []SFTPair{{Query: "gout?", Output: "uric acid crystals in the joint"}}, "Q: {query}\nP:", 5, 1024)
	if err != nil {
		t.Fatal(err)
	}
	want := tok.Encode("<|im_start|>user\nQ: gout?\nP:<|im_end|>\n<|im_start|>assistant\n", false)
	if !reflect.DeepEqual(ex[0].Prompt, want) {
		t.Errorf("prompt %v, want the ChatML rendering %v", ex[0].Prompt, want)
	}
	resp := tok.Encode("uric acid crystals in the joint", false)
	if got := ex[0].Response; len(got) != 5 || !reflect.DeepEqual(got[:4], resp[:4]) || got[4] != tok.EOSID() || tok.EOSID() != 2 {
		t.Errorf("response %v, want the first 4 of %v then <|im_end|> (2)", got, resp)
	}
}

// A self-learning round with a decoder generator on the demo corpus runs
// every stage, LoRA SFT included (round-1/generator is the merged
// checkpoint, the PEFT adapter beside it), and an interrupted round
// (stopped after the first LoRA update) resumes with identical results:
// the same generated texts, adapter bytes, merged weights and metrics.
func TestRunDecoderGeneratorResume(t *testing.T) {
	if testing.Short() {
		t.Skip("generates with a decoder and trains twice; skipped with -short")
	}
	ret, gen := toyRetriever(t), sampleGenerator(t)
	chunks, qs, qrels := sampleSubset(t, 8, 3)

	cfgA := decoderConfig(t, ret, gen)
	repA, err := Run(context.Background(), cfgA, chunks, qs, qrels, openStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(repA.Rounds) < 2 {
		t.Fatalf("rounds %+v", repA.Rounds)
	}
	rd := repA.Rounds[1]
	t.Logf("counts %+v errors %q", rd.Counts, rd.Errors)
	if rd.Counts.Selected < 3 {
		t.Fatalf("counts %+v: want at least 3 selected pairs (2 LoRA updates) for the interruption", rd.Counts)
	}
	if rd.GeneratorDir != filepath.Join(cfgA.WorkDir, "round-1", "generator") || len(variants(repA)) != 9 {
		t.Fatalf("generator dir %q, variants %v", rd.GeneratorDir, variants(repA))
	}
	adapter := filepath.Join(LoRADir, lora.AdapterDir, "adapter_model.safetensors")
	for _, f := range []string{filepath.Join("generator", "model.safetensors"), filepath.Join("generator", "tokenizer.json"), adapter} {
		if _, err := os.Stat(filepath.Join(cfgA.WorkDir, "round-1", f)); err != nil {
			t.Fatalf("round-1/%s: %v", f, err)
		}
	}
	base, _ := os.ReadFile(filepath.Join(gen, "model.safetensors"))
	tuned, _ := os.ReadFile(filepath.Join(rd.GeneratorDir, "model.safetensors"))
	if bytes.Equal(base, tuned) {
		t.Fatal("round-1/generator has the initial weights: the adapter was not merged")
	}

	cfgB := decoderConfig(t, ret, gen)
	store := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err = Run(ctx, cfgB, chunks, qs, qrels, store, func(stage string, done, total int) {
		if stage == "r1/sft" && done == 1 && total > 1 {
			cancel() // after LoRA update 1 (and its checkpoint)
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err %v, want context.Canceled", err)
	}
	loraOut := filepath.Join(cfgB.WorkDir, "round-1", LoRADir)
	if _, err := os.Stat(filepath.Join(loraOut, "checkpoint-1")); err != nil {
		t.Fatalf("no LoRA checkpoint-1 after the interruption: %v", err)
	}
	if _, err := os.Stat(filepath.Join(loraOut, lora.AdapterDir)); err == nil {
		t.Fatal("the LoRA run had finished before the interruption")
	}
	repB, err := Run(context.Background(), cfgB, chunks, qs, qrels, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(variants(repA), variants(repB)) {
		t.Errorf("metrics differ:\n uninterrupted %v\n resumed       %v", variants(repA), variants(repB))
	}
	for _, f := range []string{"sft_alpaca.jsonl", "train.jsonl", adapter, filepath.Join("generator", "model.safetensors")} {
		a, errA := os.ReadFile(filepath.Join(cfgA.WorkDir, "round-1", f))
		b, errB := os.ReadFile(filepath.Join(cfgB.WorkDir, "round-1", f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("round-1/%s differs between the uninterrupted and the resumed run (%v, %v)", f, errA, errB)
		}
	}
}
