package bert

import (
	"github.com/gomlx/gomlx/pkg/core/graph"
)

// Arch is what sets a BERT-family checkpoint apart from BertModel while the
// encoder stack stays the same (embeddings LayerNorm, post-LN self-attention
// and erf-GELU blocks, tanh pooler; EncoderGraph): its config.json
// model_type, its HF class and prefix names, and its position ids. BERT is
// this package's own; models/xlmr supplies XLM-RoBERTa's, so one Model type
// (and every trainer and encoder built on it) serves both.
type Arch struct {
	ModelType    string   // config.json model_type: "bert", "xlm-roberta"
	Architecture string   // architectures[0] written for a bare encoder: "BertModel"
	Prefix       string   // task-model prefix stripped on load: "bert.", "roberta."
	Ignored      []string // tensor-name prefixes Load skips: pre-training heads, buffers
	// Classifier reports whether the BertForSequenceClassification head
	// (classifier.{weight,bias} over the pooler) belongs to this family.
	Classifier bool
	// PositionIDs maps ids [B, L] (any integer dtype) to Int32 position ids
	// [B, L] for a model of config c; nil means 0..L-1 in every row (BERT's
	// absolute positions).
	PositionIDs func(c Config, ids *graph.Node) *graph.Node
	// FirstPosition is the position id of a row's first token (BERT 0; XLM-R
	// padding_idx+1), so rows hold at most max_position_embeddings −
	// FirstPosition tokens. nil means 0.
	FirstPosition func(c Config) int
}

// BERT is HF BertModel: positions 0..L-1, "bert." prefix, MLM/NSP heads
// skipped, the sequence-classification head allowed.
var BERT = Arch{
	ModelType: "bert", Architecture: "BertModel", Prefix: Prefix,
	Ignored:    []string{"cls.predictions.", "cls.seq_relationship.", "embeddings.position_ids"},
	Classifier: true,
}

// MaxLength is the longest row (special tokens included) a model of config c
// embeds: max_position_embeddings less the first position id.
func (a Arch) MaxLength(c Config) int {
	if a.FirstPosition == nil {
		return c.MaxPositionEmbeddings
	}
	return c.MaxPositionEmbeddings - a.FirstPosition(c)
}

// MaxLength is the longest row (special tokens included) m embeds: 512 for
// bge-large, 8192 for bge-m3 (max_position_embeddings 8194, positions from 2).
func (m *Model) MaxLength() int { return m.Arch.MaxLength(m.Config) }

// ModelType is m's config.json model_type ("bert" when the config leaves it out).
func (m *Model) ModelType() string { return m.Arch.ModelType }
