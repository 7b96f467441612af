package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/inspect"
	"github.com/ragforge/ragforge/models/modelinit"
	"github.com/spf13/cobra"
)

const modelsInitLong = `Write a randomly initialized model for training from scratch where no
checkpoint exists. Sizes:
  t5   tiny  d_model 64,  d_ff 160 gated-gelu, 2+2 layers, 4 heads, d_kv 16
       mini  d_model 256, d_ff 1024 gated-gelu, 4+4 layers, 4 heads, d_kv 64
       small d_model 512, d_ff 1024 gated-gelu, 8+8 layers, 6 heads, d_kv 64
  bert tiny  hidden 128, 2 layers, 2 heads, intermediate 512
       mini  hidden 256, 4 layers, 4 heads, intermediate 1024
       small hidden 512, 4 layers, 8 heads, intermediate 2048
  xlm-roberta (the bge-m3 / multilingual-e5 encoder)
       tiny  hidden 64, 2 layers, 4 heads, intermediate 128, 64 tokens
       base  hidden 768, 12 layers, 12 heads, intermediate 3072, 512 tokens
       large hidden 1024, 24 layers, 16 heads, intermediate 4096, 512 tokens
  qwen2, llama, qwen3 (decoder-only LMs, e.g. a tiny SL-HyDE generator)
       tiny  hidden 64, 2 layers, 4 heads / 2 kv heads, intermediate 160,
             1024 positions; needs a byte-level BPE tokenizer.json, whose
             bos/eos/pad tokens become config.json's ids
The vocabulary size is the tokenizer's length (T5: SentencePiece pieces + 100
sentinels + added tokens; XLM-R: pieces + 2 with XLMRobertaTokenizer's ids,
from a sentencepiece.bpe.model, or from a T5 spiece.model re-laid out as one;
written as tokenizer.json). For T5 the RAG² filter's label tokens [HELPFUL]
and [NOT_HELPFUL] are added by default (--add-tokens '' adds none), so they
get their own random rows: a filter trained from this checkpoint does not
start with two identical label rows. A BERT bi-encoder (no --classifier) gets
sentence-transformers files (modules.json, 1_Pooling/config.json) declaring
its pooling, --pooling mean by default (sentence-transformers' default for a
model without its own pooling; a random [CLS] state carries little of the
text), which encode, eval, selflearn, pipeline build and export read.
config.json carries
"ragforge_random_init": true, which train filter and selflearn read to pick
the scratch recipe.

--token-match-heads N (t5) gives N heads of the first encoder layer a
structured random start: their key projection equals their (rescaled) query
projection, so q·k of a token with itself is --token-match-score and of two
different tokens about score/√d_kv (score/4 for tiny), and their
relative-position bias at distance 0 is minus that score: a token attends
to its other occurrences in the input.
A random T5 filter trained on ICT examples learns the question–evidence word
match from this start within the demo's budget and not from HF's init
(docs/recipes.md). The tensors are HF's; config.json records the settings
under "ragforge_init".`

func newModelsInitCmd(g *globals) *cobra.Command {
	var o modelinit.Options
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a randomly initialized T5, BERT, XLM-R or decoder (Qwen2/Llama/Qwen3) model in HF layout (config.json, model.safetensors, tokenizer files)",
		Long:  modelsInitLong,
		Example: `  ragforge models init --arch t5 --size tiny --tokenizer ../shared/fixtures/tokenizer/spiece.model --out work/t5-tiny
  ragforge models init --arch bert --size tiny --tokenizer ../shared/fixtures/bert-tiny/vocab.txt --out work/bert-tiny
  ragforge models init --arch xlm-roberta --size tiny --tokenizer ../shared/fixtures/tokenizer/spiece.model --out work/xlmr-tiny
  ragforge models init --arch qwen2 --size tiny --tokenizer models/testutil/tinyqwen/tokenizer --out work/qwen2-tiny`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Arch == "t5" && !cmd.Flags().Changed("add-tokens") {
				o.AddTokens = []string{filter.Helpful, filter.NotHelpful}
			}
			return runModelsInit(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Arch, "arch", "", "architecture: t5 | bert | xlm-roberta | qwen2 | llama | qwen3 (required)")
	f.StringVar(&o.Size, "size", "tiny", "size preset: tiny | mini | small (xlm-roberta: tiny | base | large)")
	f.StringVar(&o.Tokenizer, "tokenizer", "", "tokenizer: spiece.model, vocab.txt, tokenizer.json, or a directory holding one (required)")
	f.StringVar(&o.Out, "out", "", "output directory (required)")
	f.Int64Var(&o.Seed, "seed", 42, "initialization seed")
	f.BoolVar(&o.Classifier, "classifier", false, "bert: add a 1-label sequence-classification head (cross-encoder)")
	f.StringVar(&o.Pooling, "pooling", "", "bert bi-encoder pooling written to 1_Pooling/config.json: mean | cls (default mean)")
	f.IntVar(&o.TokenMatchHeads, "token-match-heads", 0, "t5: start this many heads of the first encoder layer as token matchers (key rows = query rows, so a token attends to its other occurrences; 0: HF's init only)")
	f.Float64Var(&o.TokenMatchScore, "token-match-score", 8, "t5: a token's attention score with itself in the token-match heads (its distance-0 bias is minus this)")
	f.StringSliceVar(&o.AddTokens, "add-tokens", nil, "tokens to add before sizing the vocabulary (t5 default: [HELPFUL],[NOT_HELPFUL]; '' for none)")
	return cmd
}

