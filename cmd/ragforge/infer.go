package main

import (
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/infer/retrieve"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
)

func init() { register(newInferCmd) }

func newInferCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "infer", Short: "Run a model once: generate, embed, score"}
	cmd.AddCommand(newGenerateCmd(g), newEmbedCmd(g), newScoreCmd(g))
	return cmd
}

// loadT5 loads a T5 model and its tokenizer from an HF directory.
func loadT5(g *globals, dir string) (*t5.Model, tokenizer.Tokenizer, error) {
	be, err := backend.New(g.Backend)
	if err != nil {
		return nil, nil, err
	}
	m, err := t5.Load(be, dir)
	if err != nil {
		return nil, nil, err
	}
	tok, err := tokenizer.LoadFor(dir, m.Config.VocabSize)
	if err != nil {
		return nil, nil, err
	}
	return m, tok, nil
}

func newGenerateCmd(g *globals) *cobra.Command {
	var (
		model, input string
		opt          t5.GenerateOptions
	)
	cmd := &cobra.Command{
		Use:     "generate",
		Short:   "Generate text with a T5 model (greedy, or sampled with --sample)",
		Example: `  ragforge infer generate --model work/t5-tiny --input "Which stain shows amyloid?"`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, tok, err := loadT5(g, model)
			if err != nil {
				return err
			}
			ids := tok.Encode(input, true)
			mask := make([]int, len(ids))
			for i := range mask {
				mask[i] = 1
			}
			out, err := m.Generate([][]int{ids}, [][]int{mask}, opt)
			if err != nil {
				return err
			}
			text := tok.Decode(out[0], true)
			if g.JSON {
				return printJSON(g.Out, map[string]any{"text": text, "ids": out[0]})
			}
			fmt.Fprintln(g.Out, text)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&model, "model", "", "T5 model directory in HF layout (required)")
	f.StringVar(&input, "input", "", "input text")
	f.IntVar(&opt.MaxNewTokens, "max-new-tokens", 32, "maximum number of generated tokens")
	f.BoolVar(&opt.DoSample, "sample", false, "sample instead of greedy decoding")
	f.Float64Var(&opt.Temperature, "temperature", 0.7, "sampling temperature")
	f.Float64Var(&opt.TopP, "top-p", 1.0, "nucleus sampling probability mass")
	f.Int64Var(&opt.Seed, "seed", 0, "sampling seed")
	cmd.MarkFlagRequired("model")
	return cmd
}

func newEmbedCmd(g *globals) *cobra.Command {
	var (
		model, input, pooling, inputType string
		opt                              encoderOptions
	)
	cmd := &cobra.Command{
		Use:   "embed",
		Short: "Embed text with a BERT encoder as the server's /v1/embeddings does (truncation, pooling, prefixes, L2 normalization)",
		Long: `Embeds --input with the BERT bi-encoder the way ragforge serve's
/v1/embeddings and the dense retrievers do: the text (after --passage-prefix,
or --query-prefix with --input-type query) is tokenized as [CLS] text [SEP]
and truncated to --max-length tokens (clamped to the model's
max_position_embeddings), pooled (--pooling) and, unless --normalize=false,
L2-normalized.`,
		Example: `  ragforge infer embed --model work/bert-tiny --input "HER2 scoring" --pooling cls`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if input == "" {
				return fmt.Errorf("--input is required: the text to embed")
			}
			if err := opt.validate(); err != nil {
				return err
			}
			mt, err := hf.ModelType(model)
			if err != nil {
				return err
			}
			if mt != "bert" {
				return fmt.Errorf("infer embed: %s is a %q model; embeddings need a BERT encoder", model, mt)
			}
			enc, err := retrieve.LoadBERTEncoder(model, g.Backend, pooling)
			if err != nil {
				return fmt.Errorf("--pooling/--model: %w", err)
			}
			opt.apply(enc)
			var vecs [][]float32
			switch inputType {
			case "document":
				vecs, err = enc.EncodeDocs([]string{input})
			case "query":
				vecs, err = enc.EncodeQueries([]string{input})
			default:
				return fmt.Errorf("--input-type %q: want document or query", inputType)
			}
			if err != nil {
				return err
			}
			ids, err := enc.Tokenize([]string{input})
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.Out, map[string]any{"dim": len(vecs[0]), "embedding": vecs[0]})
			}
			fmt.Fprintf(g.Err, "%d tokens (limit %d)\n", len(ids[0]), enc.MaxTokens())
			fmt.Fprintf(g.Out, "dim %d: %v\n", len(vecs[0]), vecs[0])
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&model, "model", "", "BERT model directory in HF layout (required)")
	f.StringVar(&input, "input", "", "input text (required)")
	f.StringVar(&pooling, "pooling", "", "pooling: cls (BGE) | mean (sentence-transformers mean pooling) (default: the model's 1_Pooling/config.json, else cls)")
	f.StringVar(&inputType, "input-type", "document", "document (adds --passage-prefix) | query (adds --query-prefix), as /v1/embeddings' input_type")
	opt.add(cmd)
	cmd.MarkFlagRequired("model")
	return cmd
}

// scoreResult is the teacher-forced likelihood of a target.
type scoreResult struct {
	Tokens     int       `json:"tokens"`
	MeanNLL    float64   `json:"mean_nll"`   // nats per target token
	Perplexity float64   `json:"perplexity"` // exp(mean_nll)
	LogProbs   []float32 `json:"logprobs"`
}

func newScoreCmd(g *globals) *cobra.Command {
	var model, input, target string
	cmd := &cobra.Command{
		Use:   "score",
		Short: "Teacher-forced mean negative log-likelihood and perplexity of --target given --input (T5)",
		Long: `Scores target (with EOS appended, as T5 labels are) given input, with
teacher forcing: mean NLL in nats per target token and perplexity = exp(mean
NLL), the quantity RAG²'s perplexity labels compare.`,
		Example: `  ragforge infer score --model work/t5-tiny --input "question: ..." --target "answer ..."`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, tok, err := loadT5(g, model)
			if err != nil {
				return err
			}
			ids := tok.Encode(input, true)
			mask := make([]int, len(ids))
			for i := range mask {
				mask[i] = 1
			}
			labels := tok.Encode(target, true)
			lps, err := m.TokenLogProbs([][]int{ids}, [][]int{mask}, [][]int{labels})
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
		},
	}
	f := cmd.Flags()
	f.StringVar(&model, "model", "", "T5 model directory in HF layout (required)")
	f.StringVar(&input, "input", "", "encoder input text")
	f.StringVar(&target, "target", "", "target text to score")
	cmd.MarkFlagRequired("model")
	return cmd
}
