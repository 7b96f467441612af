package main

import (
	"context"
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// loadT5 loads a T5 model and its tokenizer from an HF directory, the
// weights held as dt (--dtype).
func loadT5(g *globals, dir string, dt nn.DType) (*t5.Model, tokenizer.Tokenizer, error) {
	return t5.LoadWithTokenizerAs(dir, g.Backend, dt)
}

// inferGenerateOptions are the flags of `infer generate`.
type inferGenerateOptions struct {
	Model, Input   string
	Generate       t5.GenerateOptions
	MaxInputTokens int
	DType          dtypeFlag
}

// Bounds of `infer generate` and `infer score`, checked before any model
// work. T5's relative position buckets accept any length, but encoder
// memory grows with the square of the input and the decoder's key/value
// cache with --max-new-tokens (issue 30: 10,000,000 new tokens reached
// 21 GB). 512 is the context T5 and Flan-T5 were trained with (HF
// T5Tokenizer model_max_length).
const (
	defaultMaxInputTokens = 512
	maxNewTokensLimit     = 4096
)

// checkInputTokens refuses a text of n tokens over limit, naming the flag.
func checkInputTokens(what string, n, limit int) error {
	if n > limit {
		return fmt.Errorf("%s is %d tokens, over the limit of %d (--max-input-tokens; the model's memory grows with the square of it)", what, n, limit)
	}
	return nil
}

func newGenerateCmd(g *globals) *cobra.Command {
	var o inferGenerateOptions
	cmd := &cobra.Command{
		Use:     "generate",
		Short:   "Generate text with a T5 model (greedy, or sampled with --sample)",
		Example: `  ragforge infer generate --model work/t5-tiny --input "Which stain shows amyloid?"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInferGenerate(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "T5 model directory in HF layout (required)")
	addDTypeFlag(cmd, &o.DType)
	f.StringVar(&o.Input, "input", "", "input text")
	f.IntVar(&o.Generate.MaxNewTokens, "max-new-tokens", 32, fmt.Sprintf("maximum number of generated tokens (1..%d)", maxNewTokensLimit))
	f.BoolVar(&o.Generate.DoSample, "sample", false, "sample instead of greedy decoding")
	f.Float64Var(&o.Generate.Temperature, "temperature", 0.7, "sampling temperature (> 0)")
	f.Float64Var(&o.Generate.TopP, "top-p", 1.0, "nucleus sampling probability mass, in (0, 1]")
	f.Int64Var(&o.Generate.Seed, "seed", 0, "sampling seed")
	f.IntVar(&o.MaxInputTokens, "max-input-tokens", defaultMaxInputTokens, "longest --input in tokens; a longer one is an error")
	minInt(f, 1, "max-new-tokens", "max-input-tokens")
	cmd.MarkFlagRequired("model")
	return cmd
}

// validate checks the sampling flags before the model loads.
func (o inferGenerateOptions) validate() error {
	if o.Generate.MaxNewTokens > maxNewTokensLimit {
		return fmt.Errorf("--max-new-tokens %d: over the limit of %d (the decoder's key/value cache holds one position per new token)", o.Generate.MaxNewTokens, maxNewTokensLimit)
	}
	if !(o.Generate.TopP > 0 && o.Generate.TopP <= 1) {
		return fmt.Errorf("--top-p %v: want a probability mass in (0, 1]", o.Generate.TopP)
	}
	if o.Generate.DoSample && !(o.Generate.Temperature > 0) {
		return fmt.Errorf("--temperature %v: must be positive", o.Generate.Temperature)
	}
	return nil
}

func runInferGenerate(_ context.Context, g *globals, o inferGenerateOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	m, tok, err := loadT5(g, o.Model, o.DType.get())
	if err != nil {
		return err
	}
	ids := tok.Encode(o.Input, true)
	if err := checkInputTokens("--input", len(ids), o.MaxInputTokens); err != nil {
		return err
	}
	out, err := m.Generate([][]int{ids}, [][]int{ones(len(ids))}, o.Generate)
	if err != nil {
		return err
	}
	text := tok.Decode(out[0], true)
	if g.JSON {
		return printJSON(g.Out, map[string]any{"text": text, "ids": out[0]})
	}
	fmt.Fprintln(g.Out, text)
	return nil
}

// ones is the attention mask of n real tokens.
func ones(n int) []int {
	mask := make([]int, n)
	for i := range mask {
		mask[i] = 1
	}
	return mask
}

// inferEmbedOptions are the flags of `infer embed`.
type inferEmbedOptions struct {
	Model, Input string
	InputType    string // document | query
	Encoder      encoderOptions
	DType        dtypeFlag
}

func newEmbedCmd(g *globals) *cobra.Command {
	var o inferEmbedOptions
	cmd := &cobra.Command{
		Use:   "embed",
		Short: "Embed text with a BERT encoder as the server's /v1/embeddings does (truncation, pooling, prefixes, L2 normalization)",
		Long: `Embeds --input with the BERT bi-encoder the way ragforge serve's
/v1/embeddings and the dense retrievers do: the text (after --passage-prefix,
or --query-prefix with --input-type query) is tokenized as [CLS] text [SEP]
and truncated to --max-length tokens (clamped to the model's
max_position_embeddings), pooled (--pooling) and, unless --normalize=false,
L2-normalized. Every setting defaults to the model directory's own
(sentence-transformers files: max_seq_length, the "query" or
"document"/"passage"/"corpus" prompt, 1_Pooling, 2_Normalize).`,
		Example: `  ragforge infer embed --model work/bert-tiny --input "HER2 scoring" --pooling cls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInferEmbed(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "BERT model directory in HF layout (required)")
	f.StringVar(&o.Input, "input", "", "input text (required)")
	f.StringVar(&o.InputType, "input-type", "document", "document (adds --passage-prefix) | query (adds --query-prefix), as /v1/embeddings' input_type")
	o.Encoder.add(cmd)
	addDTypeFlag(cmd, &o.DType)
	cmd.MarkFlagRequired("model")
	return cmd
}

func runInferEmbed(_ context.Context, g *globals, o inferEmbedOptions) error {
	if o.Input == "" {
		return fmt.Errorf("--input is required: the text to embed")
	}
	if err := o.Encoder.validate(); err != nil {
		return err
	}
	// The BERT family only (bert, xlm-roberta): encode.Arch names any other.
	if _, err := encode.Arch(o.Model); err != nil {
		return fmt.Errorf("infer embed: %w", err)
	}
	if err := o.Encoder.resolve(o.Model); err != nil {
		return err
	}
	enc, err := encode.LoadBERTAs(o.Model, g.Backend, o.Encoder.Pooling, o.DType.get())
	if err != nil {
		return fmt.Errorf("--pooling/--model: %w", err)
	}
	o.Encoder.apply(enc, g.Err)
	var vecs [][]float32
	switch o.InputType {
	case "document":
		vecs, err = enc.EncodeDocs([]string{o.Input})
	case "query":
		vecs, err = enc.EncodeQueries([]string{o.Input})
	default:
		return fmt.Errorf("--input-type %q: want document or query", o.InputType)
	}
	if err != nil {
		return err
	}
	prompt := enc.DocInstruction
	if o.InputType == "query" {
		prompt = enc.QueryInstruction
	}
	ids, err := enc.Tokenize([]string{prompt + o.Input}) // as encoded: the prompt counts against the limit
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, map[string]any{"dim": len(vecs[0]), "embedding": vecs[0]})
	}
	fmt.Fprintf(g.Err, "%d tokens (limit %d)\n", len(ids[0]), enc.MaxTokens())
	fmt.Fprintf(g.Out, "dim %d: %v\n", len(vecs[0]), vecs[0])
	return nil
}

