// Package xlmr is the XLM-RoBERTa encoder (Conneau et al. 2020,
// "Unsupervised Cross-lingual Representation Learning at Scale"), the
// backbone of bge-m3 and multilingual-e5, in HF XLMRobertaModel numerics and
// checkpoint names. XLM-R is BertModel with three differences, which are all
// this package holds; the encoder stack itself is models/bert's:
//
//   - position ids come from the input ids, counted from padding_idx+1
//     (HF create_position_ids_from_input_ids): pads get position
//     pad_token_id, the k-th real token pad_token_id+k;
//   - one token type (type_vocab_size 1);
//   - LayerNorm eps 1e-5 (read from config.json like every other size).
//
// Load, NewRandom and LoadWithTokenizer return a *bert.Model whose Arch is
// Arch, so everything built on bert.Model (retrieval/encode, train/retriever,
// GradCache, export) takes an XLM-R directory unchanged.
package xlmr

import (
	"encoding/json"
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/nn"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// ModelType is config.json's model_type for XLM-RoBERTa.
const ModelType = "xlm-roberta"

// Arch is XLM-RoBERTa as a BERT-family architecture: positions from the
// ids, "roberta." prefix of XLMRobertaFor* task models, the MLM head
// (lm_head.*) and buffers skipped. XLMRobertaForSequenceClassification's head
// (classifier.dense + classifier.out_proj on <s>, no pooler) is not BERT's,
// so it is not accepted.
var Arch = bert.Arch{
	ModelType: ModelType, Architecture: "XLMRobertaModel", Prefix: "roberta.",
	Ignored:       []string{"lm_head.", "embeddings.position_ids", "embeddings.token_type_ids"},
	PositionIDs:   PositionIDs,
	FirstPosition: func(c bert.Config) int { return c.PadTokenID + 1 },
}

// PositionIDs is HF create_position_ids_from_input_ids with padding_idx =
// c.PadTokenID: m = (ids != pad); pos = cumsum(m, axis 1)·m + pad, ids
// [B, L] → Int32 [B, L]. It depends on the ids, not on the attention mask, so
// a left-padded row's first real token still gets pad+1.
//
// The running sum is a product with an upper-triangular ones matrix [L, L]
// (exact in float32 for L < 2²⁴) rather than CumSum, whose reduce-window
// lowering the pure-Go backend lacks.
func PositionIDs(c bert.Config, ids *graph.Node) *graph.Node {
	g := ids.Graph()
	length := ids.Shape().Dimensions[1]
	pad := graph.Scalar(g, ids.DType(), c.PadTokenID)
	real := graph.ConvertDType(graph.NotEqual(ids, pad), dtypes.Float32) // [B, L]
	row := graph.Iota(g, shapes.Make(dtypes.Int32, length, length), 0)
	col := graph.Iota(g, shapes.Make(dtypes.Int32, length, length), 1)
	upper := graph.ConvertDType(graph.LessOrEqual(row, col), dtypes.Float32) // [t', t] = t' ≤ t
	count := graph.DotGeneral(real, []int{1}, nil, upper, []int{0}, nil)     // [B, L]: Σ_{t'≤t} m[t']
	pos := graph.AddScalar(graph.Mul(count, real), float64(c.PadTokenID))
	return graph.ConvertDType(pos, dtypes.Int32)
}

// DefaultConfig is HF XLMRobertaConfig as xlm-roberta-base ships it
// (hidden 768, 12 layers, 12 heads, intermediate 3072, vocab 250002,
// max_position_embeddings 514, type_vocab_size 1, layer_norm_eps 1e-5,
// pad/bos/eos 1/0/2) with the given vocabulary size.
func DefaultConfig(vocab int) bert.Config {
	c := bert.DefaultConfig(vocab)
	c.ModelType, c.Architectures = ModelType, []string{Arch.Architecture}
	c.MaxPositionEmbeddings, c.TypeVocabSize, c.LayerNormEps, c.PadTokenID = 514, 1, 1e-5, 1
	c.Extra = hf.Fields{{Key: "bos_token_id", Value: json.RawMessage("0")}, {Key: "eos_token_id", Value: json.RawMessage("2")}}
	return c
}

func sized(vocab, hidden, layers, heads, inter, maxPos int) bert.Config {
	c := DefaultConfig(vocab)
	c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize = hidden, layers, heads, inter
	c.MaxPositionEmbeddings = maxPos
	return c
}

// TinyConfig is the xlmr-tiny fixture's shape: hidden 64, 2 layers, 4
// heads, intermediate 128, max_position_embeddings 66 (64 tokens), with HF's
// initializer_range 0.02.
func TinyConfig(vocab int) bert.Config { return sized(vocab, 64, 2, 4, 128, 66) }

// BaseConfig is xlm-roberta-base / multilingual-e5-base: hidden 768, 12
// layers, 12 heads, intermediate 3072, 512 tokens.
func BaseConfig(vocab int) bert.Config { return sized(vocab, 768, 12, 12, 3072, 514) }

// LargeConfig is xlm-roberta-large / multilingual-e5-large: hidden 1024, 24
// layers, 16 heads, intermediate 4096, 512 tokens.
func LargeConfig(vocab int) bert.Config { return sized(vocab, 1024, 24, 16, 4096, 514) }

// BGEM3Config is BAAI/bge-m3's encoder: LargeConfig with 8192 tokens
// (max_position_embeddings 8194) and vocab 250002.
func BGEM3Config() bert.Config { return sized(250002, 1024, 24, 16, 4096, 8194) }

// LoadConfig reads and validates dir/config.json as an XLM-RoBERTa config
// (model_type "xlm-roberta"); errors name the file and field.
func LoadConfig(dir string) (bert.Config, error) { return bert.LoadConfigFor(dir, Arch) }

// Load reads an HF XLM-RoBERTa directory (config.json, model.safetensors or
// its shard index) with XLMRobertaModel names, "roberta."-prefixed task
// names accepted; see bert.Load for what is checked and how errors read.
func Load(be backends.Backend, dir string) (*bert.Model, error) { return bert.LoadFor(be, dir, Arch) }

// NewRandom is HF's XLMRobertaPreTrainedModel init (bert.NewRandom's, the
// padding_idx rows of word and position embeddings zero) for cfg with seed.
func NewRandom(be backends.Backend, cfg bert.Config, seed int64) (*bert.Model, error) {
	return bert.NewRandomFor(be, cfg, Arch, false, seed)
}

// LoadWithTokenizer is Load on the named backend ("" = default) plus the
// directory's tokenizer (tokenizer.LoadFor: sentencepiece.bpe.model with
// XLMRobertaTokenizer's fairseq ids, or tokenizer.json). A tokenizer with
// more ids than vocab_size is refused, naming its file.
func LoadWithTokenizer(dir, backendName string) (*bert.Model, tokenizer.Tokenizer, error) {
	return LoadWithTokenizerAs(dir, backendName, nn.Float32)
}

// LoadWithTokenizerAs is LoadWithTokenizer holding the weights as dt
// (bert.LoadAs): nn.Auto for inference keeps a BF16 checkpoint in bfloat16.
func LoadWithTokenizerAs(dir, backendName string, dt nn.DType) (*bert.Model, tokenizer.Tokenizer, error) {
	be, err := backend.New(backendName)
	if err != nil {
		return nil, nil, err
	}
	m, err := bert.LoadAs(be, dir, Arch, dt)
	if err != nil {
		return nil, nil, fmt.Errorf("load xlm-roberta %s: %w", dir, err)
	}
	tok, err := tokenizer.LoadFor(dir, m.Config.VocabSize)
	if err != nil {
		return nil, nil, fmt.Errorf("load xlm-roberta %s: %w", dir, err)
	}
	if tok.PadID() != m.Config.PadTokenID {
		return nil, nil, fmt.Errorf("load xlm-roberta %s: tokenizer pads with id %d but config.json pad_token_id is %d: positions are counted from the pad id, so they must agree",
			dir, tok.PadID(), m.Config.PadTokenID)
	}
	return m, tok, nil
}
