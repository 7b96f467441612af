// Package selflearn runs SL-HyDE's self-learning rounds (Li et al.,
// "SL-HyDE: Self-Learning Hypothetical Document Embeddings for Medical
// Information Retrieval"; equation numbers are the paper's) on an unlabeled,
// chunked corpus: pseudo-queries (Eq. 2), L hypothetical-document candidates
// (Eq. 3), generator selection by the rank of the true chunk (Eq. 4–5),
// generator fine-tuning on the selected pairs (Eq. 6) with SFT JSONL export,
// training triplets, hard negatives (Eq. 7), retriever training with
// InfoNCE (Eq. 8, train/retriever) and evaluation of BM25, the BM25 + dense
// hybrid, the dense retriever, HyDE, SL-HyDE and the two ablations after
// every round.
//
// Every step stores its per-item results in the run store (data/tracker items)
// and its files under Config.WorkDir, so an interrupted run resumes at the
// step and item where it stopped; every random choice is seeded by
// (Config.Seed, round, item key), so a resumed run ends with the same
// metrics as an uninterrupted one.
package selflearn

import (
	"fmt"
	"math"
	"reflect"

	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/hyde"
	"github.com/ragforge/ragforge/train/lora"
)

// Config holds a self-learning run's settings; start from DefaultConfig.
type Config struct {
	// WorkDir holds run.json (the run id), the per-round files
	// (round-<t>/: corpus vectors, SFT JSONL, triplets JSONL, the tuned
	// generator and retriever). Required.
	WorkDir string
	// ResumeRunID attaches to an existing run (id or unique prefix) instead
	// of WorkDir/run.json's.
	ResumeRunID string `json:"-"`

	// Generator is the generator spec: "ict", "t5:<dir>", "hf:<dir>",
	// "qwen2:<dir>", "llama:<dir>", "qwen3:<dir>" or "openai:<url>[#model]"
	// (generate.ParseGeneratorSpec), or a comma-separated list of openai
	// specs, one per server, that the generation stage splits its prompts
	// over (generate.Pool; each server with its client's retries, backoff
	// and concurrency limit). A local T5 is fine-tuned in full
	// (FineTuneT5), a local decoder with LoRA (GeneratorLoRA).
	Generator string
	// GeneratorImpl, when set, is used instead of opening Generator (tests,
	// custom servers); Generator then only names it in the run.
	GeneratorImpl lm.Generator `json:"-"`
	// GenConcurrency and GenRetries are an openai generator's requests in
	// flight per server and retries after a failed request, with
	// exponential backoff (0: the client's defaults, 4 and 3; negative
	// GenRetries: none), as openai.Options. Not part of the run's config: a
	// resumed run may use other servers' limits.
	GenConcurrency int `json:"-"`
	GenRetries     int `json:"-"`
	// RetrieverDir is the initial BERT bi-encoder (HF directory: config.json,
	// model.safetensors, vocab.txt). Required.
	RetrieverDir string
	// Backend is the GoMLX backend ("" = default).
	Backend string

	Rounds  int // self-learning rounds; round t+1 starts from round t's G and R (default 1)
	Samples int // documents (chunks) sampled per round for queries (10,000; ≤ 0 = all)
	// QueriesPerChunk is the number of pseudo-queries generated per sampled
	// chunk (1, SL-HyDE's one query per document). With more, one round has
	// QueriesPerChunk × Samples (q, d) pairs: the ICT generator draws that
	// many distinct sentences of the chunk (a chunk with fewer gives fewer;
	// the repeats are item errors, not trained on), which a randomly
	// initialised retriever needs (docs/recipes.md).
	QueriesPerChunk int
	L               int // hypothetical-document candidates per query, Eq. 3 (4)
	N               int // hypothetical documents fused with the query, Eq. 10 (1)
	// TrainFuse is the number of hypothetical documents fused with the
	// query in retriever training: < 0 = max(N, 1) (SL-HyDE), 0 = the plain
	// query, as dense and hybrid retrieval encode it. With the ICT
	// generator a hypothetical document is the sentences around the query,
	// nearly the positive itself, so fused training teaches e(q) little.
	TrainFuse int

	QueryTemplate string // Eq. 2 prompt (hyde.QueryPrompt)
	HypoTemplate  string // Eq. 3 prompt (hyde.HypoPrompt)
	// GenTemperature is the sampling temperature of every generation (0.7).
	GenTemperature float64
	TopP           float64 // nucleus sampling (0 = off)
	MaxQueryTokens int     // new tokens of a query (64)
	MaxDocTokens   int     // new tokens of a hypothetical document (256)
	GenBatch       int     // prompts per generator call; items are stored after each call (8)

	// SelectionDepth is how deep the true chunk is searched for when ranking
	// a candidate (Eq. 4); a chunk not found gets rank SelectionDepth+1
	// (1000, capped to the corpus size).
	SelectionDepth int

	RankFrom, RankTo int // hard-negative rank window [a, b), 0-based (10, 100)
	NumNegatives     int // hard negatives per query (7)
	// NegativeMaxScore, when > 0, drops hard-negative candidates scoring
	// above NegativeMaxScore × the positive's score (likely false
	// negatives; e.g. 0.95). 0 = no ceiling, as in SL-HyDE.
	NegativeMaxScore float64

	// Pooling is the retriever's pooling, "cls" or "mean"; "" (default) =
	// what RetrieverDir declares (encode.DirPooling: its
	// sentence-transformers 1_Pooling, else cls).
	Pooling         string
	Temperature     float64 // InfoNCE τ, Eq. 8 (0.02)
	RetrieverLR     float64 // retriever AdamW peak learning rate (1e-5)
	RetrieverBatch  int     // retriever micro-batch (32)
	GeneratorLR     float64 // T5 generator AdamW peak learning rate (1e-5)
	GeneratorBatch  int     // T5 generator SFT batch (8)
	WarmupRatio     float64 // warmup fraction of the retriever and T5 generator trainings (0.1)
	Epochs          int     // epochs of the retriever and T5 generator trainings (1)
	MaxLength       int     // retriever token limit (512)
	MaxTargetTokens int     // generator SFT target length limit, eos included (256)
	// GeneratorLoRA is the LoRA SFT of a decoder generator (Llama, Qwen2,
	// Qwen3; Eq. 6); the zero value is lora.DefaultConfig(), AutoMIR's: r 8,
	// AdamW, cosine schedule after 200 warmup steps, lr 1e-5, batch 2, 1
	// epoch. Its Seed is replaced by Seed + round, as the T5's; MaxLength
	// is capped at the decoder's max_position_embeddings. Omitted when
	// zero, so the config hash of earlier runs stays.
	GeneratorLoRA lora.Config `json:",omitzero"`
	// SubBatchTokens bounds one GradCache encoder pass of the retriever
	// training (retriever.Config.SubBatchTokens; 0 = its default 4096): the
	// activation memory, not the loss. Omitted from the config hash when 0.
	SubBatchTokens int `json:",omitempty"`
	// GradientCheckpointing recomputes each transformer block in the
	// backward pass of the retriever and generator training (HF
	// gradient_checkpointing; models/remat): less activation memory for
	// about one more forward pass, the same gradients, so it is left out of
	// the config hash.
	GradientCheckpointing bool `json:"-"`
	// SkipNonFinite makes the retriever training skip (and count) updates
	// whose loss or gradient is not finite instead of failing the round
	// (not part of the config hash: a failed round may be rerun with it).
	SkipNonFinite bool `json:",omitempty"`

	// FusionHoldout is the fraction of a round's pseudo-queries kept out of
	// retriever training to choose the hybrid's RRF weights on (0 = keep
	// the AP paper's 0.3/0.7; SL-HyDE trains on all queries).
	FusionHoldout float64

	// BM25 configures the BM25 of the BM25 and hybrid variants and of the
	// fusion weight's choice; the zero value is bm25.DefaultConfig()
	// (Lucene's k1 1.2, b 0.75, the biomed analyzer) and leaves the config
	// hash of runs made before the field existed unchanged.
	BM25 bm25.Config `json:",omitzero"`

	ChunkSize, ChunkOverlap int // how the corpus was chunked (recorded; 512, 128)
	QueryInstruction        string
	// DocInstruction is prepended to every document the rounds encode and
	// train on (the start retriever's "document" prompt); Unnormalized
	// leaves its vectors unnormalized (a start retriever without a
	// Normalize module). Both are omitted when zero, so the config hash of
	// runs made before they existed stays.
	DocInstruction string `json:",omitempty"`
	Unnormalized   bool   `json:",omitempty"`

	// EvalKs are the cutoffs evaluated besides 10 ({1, 10, 100}).
	EvalKs []int
	// EvalDepth is the number of hits retrieved per evaluation query (100).
	EvalDepth int

	Seed int64 // 42

	// Recipe names the recipe that set the training fields (recorded only).
	Recipe string `json:",omitempty"`
}

