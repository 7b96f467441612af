package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/gomlx/gomlx/backends"
	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/xlmr"
	"github.com/ragforge/ragforge/train/filtertrain"
	"github.com/ragforge/ragforge/train/lora"
	"github.com/ragforge/ragforge/train/memory"
	"github.com/ragforge/ragforge/train/retriever"
)

// benchModel is one configuration of `bench models`: a T5 filter step
// (Config) or, when Encoder is set, a BERT-family retriever step.
type benchModel struct {
	Name                  string
	Config                t5.Config
	Batch, EncLen, DecLen int
	Encoder               *bert.Config
	Arch                  bert.Arch
	Shape                 retriever.BenchShape
	RealSize              bool // run only when named by --only
}

// benchDecoder is one decoder-only configuration of `bench models`:
// perplexity of Pairs (prompt, continuation) pairs and greedy generation.
type benchDecoder struct {
	Name                                 string
	Config                               decoder.Config
	Pairs, PromptLen, ContLen, NewTokens int
}

// benchModelResult is one line of `bench models --json`: Result for a T5
// configuration, Retriever for a retriever shape, Decoder for a
// decoder-only one, LoRA for the LoRA step; Estimate (training memory) for
// the first two.
type benchModelResult struct {
	Name      string                   `json:"name"`
	Backend   string                   `json:"backend"`
	Result    *filtertrain.BenchResult `json:"result,omitempty"`
	Retriever *retriever.BenchResult   `json:"retriever,omitempty"`
	Decoder   *decoder.BenchResult     `json:"decoder,omitempty"`
	LoRA      *lora.BenchResult        `json:"lora,omitempty"`
	Estimate  *memory.Estimate         `json:"memory_estimate,omitempty"`
	PeakRSS   int64                    `json:"peak_rss_bytes"`
	Threads   int                      `json:"gomaxprocs"`
}

func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // Linux reports KiB
}

// benchModelsOptions are the flags of `bench models`.
type benchModelsOptions struct {
	Steps          int       // timed steps per configuration
	Only           string    // a benchModels or decoder name, "" = every configuration but the real sizes
	SubBatchTokens int       // retriever shapes: GradCache pass size (0: the trainer's default)
	SkipTrain      bool      // retriever shapes: encode throughput only
	DType          dtypeFlag // retriever shapes: weights held while encoding
}

// benchLoRAName is the real-size LoRA SFT step of `bench models --only`:
// the qwen2.5-0.5b shape, batch 2 × 512, r 8 on every projection (issue
// 33). Minutes on a CPU, so it runs only when named.
const benchLoRAName = "qwen2.5-0.5b-lora"

// benchModels are the configurations of `bench models`. The real sizes are
// random-initialised at the published shapes (no download) and run only
// when named by --only.
func benchModels() []benchModel {
	bge, m3, small := bert.LargeConfig(30522), xlmr.BGEM3Config(), bert.BGESmallConfig(30522)
	// SL-HyDE's retriever step: 4 queries × (1 positive + 7 hard negatives) × 512 tokens;
	// encode throughput at 256 tokens.
	shape := retriever.BenchShape{Queries: 4, Negatives: 7, Length: 512, EncodeBatch: 8, EncodeLength: 256}
	return []benchModel{
		{Name: "mini", Config: t5.MiniConfig(2100), Batch: 8, EncLen: 256, DecLen: 2},
		{Name: "small", Config: t5.SmallConfig(32128), Batch: 4, EncLen: 512, DecLen: 2},
		{Name: "flan-t5-large", Config: t5.LargeConfig(), Batch: 4, EncLen: 512, DecLen: 2, RealSize: true},
		{Name: "bge-large", Encoder: &bge, Arch: bert.BERT, Shape: shape, RealSize: true},
		{Name: "bge-m3", Encoder: &m3, Arch: xlmr.Arch, Shape: shape, RealSize: true},
		// A small published shape beside them, to compare with the PyTorch
		// peer (scripts/torch_bert_bench.py) where the large ones do not fit.
		{Name: "bge-small", Encoder: &small, Arch: bert.BERT, Shape: shape, RealSize: true},
	}
}

