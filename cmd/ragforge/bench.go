package main

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"text/tabwriter"

	"github.com/gomlx/gomlx/backends"
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

// benchModelResult is one line of `bench models --json`.
type benchModelResult struct {
	Name    string             `json:"name"`
	Backend string             `json:"backend"`
	Result  filter.BenchResult `json:"result"`
	PeakRSS int64              `json:"peak_rss_bytes"`
	Threads int                `json:"gomaxprocs"`
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
	Only  string // mini | small | "" (both) | benchLoRAName
}

// benchLoRAName is the real-size LoRA SFT step of `bench models --only`:
// Qwen2.5-0.5B shape, batch 2 × 512, r 8 on every projection (issue 33).
// Minutes on a CPU, so it runs only when named.
const benchLoRAName = "qwen2.5-0.5b-lora"

// benchLoRAResult is the `bench models --json` line of benchLoRAName.
type benchLoRAResult struct {
	Name    string           `json:"name"`
	Backend string           `json:"backend"`
	Result  lora.BenchResult `json:"result"`
	PeakRSS int64            `json:"peak_rss_bytes"`
	Threads int              `json:"gomaxprocs"`
}

// runBenchLoRA times the LoRA step of benchLoRAName.
func runBenchLoRA(g *globals, be backends.Backend, steps int) error {
	c, err := decoder.ParseConfig("Qwen2.5-0.5B/config.json", []byte(lora.Qwen25HalfBConfig))
	if err != nil {
		return err
	}
	fmt.Fprintf(g.Err, "bench %s: compiling and running %d steps...\n", benchLoRAName, steps)
	r, err := lora.BenchStep(g.Backend, c, decoder.LoRA{R: 8, Alpha: 16, TargetModules: []string{lora.AllLinear}}, 2, 512, steps)
	if err != nil {
		return fmt.Errorf("bench %s: %w", benchLoRAName, err)
	}
	res := benchLoRAResult{Name: benchLoRAName, Backend: backend.Describe(be), Result: r, PeakRSS: peakRSS(), Threads: runtime.GOMAXPROCS(0)}
	if g.JSON {
		return printJSON(g.Out, []benchLoRAResult{res})
	}
	tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tBATCH×LEN\tTRAIN TOK/S\tMS/STEP MIN\tMS/STEP MEDIAN\tCOMPILE MS\tLORA PARAMS\tADAMW FLOATS\tPEAK RSS MiB\tBACKEND")
	fmt.Fprintf(tw, "%s\t%d×%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%.0f\t%s\n", res.Name, r.Batch, r.SeqLen, r.TokensPerSec, r.MsPerStepMin,
		r.MsPerStepMedian, r.CompileMs, r.TrainableParams, r.OptimizerFloats, float64(res.PeakRSS)/(1<<20), res.Backend)
	return tw.Flush()
}

func newBenchModelsCmd(g *globals) *cobra.Command {
	var o benchModelsOptions
	cmd := &cobra.Command{
		Use:   "models",
		Short: "Training tokens/s, ms/step, inference examples/s and peak RSS for T5 mini and small",
		Long: `Benchmarks a randomly initialized T5 filter step (forward + backward + AdamW)
and first-decoder-step scoring, compiled once per shape:
  mini:  d_model 256, d_ff 1024 gated-gelu, 4+4 layers, 4 heads, d_kv 64, vocab 2100;
         batch 8, encoder length 256, decoder length 2
  small: d_model 512, d_ff 1024 gated-gelu, 8+8 layers, 6 heads, d_kv 64, vocab 32128;
         batch 4, encoder length 512, decoder length 2
Training tokens/s counts encoder tokens. Peak RSS is the process's maximum
resident set size so far (it only grows).

--only qwen2.5-0.5b-lora times a LoRA SFT update instead (forward, backward
to the LoRA weights, clipping, AdamW on them alone) of a random decoder of
Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 heads / 2 KV heads,
intermediate 4864, vocab 151,936, tied embeddings), r 8 on every
projection, batch 2 × 512 tokens (half prompt, half scored response).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchModels(cmd.Context(), g, o)
		},
	}
	cmd.Flags().IntVar(&o.Steps, "steps", 3, "timed steps per configuration, after one compile step (min and median are reported, as the PyTorch peer benchmark does)")
	cmd.Flags().StringVar(&o.Only, "only", "", "run only this configuration (mini, small, or "+benchLoRAName+", which runs only when named)")
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
	if o.Only == benchLoRAName {
		return runBenchLoRA(g, be, o.Steps)
	}
	if o.Only != "" && o.Only != "mini" && o.Only != "small" {
		return fmt.Errorf("--only %q: want mini, small or %s", o.Only, benchLoRAName)
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
		results = append(results, benchModelResult{Name: c.Name, Backend: backend.Describe(be), Result: r, PeakRSS: peakRSS(), Threads: runtime.GOMAXPROCS(0)})
	}
	if g.JSON {
		return printJSON(g.Out, results)
	}
	tw := tabwriter.NewWriter(g.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tBATCH×ENC\tTRAIN TOK/S\tMS/STEP MIN\tMS/STEP MEDIAN\tINFER EX/S\tCOMPILE MS\tPEAK RSS MiB\tBACKEND")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d×%d\t%.0f\t%.0f\t%.0f\t%.1f\t%.0f\t%.0f\t%s\n", r.Name, r.Result.BatchSize, r.Result.EncLength,
			r.Result.TrainTokensPerSec, r.Result.MsPerStepMin, r.Result.MsPerStepMedian, r.Result.InferExamplesPerSec, r.Result.CompileMs, float64(r.PeakRSS)/(1<<20), r.Backend)
	}
	return tw.Flush()
}
