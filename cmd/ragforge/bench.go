package main

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/train/filter"
	"github.com/ragforge/ragforge/train/lora"
)

// benchModel is one configuration of `bench models`.
type benchModel struct {
	Name                  string
	Config                t5.Config
	Batch, EncLen, DecLen int
}

// benchDecoder is one decoder-only configuration of `bench models`:
// perplexity of Pairs (prompt, continuation) pairs and greedy generation.
type benchDecoder struct {
	Name                                 string
	Config                               decoder.Config
	Pairs, PromptLen, ContLen, NewTokens int
}

// benchModelResult is one line of `bench models --json`: Result for a T5
// configuration, Decoder for a decoder-only one, LoRA for the LoRA step.
type benchModelResult struct {
	Name    string               `json:"name"`
	Backend string               `json:"backend"`
	Result  *filter.BenchResult  `json:"result,omitempty"`
	Decoder *decoder.BenchResult `json:"decoder,omitempty"`
	LoRA    *lora.BenchResult    `json:"lora,omitempty"`
	PeakRSS int64                `json:"peak_rss_bytes"`
	Threads int                  `json:"gomaxprocs"`
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
	Steps int    // timed steps per configuration
	Only  string // mini | small | qwen2.5-0.5b | benchLoRAName | "" (all but benchLoRAName)
}

// benchLoRAName is the real-size LoRA SFT step of `bench models --only`:
// the qwen2.5-0.5b shape, batch 2 × 512, r 8 on every projection (issue
// 33). Minutes on a CPU, so it runs only when named.
const benchLoRAName = "qwen2.5-0.5b-lora"

func newBenchModelsCmd(g *globals) *cobra.Command {
	var o benchModelsOptions
	cmd := &cobra.Command{
		Use:   "models",
		Short: "Training tokens/s, ms/step, inference examples/s and peak RSS for T5 mini and small, perplexity and generation speed (and, when named, a LoRA step) for a Qwen2.5-0.5B-shaped decoder",
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
  qwen2.5-0.5b-lora (only when named): one LoRA SFT update of that shape
         (forward, backward to the LoRA weights, clipping, AdamW on them
         alone), r 8 on every projection, batch 2 × 512 tokens (half prompt,
         half scored response)
Peak RSS is the process's maximum resident set size so far (it only grows,
so run one configuration per process to read its own peak).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchModels(cmd.Context(), g, o)
		},
	}
	cmd.Flags().IntVar(&o.Steps, "steps", 3, "timed steps per configuration, after one compile step (min and median are reported, as the PyTorch peer benchmark does)")
	cmd.Flags().StringVar(&o.Only, "only", "", "run only this configuration (mini, small, qwen2.5-0.5b, or "+benchLoRAName+", which runs only when named)")
	return cmd
}

func runBenchModels(_ context.Context, g *globals, o benchModelsOptions) error {
	be, err := backend.New(g.Backend)
	if err != nil {
		return err
	}
	if o.Steps < 1 {
		return fmt.Errorf("--steps %d: must be at least 1", o.Steps)
	}
	configs := []benchModel{
		{"mini", t5.MiniConfig(2100), 8, 256, 2},
		{"small", t5.SmallConfig(32128), 4, 512, 2},
	}
	decoders := []benchDecoder{
		{"qwen2.5-0.5b", decoder.Qwen25HalfBConfig(), 8, 448, 64, 16},
	}
	if o.Only != "" && o.Only != "mini" && o.Only != "small" && o.Only != decoders[0].Name && o.Only != benchLoRAName {
		return fmt.Errorf("--only %q: want mini, small, %s or %s", o.Only, decoders[0].Name, benchLoRAName)
	}
	var results []benchModelResult
	for _, c := range configs {
		if o.Only != "" && o.Only != c.Name {
			continue
		}
		fmt.Fprintf(g.Err, "bench %s: compiling and running %d steps...\n", c.Name, o.Steps)
		r, err := filter.BenchTrainStep(g.Backend, c.Config, c.Batch, c.EncLen, c.DecLen, o.Steps)
		if err != nil {
			return fmt.Errorf("bench %s: %w", c.Name, err)
		}
		results = append(results, benchModelResult{Name: c.Name, Backend: backend.Describe(be), Result: &r, PeakRSS: peakRSS(), Threads: runtime.GOMAXPROCS(0)})
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
	var t5Rows, decRows int
	for _, r := range results {
		switch {
		case r.Result != nil:
			t5Rows++
		case r.Decoder != nil:
			decRows++
		}
	}
	tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	if t5Rows > 0 {
		fmt.Fprintln(tw, "MODEL\tBATCH×ENC\tTRAIN TOK/S\tMS/STEP MIN\tMS/STEP MEDIAN\tINFER EX/S\tCOMPILE MS\tPEAK RSS MiB\tBACKEND")
	}
	for _, r := range results {
		if r.Result == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d×%d\t%.0f\t%.0f\t%.0f\t%.1f\t%.0f\t%.0f\t%s\n", r.Name, r.Result.BatchSize, r.Result.EncLength,
			r.Result.TrainTokensPerSec, r.Result.MsPerStepMin, r.Result.MsPerStepMedian, r.Result.InferExamplesPerSec, r.Result.CompileMs, float64(r.PeakRSS)/(1<<20), r.Backend)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	if decRows > 0 {
		fmt.Fprintln(tw, "DECODER\tPAIRS×(PROMPT+CONT)\tPPL MS MIN\tPPL MS MEDIAN\tTOK/S\tGEN MS/STEP\tCOMPILE MS\tINIT MS\tPEAK RSS MiB\tBACKEND")
	}
	for _, r := range results {
		if d := r.Decoder; d != nil {
			fmt.Fprintf(tw, "%s\t%d×(%d+%d)\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\n", r.Name, d.Pairs, d.PromptLen, d.ContLen,
				d.PerplexityMsMin, d.PerplexityMsMedian, d.TokensPerSec, d.MsPerStep, d.CompileMs, d.InitMs, float64(r.PeakRSS)/(1<<20), r.Backend)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if l := r.LoRA; l != nil {
			tw = tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "LORA STEP\tBATCH×LEN\tTRAIN TOK/S\tMS/STEP MIN\tMS/STEP MEDIAN\tCOMPILE MS\tLORA PARAMS\tADAMW FLOATS\tPEAK RSS MiB\tBACKEND")
			fmt.Fprintf(tw, "%s\t%d×%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%.0f\t%s\n", r.Name, l.Batch, l.SeqLen, l.TokensPerSec, l.MsPerStepMin,
				l.MsPerStepMedian, l.CompileMs, l.TrainableParams, l.OptimizerFloats, float64(r.PeakRSS)/(1<<20), r.Backend)
			return tw.Flush()
		}
	}
	return nil
}