// scoreResult is the teacher-forced likelihood of a target.
type scoreResult struct {
	Tokens     int       `json:"tokens"`
	MeanNLL    float64   `json:"mean_nll"`   // nats per target token
	Perplexity float64   `json:"perplexity"` // exp(mean_nll)
	LogProbs   []float32 `json:"logprobs"`
}

// inferScoreOptions are the flags of `infer score`.
type inferScoreOptions struct {
	Model, Input, Target string
	MaxInputTokens       int
	DType                dtypeFlag
}

func newScoreCmd(g *globals) *cobra.Command {
	var o inferScoreOptions
	cmd := &cobra.Command{
		Use:   "score",
		Short: "Teacher-forced mean negative log-likelihood and perplexity of --target given --input (T5)",
		Long: `Scores target (with EOS appended, as T5 labels are) given input, with
teacher forcing: mean NLL in nats per target token and perplexity = exp(mean
NLL), the quantity RAG²'s perplexity labels compare.`,
		Example: `  ragforge infer score --model work/t5-tiny --input "question: ..." --target "answer ..."`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInferScore(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "T5 model directory in HF layout (required)")
	addDTypeFlag(cmd, &o.DType)
	f.StringVar(&o.Input, "input", "", "encoder input text")
	f.StringVar(&o.Target, "target", "", "target text to score")
	f.IntVar(&o.MaxInputTokens, "max-input-tokens", defaultMaxInputTokens, "longest --input and --target in tokens; a longer one is an error")
	minInt(f, 1, "max-input-tokens")
	cmd.MarkFlagRequired("model")
	return cmd
}

func runInferScore(_ context.Context, g *globals, o inferScoreOptions) error {
	m, tok, err := loadT5(g, o.Model, o.DType.get())
	if err != nil {
		return err
	}
	ids := tok.Encode(o.Input, true)
	labels := tok.Encode(o.Target, true)
	if err := checkInputTokens("--input", len(ids), o.MaxInputTokens); err != nil {
		return err
	}
	if err := checkInputTokens("--target", len(labels), o.MaxInputTokens); err != nil {
		return err
	}
	lps, err := m.TokenLogProbs([][]int{ids}, [][]int{ones(len(ids))}, [][]int{labels})
	if err != nil {
		return err
	}
	var sum float64
	for _, lp := range lps[0] {
		sum -= float64(lp)
	}
	res := scoreResult{Tokens: len(lps[0]), LogProbs: lps[0]}
	if res.Tokens > 0 {
		res.MeanNLL = sum / float64(res.Tokens)
		res.Perplexity = math.Exp(res.MeanNLL)
	}
	if g.JSON {
		return printJSON(g.Out, res)
	}
	fmt.Fprintf(g.Out, "tokens %d  mean NLL %.4f nats  perplexity %.4f\n", res.Tokens, res.MeanNLL, res.Perplexity)
	return nil
}
