// Package modelinit writes randomly initialised model directories in HF
// layout (T5, BERT, XLM-R, the decoder families) with their tokenizer:
// what `ragforge models init` does, callable from Go. Sizes are the
// architectures' presets (t5.TinyConfig…, bert.TinyConfig…,
// xlmr.TinyConfig/BaseConfig/LargeConfig, decoder.TinyConfig).
package modelinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/gomlx/backends"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/inspect"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/tokenizer/bpe"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
	"github.com/ragforge/ragforge/models/xlmr"
)

// Options are `ragforge models init`'s settings; errors name their flags.
type Options struct {
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
	// Backend is the GoMLX backend the weights are drawn on ("" = default).
	Backend string
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

// Init writes a randomly initialised model directory in HF layout at o.Out
// (`ragforge models init`): the architecture at its size preset with the
// tokenizer (plus AddTokens) sized into its vocabulary, config.json marked
// hf.RandomInitKey (and hf.InitKey for a structured init), a bi-encoder's
// sentence-transformers pooling files, and returns its inspect.Info. Errors
// name the option (by its flag) that makes no sense.
func Init(o Options) (*inspect.Info, error) {
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
	be, err := backend.New(o.Backend)
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
func initT5(be backends.Backend, o Options, vocab int) (map[string]any, error) {
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
func initDecoder(be backends.Backend, o Options, tok tokenizer.Tokenizer) error {
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
func initBERT(be backends.Backend, o Options, vocab int) (*hf.SentenceTransformer, error) {
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