// DefaultConfig returns the paper's defaults (see the field comments).
func DefaultConfig() Config {
	return Config{
		Rounds: 1, Samples: 10000, QueriesPerChunk: 1, L: 4, N: 1, TrainFuse: -1,
		QueryTemplate: hyde.QueryPrompt, HypoTemplate: hyde.HypoPrompt,
		GenTemperature: lm.DefaultT5Temperature, MaxQueryTokens: 64, MaxDocTokens: 256, GenBatch: 8,
		SelectionDepth: 1000, RankFrom: 10, RankTo: 100, NumNegatives: 7,
		Temperature: 0.02, RetrieverLR: 1e-5, RetrieverBatch: 32, GeneratorLR: 1e-5, GeneratorBatch: 8,
		WarmupRatio: 0.1, Epochs: 1, MaxLength: 512, MaxTargetTokens: 256,
		ChunkSize: 512, ChunkOverlap: 128, EvalKs: []int{1, 10, 100}, EvalDepth: 100, Seed: 42,
	}
}

// Validate checks the settings; errors name the field.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("selflearn config: field %q: %v, want %s", field, v, want)
	}
	if c.GeneratorImpl == nil {
		if _, err := generate.ParseGeneratorSpecs(c.Generator); err != nil {
			return fmt.Errorf("selflearn config: field %q: %w", "Generator", err)
		}
	}
	switch {
	case c.WorkDir == "":
		return bad("WorkDir", `""`, "a directory")
	case c.RetrieverDir == "":
		return bad("RetrieverDir", `""`, "a BERT model directory")
	case c.Rounds < 1:
		return bad("Rounds", c.Rounds, ">= 1")
	case c.QueriesPerChunk < 1:
		return bad("QueriesPerChunk", c.QueriesPerChunk, ">= 1")
	case c.Pooling != "" && !bert.Pooling(c.Pooling).Valid():
		return bad("Pooling", fmt.Sprintf("%q", c.Pooling), `"" (the retriever's), "cls" or "mean"`)
	case c.L < 1:
		return bad("L", c.L, ">= 1")
	case c.N < 0:
		return bad("N", c.N, ">= 0")
	case c.GenTemperature < 0:
		return bad("GenTemperature", c.GenTemperature, ">= 0")
	case c.GenBatch < 1:
		return bad("GenBatch", c.GenBatch, ">= 1")
	case c.GenConcurrency < 0:
		return bad("GenConcurrency", c.GenConcurrency, ">= 0")
	case c.SelectionDepth < 1:
		return bad("SelectionDepth", c.SelectionDepth, ">= 1")
	case c.RankFrom < 0 || c.RankTo <= c.RankFrom:
		return bad("RankFrom/RankTo", [2]int{c.RankFrom, c.RankTo}, "0 <= RankFrom < RankTo")
	case c.NumNegatives < 1:
		return bad("NumNegatives", c.NumNegatives, ">= 1")
	case c.NegativeMaxScore < 0 || c.NegativeMaxScore > 1 || math.IsNaN(c.NegativeMaxScore):
		return bad("NegativeMaxScore", c.NegativeMaxScore, "0 (off) or in (0, 1]")
	case !(c.Temperature > 0):
		return bad("Temperature", c.Temperature, "> 0")
	case !(c.RetrieverLR > 0):
		return bad("RetrieverLR", c.RetrieverLR, "> 0")
	case !(c.GeneratorLR > 0):
		return bad("GeneratorLR", c.GeneratorLR, "> 0")
	case c.RetrieverBatch < 1:
		return bad("RetrieverBatch", c.RetrieverBatch, ">= 1")
	case c.GeneratorBatch < 1:
		return bad("GeneratorBatch", c.GeneratorBatch, ">= 1")
	case c.WarmupRatio < 0 || c.WarmupRatio >= 1:
		return bad("WarmupRatio", c.WarmupRatio, "in [0, 1)")
	case c.Epochs < 1:
		return bad("Epochs", c.Epochs, ">= 1")
	case c.MaxLength < 2:
		return bad("MaxLength", c.MaxLength, ">= 2")
	case c.SubBatchTokens < 0:
		return bad("SubBatchTokens", c.SubBatchTokens, ">= 0 (0 = the trainer's default)")
	case c.MaxTargetTokens < 2:
		return bad("MaxTargetTokens", c.MaxTargetTokens, ">= 2")
	case c.EvalDepth < 1:
		return bad("EvalDepth", c.EvalDepth, ">= 1")
	case c.FusionHoldout < 0 || c.FusionHoldout >= 1:
		return bad("FusionHoldout", c.FusionHoldout, "in [0, 1)")
	}
	if !reflect.ValueOf(c.GeneratorLoRA).IsZero() {
		if err := c.GeneratorLoRA.Validate(); err != nil {
			return fmt.Errorf("selflearn config: field %q: %w", "GeneratorLoRA", err)
		}
	}
	if !c.BM25.IsZero() {
		if err := c.BM25.Validate(); err != nil {
			return fmt.Errorf("selflearn config: field %q: %w", "BM25", err)
		}
	}
	return nil
}

// generatorLoRA is GeneratorLoRA, or lora.DefaultConfig() when zero.
func (c Config) generatorLoRA() lora.Config {
	if reflect.ValueOf(c.GeneratorLoRA).IsZero() {
		return lora.DefaultConfig()
	}
	return c.GeneratorLoRA
}