func newBenchModelsCmd(g *globals) *cobra.Command {
	var o benchModelsOptions
	cmd := &cobra.Command{
		Use:   "models",
		Short: "Training tokens/s, ms/step, inference rate and peak RSS for T5 mini and small, perplexity and generation speed (and, when named, a LoRA step) for a Qwen2.5-0.5B-shaped decoder, and the papers' real sizes on request",
		Long: `Benchmarks a randomly initialized T5 filter step (forward + backward + AdamW)
and first-decoder-step scoring, compiled once per shape:
  mini:  d_model 256, d_ff 1024 gated-gelu, 4+4 layers, 4 heads, d_kv 64, vocab 2100;
         batch 8, encoder length 256, decoder length 2
  small: d_model 512, d_ff 1024 gated-gelu, 8+8 layers, 6 heads, d_kv 64, vocab 32128;
         batch 4, encoder length 512, decoder length 2
Training tokens/s counts encoder tokens.
  qwen2.5-0.5b: hidden 896, 24 layers, 14 heads / 2 kv heads, intermediate 4864,
         vocab 151936, tied (494M parameters); perplexity of 8 (prompt 448,
         continuation 64) pairs in one batch, then 16 greedy tokens per pair
         with the KV cache
The papers' real sizes, random init at the published shapes (no download),
run only when named by --only:
  flan-t5-large: d_model 1024, d_ff 2816 gated-gelu, 24+24 layers, 16 heads,
         d_kv 64, vocab 32128 (783M); filter step at batch 4, length 512, decoder 2
  bge-large: BERT 1024/24 layers/16 heads/4096, vocab 30522 (335M)
  bge-m3:    XLM-RoBERTa 1024/24/16/4096, vocab 250002, 8192 tokens (568M)
  bge-small: BERT 384/12/12/1536, vocab 30522 (33M), the same steps
         both: an InfoNCE update (GradCache, AdamW) of 4 queries × (1 positive
         + 7 hard negatives) × 512 tokens, then encoding 8 passages of 256
         tokens (CLS, normalised) per call; --dtype bfloat16 holds the
         weights in bfloat16 while encoding (from the init with --skip-train,
         so the peak RSS is bfloat16's; the training step is float32)
  qwen2.5-0.5b-lora (only when named): one LoRA SFT update of the
         qwen2.5-0.5b shape (forward, backward to the LoRA weights, clipping,
         AdamW on them alone), r 8 on every projection, batch 2 × 512 tokens
         (half prompt, half scored response)
Each configuration first prints its memory estimate (train/memory) and is
refused before any work when it exceeds the available memory
($RAGFORGE_MEMORY_LIMIT or MemAvailable). Peak RSS is the process's maximum
resident set size so far (it only grows, so run one configuration per process
to read its own peak).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchModels(cmd.Context(), g, o)
		},
	}
	cmd.Flags().IntVar(&o.Steps, "steps", 3, "timed steps per configuration, after one compile step (min and median are reported, as the PyTorch peer benchmark does)")
	cmd.Flags().StringVar(&o.Only, "only", "", "run only this configuration: mini, small, qwen2.5-0.5b, "+benchLoRAName+", flan-t5-large, bge-large, bge-m3 or bge-small (default: mini, small and qwen2.5-0.5b)")
	cmd.Flags().IntVar(&o.SubBatchTokens, "sub-batch-tokens", 0, "bge-large/bge-m3: padded tokens per GradCache encoder pass (0: the trainer's 4096)")
	cmd.Flags().BoolVar(&o.SkipTrain, "skip-train", false, "bge-large/bge-m3: measure encoding only, no training step")
	addDTypeFlag(cmd, &o.DType) // bge-large/bge-m3 encoding; auto = the random init's float32
	return cmd
}

func runBenchModels(_ context.Context, g *globals, o benchModelsOptions) error {
	be, err := backend.New(g.Backend)
	if err != nil {
		return err
	}
	configs, decoders, err := o.validate()
	if err != nil {
		return err
	}
	avail, src, err := memory.Available()
	if err != nil {
		return err
	}
	var results []benchModelResult
	for _, c := range configs {
		if (o.Only != "" && o.Only != c.Name) || (o.Only == "" && c.RealSize) {
			continue
		}
		r, err := benchTrainShape(g, o, be, c, avail, src)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	for _, c := range decoders {
		if o.Only != "" && o.Only != c.Name {
			continue
		}
		fmt.Fprintf(g.Err, "bench %s: random init, compiling and running %d perplexity calls and one generation...\n", c.Name, o.Steps)
		r, err := decoder.Bench(g.Backend, c.Config, c.Pairs, c.PromptLen, c.ContLen, c.NewTokens, o.Steps)
		if err != nil {
			return fmt.Errorf("bench %s: %w", c.Name, err)
		}
		results = append(results, benchModelResult{Name: c.Name, Backend: backend.Describe(be), Decoder: &r, PeakRSS: peakRSS(), Threads: runtime.GOMAXPROCS(0)})
	}
	if o.Only == benchLoRAName {
		fmt.Fprintf(g.Err, "bench %s: random init, compiling and running %d LoRA updates...\n", benchLoRAName, o.Steps)
		r, err := lora.BenchStep(g.Backend, decoder.Qwen25HalfBConfig(), decoder.LoRA{R: 8, Alpha: 16, TargetModules: []string{lora.AllLinear}}, 2, 512, o.Steps)
		if err != nil {
			return fmt.Errorf("bench %s: %w", benchLoRAName, err)
		}
		results = append(results, benchModelResult{Name: benchLoRAName, Backend: backend.Describe(be), LoRA: &r, PeakRSS: peakRSS(), Threads: runtime.GOMAXPROCS(0)})
	}
	if g.JSON {
		return printJSON(g.Out, results)
	}
	return printBenchModels(g.Out, results)
}

// validate checks the flags and returns the shapes --only may name.
func (o benchModelsOptions) validate() ([]benchModel, []benchDecoder, error) {
	if o.Steps < 1 {
		return nil, nil, fmt.Errorf("--steps %d: must be at least 1", o.Steps)
	}
	if o.SubBatchTokens < 0 {
		return nil, nil, fmt.Errorf("--sub-batch-tokens %d: want >= 0", o.SubBatchTokens)
	}
	configs := benchModels()
	decoders := []benchDecoder{
		{"qwen2.5-0.5b", decoder.Qwen25HalfBConfig(), 8, 448, 64, 16},
	}
	var names []string
	for _, c := range configs {
		names = append(names, c.Name)
	}
	for _, c := range decoders {
		names = append(names, c.Name)
	}
	names = append(names, benchLoRAName)
	if o.Only != "" && !slices.Contains(names, o.Only) {
		return nil, nil, fmt.Errorf("--only %q: want one of %s", o.Only, strings.Join(names, ", "))
	}
	if (o.SubBatchTokens != 0 || o.SkipTrain || o.DType.get() != nn.Auto) && (o.Only == "" || benchModelByName(configs, o.Only).Encoder == nil) {
		return nil, nil, fmt.Errorf("--sub-batch-tokens, --skip-train and --dtype apply to --only bge-large, bge-m3 or bge-small")
	}
	return configs, decoders, nil
}

// benchTrainShape estimates one T5 or retriever shape's memory, refuses it
// when it would not fit, and measures its training step.
func benchTrainShape(g *globals, o benchModelsOptions, be backends.Backend, c benchModel, avail int64, src string) (benchModelResult, error) {
	r := benchModelResult{Name: c.Name, Backend: backend.Describe(be), Threads: runtime.GOMAXPROCS(0)}
	var e memory.Estimate
	if c.Encoder != nil {
		s := c.Shape
		s.SubBatchTokens, s.SkipTrain = o.SubBatchTokens, o.SkipTrain
		pass := s.SubBatchTokens
		if pass == 0 {
			pass = retriever.DefaultSubBatchTokens
		}
		e = memory.Retriever(*c.Encoder, c.Arch.ModelType, pass, s.Length)
		held, err := o.DType.get().Hold(safetensors.F32, be) // random init: stored float32
		if err != nil {
			return r, fmt.Errorf("bench %s: --dtype: %w", c.Name, err)
		}
		if s.SkipTrain {
			e = memory.Estimate{What: c.Name + " encoding, " + strings.ToLower(held.String()) + " weights", Params: e.Params, Weights: e.Params * int64(held.Size())}
		}
	} else {
		e = memory.Filter(c.Config, c.Batch, c.EncLen, c.DecLen)
	}
	r.Estimate = &e
	fmt.Fprintf(g.Err, "bench %s: %s\n", c.Name, e)
	if err := memory.Check(e, avail, src, nil); err != nil {
		return r, fmt.Errorf("bench %s: %w", c.Name, err)
	}
	fmt.Fprintf(g.Err, "bench %s: compiling and running %d steps...\n", c.Name, o.Steps)
	if c.Encoder != nil {
		s := c.Shape
		s.SubBatchTokens, s.SkipTrain = o.SubBatchTokens, o.SkipTrain
		var err error
		if s.EncodeDType, err = o.DType.get().Hold(safetensors.F32, be); err != nil {
			return r, fmt.Errorf("bench %s: --dtype: %w", c.Name, err)
		}
		res, err := retriever.BenchTrainStep(g.Backend, *c.Encoder, c.Arch, s, o.Steps)
		if err != nil {
			return r, fmt.Errorf("bench %s: %w", c.Name, err)
		}
		r.Retriever = &res
	} else {
		res, err := filtertrain.BenchTrainStep(g.Backend, c.Config, c.Batch, c.EncLen, c.DecLen, o.Steps)
		if err != nil {
			return r, fmt.Errorf("bench %s: %w", c.Name, err)
		}
		r.Result = &res
	}
	r.PeakRSS = peakRSS()
	return r, nil
}

func benchModelByName(cs []benchModel, name string) benchModel {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return benchModel{}
}
