package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/backends"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/inspect"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/tokenizer/bpe"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
	"github.com/ragforge/ragforge/models/xlmr"
	"github.com/spf13/cobra"
)

type modelsInitOptions struct {
	Arch, Size, Tokenizer, Out string
	Seed                       int64
	Classifier                 bool
	AddTokens                  []string
	Pooling                    string // bert bi-encoder: "cls" or "mean" ("" = mean)
	// TokenMatchHeads > 0 (t5): that many heads of the first encoder layer
	// start as token matchers (t5.Model.InitTokenMatch) with a self score
	// of TokenMatchScore and distance-0 bias −TokenMatchScore.
	TokenMatchHeads int
	TokenMatchScore float64
}

func newModelsInitCmd(g *globals) *cobra.Command {
	var o modelsInitOptions
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a randomly initialized T5, BERT, XLM-R or decoder (Qwen2/Llama/Qwen3) model in HF layout (config.json, model.safetensors, tokenizer files)",
		Long: `Write a randomly initialized model for training from scratch where no
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
under "ragforge_init".`,
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

func runModelsInit(_ context.Context, g *globals, o modelsInitOptions) error {
	info, err := modelsInit(g, o)
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

// tokenizerDir accepts a tokenizer file or a directory holding one.
func tokenizerDir(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		return path, nil
	}
	base := filepath.Base(path)
	switch {
	case strings.HasSuffix(base, ".model"), base == "vocab.txt", base == "tokenizer.json":
		if base != "spiece.model" && base != sentencepiece.XLMRFile && strings.HasSuffix(base, ".model") {
			// tokenizer.Load looks for spiece.model: stage a copy under that name.
			tmp, err := os.MkdirTemp("", "ragforge-tok-")
			if err != nil {
				return "", err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return "", err
			}
			return tmp, atomicfile.WriteBytes(filepath.Join(tmp, "spiece.model"), b, 0o644)
		}
		return filepath.Dir(path), nil
	}
	return "", fmt.Errorf("tokenizer %s: want spiece.model, *.model, vocab.txt, tokenizer.json or a directory", path)
}

func modelsInit(g *globals, o modelsInitOptions) (*inspect.Info, error) {
	if o.Out == "" || o.Tokenizer == "" || o.Arch == "" {
		return nil, fmt.Errorf("--arch, --tokenizer and --out are required")
	}
	tdir, err := tokenizerDir(o.Tokenizer)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(tdir)
	if err != nil {
		return nil, err
	}
	if o.Arch == xlmr.ModelType {
		if tok, err = xlmrTokenizer(tok, o.Tokenizer); err != nil {
			return nil, err
		}
	}
	var add []string
	for _, t := range o.AddTokens {
		if t = strings.TrimSpace(t); t != "" {
			add = append(add, t)
		}
	}
	if len(add) > 0 {
		tok.AddTokens(add)
	}
	be, err := backend.New(g.Backend)
	if err != nil {
		return nil, err
	}
	vocab := tok.Len()
	var st *hf.SentenceTransformer // a bi-encoder's pooling, written after the tokenizer
	var initMark map[string]any    // a structured init's settings, config.json's hf.InitKey
	if o.TokenMatchHeads != 0 && o.Arch != "t5" {
		return nil, fmt.Errorf("--token-match-heads %d: only for --arch t5", o.TokenMatchHeads)
	}
	if o.TokenMatchHeads < 0 {
		return nil, fmt.Errorf("--token-match-heads %d: want >= 0", o.TokenMatchHeads)
	}
	if o.TokenMatchScore <= 0 {
		return nil, fmt.Errorf("--token-match-score %v: want > 0", o.TokenMatchScore)
	}
	switch o.Arch {
	case "t5":
		initMark, err = initT5(be, o, vocab)
	case "bert", xlmr.ModelType:
		st, err = initBERT(be, o, vocab)
	default:
		if _, ok := decoder.Families[o.Arch]; ok {
			err = initDecoder(be, o, tok)
			break
		}
		err = fmt.Errorf("--arch %q: want t5, bert, %s or a decoder (%s)", o.Arch, xlmr.ModelType, strings.Join(decoder.ModelTypes(), ", "))
	}
	if err != nil {
		return nil, err
	}
	if err := tok.Save(o.Out); err != nil {
		return nil, fmt.Errorf("save tokenizer to %s: %w", o.Out, err)
	}
	if err := hf.MarkRandomInit(o.Out); err != nil {
		return nil, err
	}
	if initMark != nil {
		if err := hf.AddConfigKey(o.Out, hf.InitKey, initMark); err != nil {
			return nil, fmt.Errorf("models init: %w", err)
		}
	}
	if st != nil {
		if err := hf.WriteSentenceTransformer(o.Out, *st); err != nil {
			return nil, err
		}
	}
	return inspect.Dir(o.Out)
}

// sizedConfig is an architecture's tiny, mini or small config (--size) for
// a vocabulary of vocab tokens.
func sizedConfig[C any](size string, vocab int, tiny, mini, small func(int) C) (C, error) {
	switch size {
	case "tiny":
		return tiny(vocab), nil
	case "mini":
		return mini(vocab), nil
	case "small":
		return small(vocab), nil
	}
	var zero C
	return zero, fmt.Errorf("--size %q: want tiny, mini or small", size)
}

// initT5 saves a randomly initialised T5 of o.Size to o.Out and returns the
// structured init's settings for config.json (nil for HF's plain init).
func initT5(be backends.Backend, o modelsInitOptions, vocab int) (map[string]any, error) {
	if o.Pooling != "" {
		return nil, fmt.Errorf("--pooling %q: only a bert bi-encoder has a pooling", o.Pooling)
	}
	cfg, err := sizedConfig(o.Size, vocab, t5.TinyConfig, t5.MiniConfig, t5.SmallConfig)
	if err != nil {
		return nil, err
	}
	m, err := t5.NewRandom(be, cfg, o.Seed)
	if err != nil {
		return nil, err
	}
	var mark map[string]any
	if o.TokenMatchHeads > 0 {
		if err := m.InitTokenMatch(o.TokenMatchHeads, o.TokenMatchScore, -o.TokenMatchScore); err != nil {
			return nil, fmt.Errorf("--token-match-heads %d: %w", o.TokenMatchHeads, err)
		}
		mark = map[string]any{"token_match_heads": o.TokenMatchHeads, "token_match_score": o.TokenMatchScore}
	}
	return mark, m.Save(o.Out)
}

// initDecoder saves a randomly initialised decoder-only LM (--arch llama,
// qwen2 or qwen3; --size tiny only: decoder.TinyConfig) to o.Out, its
// bos/eos/pad ids the byte-level BPE tokenizer's (tokenizer_config.json's
// bos_token, eos_token, pad_token), so generation stops where the chat
// template ends an assistant turn (Qwen's <|im_end|>).
func initDecoder(be backends.Backend, o modelsInitOptions, tok tokenizer.Tokenizer) error {
	if o.Pooling != "" || o.Classifier {
		return fmt.Errorf("--pooling/--classifier: only for a bert encoder, not --arch %s", o.Arch)
	}
	bt, ok := tok.(*bpe.Tokenizer)
	if !ok {
		return fmt.Errorf("--tokenizer %s: --arch %s needs a byte-level BPE tokenizer.json (Qwen / Llama 3 style), got %T", o.Tokenizer, o.Arch, tok)
	}
	if o.Size != "tiny" {
		return fmt.Errorf("--size %q: want tiny for --arch %s (real sizes come from a checkpoint's config.json)", o.Size, o.Arch)
	}
	cfg, err := decoder.TinyConfig(o.Arch, tok.Len())
	if err != nil {
		return err
	}
	cfg.BOSTokenID, cfg.PadTokenID = bt.BOSID(), bt.PadID()
	if eos := bt.EOSID(); eos >= 0 {
		cfg.EOSTokenIDs = []int{eos}
	}
	m, err := decoder.NewRandom(be, cfg, o.Seed)
	if err != nil {
		return err
	}
	return m.Save(o.Out)
}

// initBERT saves a randomly initialised BERT of o.Size to o.Out (a
// cross-encoder with --classifier) and returns a bi-encoder's
// sentence-transformers pooling (nil for a cross-encoder).
func initBERT(be backends.Backend, o modelsInitOptions, vocab int) (*hf.SentenceTransformer, error) {
	arch := bert.BERT
	var cfg bert.Config
	var err error
	if o.Arch == xlmr.ModelType {
		arch = xlmr.Arch
		if o.Classifier {
			return nil, fmt.Errorf("--classifier: only for --arch bert (XLMRobertaForSequenceClassification's head is not BERT's)")
		}
		switch o.Size {
		case "tiny":
			cfg = xlmr.TinyConfig(vocab)
		case "base":
			cfg = xlmr.BaseConfig(vocab)
		case "large":
			cfg = xlmr.LargeConfig(vocab)
		default:
			return nil, fmt.Errorf("--size %q: want tiny, base or large for --arch %s", o.Size, xlmr.ModelType)
		}
	} else if cfg, err = sizedConfig(o.Size, vocab, bert.TinyConfig, bert.MiniConfig, bert.SmallConfig); err != nil {
		return nil, err
	}
	if o.Classifier {
		cfg.NumLabels = 1
	}
	pool := o.Pooling
	switch {
	case pool != "" && o.Classifier:
		return nil, fmt.Errorf("--pooling %q: a --classifier cross-encoder scores [CLS] and has no pooling", pool)
	case pool == "":
		pool = string(bert.PoolMean)
	case !bert.Pooling(pool).Valid():
		if _, err := bert.ParsePooling(pool); errors.Is(err, bert.ErrDenseOnly) {
			return nil, fmt.Errorf("--pooling: %w", err)
		}
		return nil, fmt.Errorf("--pooling %q: want mean or cls", pool)
	}
	m, err := bert.NewRandomFor(be, cfg, arch, o.Classifier, o.Seed)
	if err != nil {
		return nil, err
	}
	if err := m.Save(o.Out); err != nil {
		return nil, err
	}
	if o.Classifier {
		return nil, nil
	}
	return &hf.SentenceTransformer{Dim: cfg.HiddenSize, Pooling: pool, Normalize: true, MaxSeqLength: m.MaxLength()}, nil
}

// xlmrTokenizer gives an XLM-R model XLMRobertaTokenizer's ids (<s> 0,
// <pad> 1, </s> 2, <unk> 3, pieces after them): a tokenizer that has them
// already (sentencepiece.bpe.model, an XLM-R tokenizer.json) is kept; a T5
// SentencePiece model without added tokens is re-laid out as an XLM-R
// sentencepiece.bpe.model (its own specials dropped, <unk> <s> </s> first)
// and read as one. Anything else is refused.
func xlmrTokenizer(tok tokenizer.Tokenizer, path string) (tokenizer.Tokenizer, error) {
	bos, _ := tok.TokenToID("<s>")
	eos, _ := tok.TokenToID("</s>")
	if bos == 0 && tok.PadID() == 1 && eos == 2 {
		return tok, nil
	}
	t, ok := tok.(*sentencepiece.T5)
	if !ok || len(t.Added()) > 0 {
		return nil, fmt.Errorf("--tokenizer %s: --arch %s needs XLMRobertaTokenizer's ids or a SentencePiece model without added tokens (sentencepiece.bpe.model or spiece.model)", path, xlmr.ModelType)
	}
	m, err := sentencepiece.XLMRLayout(t.SentencePiece())
	if err != nil {
		return nil, fmt.Errorf("--tokenizer %s: as XLM-R's: %w", path, err)
	}
	dir, err := os.MkdirTemp("", "ragforge-xlmr-tok-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := atomicfile.WriteBytes(filepath.Join(dir, sentencepiece.XLMRFile), m.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return tokenizer.Load(dir)
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