func runModelsInit(_ context.Context, g *globals, o modelinit.Options) error {
	o.Backend = g.Backend
	info, err := modelinit.Init(o)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, info)
	}
	fmt.Fprintf(g.Out, "wrote %s %s model to %s: %d parameters, vocab %d, tokenizer %s\n",
		o.Size, o.Arch, o.Out, info.Parameters, info.TokenizerLen, info.Tokenizer)
	return nil
}

func newModelsInspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect DIR",
		Short: "Show a model directory's architecture, parameter count, dtypes, tokenizer and added tokens",
		Example: `  ragforge models inspect ./flan-t5-base
  ragforge models inspect ./Qwen2.5-0.5B-Instruct   # llama / qwen2 / qwen3: layers, heads, context, whether it loads`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runModelsInspect(cmd.Context(), g, modelsInspectOptions{Dir: args[0]})
		},
	}
}

// modelsInspectOptions are the arguments of `models inspect`.
type modelsInspectOptions struct {
	Dir string
}

func runModelsInspect(_ context.Context, g *globals, o modelsInspectOptions) error {
	info, err := inspect.Dir(o.Dir)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, info)
	}
	fmt.Fprintf(g.Out, "dir           %s\nmodel_type    %s\narchitectures %s\nparameters    %d (%.2fM)\ntensors       %d\n",
		info.Dir, info.ModelType, orDash(joinAny(info.Architectures)), info.Parameters, float64(info.Parameters)/1e6, info.Tensors)
	fmt.Fprint(g.Out, "dtypes       ")
	for _, d := range info.SortedDTypes() {
		fmt.Fprintf(g.Out, " %s×%d", d, info.DTypes[d])
	}
	fmt.Fprintf(g.Out, "\ntokenizer     %s (len %d)\n", orDash(info.Tokenizer), info.TokenizerLen)
	if d := info.Decoder; d != nil {
		printDecoderInfo(g.Out, d)
	}
	if len(info.AddedTokens) > 0 {
		toks := make([]string, 0, len(info.AddedTokens))
		for t := range info.AddedTokens {
			toks = append(toks, t)
		}
		sort.Slice(toks, func(i, j int) bool { return info.AddedTokens[toks[i]] < info.AddedTokens[toks[j]] })
		for i, t := range toks {
			toks[i] = fmt.Sprintf("%s (id %d)", t, info.AddedTokens[t])
		}
		fmt.Fprintf(g.Out, "added tokens  %s\n", strings.Join(toks, ", "))
	}
	return nil
}

// joinAny joins config.json list values ("architectures") with ", ".
func joinAny(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printDecoderInfo prints the decoder-only summary of `models inspect`.
func printDecoderInfo(w io.Writer, d *inspect.Decoder) {
	if d.Layers > 0 {
		fmt.Fprintf(w, "decoder       %d layers, hidden %d, intermediate %d, %d heads / %d kv heads × head_dim %d, vocab %d\n",
			d.Layers, d.Hidden, d.Intermediate, d.Heads, d.KVHeads, d.HeadDim, d.Vocab)
		fmt.Fprintf(w, "context       %d positions, rope_theta %g, tied embeddings %v, eos %v (generation_config.json %v)\n",
			d.Context, d.RopeTheta, d.Tied, d.EOSTokenIDs, d.GenerationConfig)
	}
	if d.Unsupported != "" {
		fmt.Fprintf(w, "unsupported   %s\n", d.Unsupported)
	} else {
		fmt.Fprintln(w, "loads         yes (models/decoder)")
	}
}
