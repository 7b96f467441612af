package retriever

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/train/trainer"
)

// Config holds the retriever fine-tuning settings. Start from DefaultConfig:
// the zero value is not valid (Normalize's default is true).
type Config struct {
	// OutputDir receives checkpoint-<step>/ directories and, at the end, the
	// final model (config.json, model.safetensors, vocab.txt) in HF layout.
	OutputDir string
	// Backend is the GoMLX backend (models/backend.Name; "" = default "go").
	Backend string

	Epochs    int // passes over the triplets (default 1)
	BatchSize int // queries per micro-batch (default 32); in-batch negatives come from the same micro-batch
	// GradAccumulation is the number of micro-batches per optimiser update
	// (HF gradient_accumulation_steps, default 1). Each micro-batch has its
	// own InfoNCE (in-batch negatives do not cross micro-batches).
	GradAccumulation int
	LearningRate     float64 // peak AdamW learning rate (SL-HyDE: 1e-5)
	WarmupRatio      float64 // linear warmup fraction of all updates (default 0.1), then linear decay to 0
	WeightDecay      float64 // decoupled AdamW decay (FlagEmbedding examples: 0.01), not on biases / LayerNorm
	MaxGradNorm      float64 // global-norm clipping (HF Trainer default 1.0; 0 = off)
	Temperature      float64 // τ of Eq. 8 (0.02)
	// MaxLength is the token limit of every text, specials included (512),
	// clamped to the model's max_position_embeddings.
	MaxLength int
	// NumNegatives is the number of hard negatives used per query (7, the
	// mining default; FlagEmbedding train_group_size 8). A triplet with
	// more uses its first NumNegatives; one with fewer has its missing slots
	// masked out of the loss.
	NumNegatives int
	// NumHypo is N of Eq. 10: the first N hypothetical documents of a
	// triplet are fused with the query (default 1; 0 trains on the plain
	// query). Missing ones are left out of the average.
	NumHypo int
	// Pooling and Normalize are the encoder convention (BGE: CLS,
	// normalised); the fused query is re-normalised when Normalize, as
	// hyde.Fuse does at inference.
	Pooling   bert.Pooling
	Normalize bool
	// QueryInstruction is prepended to query texts (not to hypothetical or
	// real documents), as encode.BERTEncoder.EncodeQueries does.
	QueryInstruction string
	// DocInstruction is prepended to positives, negatives and hypothetical
	// documents, as encode.BERTEncoder.EncodeDocs does (the "document"
	// prompt of an E5-style retriever); empty by default.
	DocInstruction string `json:",omitempty"`
	// GradientCheckpointing recomputes each transformer block in the
	// backward pass instead of keeping its activations (HF
	// TrainingArguments.gradient_checkpointing, off by default): the same
	// gradients for about one more forward pass, with activation memory of
	// the block inputs plus one block (models/remat, train/memory).
	GradientCheckpointing bool
	// Seed fixes the data order (one permutation per epoch) and dropout.
	Seed uint64
	// SaveSteps writes a checkpoint every SaveSteps updates (0 = only at the
	// end of each epoch; a checkpoint is always written at the end).
	SaveSteps int
	// SubBatchTokens bounds one encoder pass: the distinct texts of an
	// update are sorted by length and encoded in sub-batches of
	// SubBatchTokens / BucketLength rows (at least 1), so memory is bounded
	// by it rather than by BatchSize × (2 + NumNegatives + NumHypo) × MaxLength
	// (gradient caching, see Train). It changes speed, memory and which
	// dropout masks are drawn, not the loss or its gradient. Default 8192.
	SubBatchTokens int
	// Resume continues from the latest complete checkpoint in OutputDir
	// (weights, AdamW moments, RNG, data position), refusing a checkpoint
	// made from other data or other trajectory settings.
	Resume bool
	// SkipNonFinite skips (and counts, Result.SkippedNonFinite) an update
	// whose InfoNCE or gradient is not finite instead of stopping with an
	// error; such an update never changes the weights or the optimiser.
	SkipNonFinite bool `json:",omitempty"`
}

// DefaultConfig returns SL-HyDE's retriever settings: lr 1e-5, τ 0.02, 7
// hard negatives, max length 512, N = 1, CLS pooling with normalisation
// (BGE), warmup 0.1, weight decay 0.01, clipping 1.0, batch 32, 1 epoch,
// seed 42.
func DefaultConfig() Config {
	return Config{
		Epochs: 1, BatchSize: 32, GradAccumulation: 1, LearningRate: 1e-5, WarmupRatio: 0.1,
		WeightDecay: 0.01, MaxGradNorm: 1.0, Temperature: DefaultTemperature, MaxLength: 512,
		NumNegatives: 7, NumHypo: 1, Pooling: bert.PoolCLS, Normalize: true, Seed: 42,
		SubBatchTokens: DefaultSubBatchTokens,
	}
}

// Validate checks ranges; errors name the field.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("retriever train config: field %q: %v, want %s", field, v, want)
	}
	switch {
	case c.OutputDir == "":
		return bad("OutputDir", `""`, "a directory")
	case c.Epochs < 1:
		return bad("Epochs", c.Epochs, ">= 1")
	case c.BatchSize < 1:
		return bad("BatchSize", c.BatchSize, ">= 1")
	case c.GradAccumulation < 1:
		return bad("GradAccumulation", c.GradAccumulation, ">= 1")
	case !(c.Temperature > 0):
		return bad("Temperature", c.Temperature, "> 0")
	case c.MaxLength < 2:
		return bad("MaxLength", c.MaxLength, ">= 2")
	case c.NumNegatives < 0:
		return bad("NumNegatives", c.NumNegatives, ">= 0")
	case c.NumHypo < 0:
		return bad("NumHypo", c.NumHypo, ">= 0")
	case !c.Pooling.Valid():
		return bad("Pooling", c.Pooling, `"cls" or "mean"`)
	case c.SubBatchTokens < 0:
		return bad("SubBatchTokens", c.SubBatchTokens, ">= 0 (0 = default)")
	case c.SaveSteps < 0:
		return bad("SaveSteps", c.SaveSteps, ">= 0")
	}
	return nil
}

// optim maps the optimiser fields onto a trainer.Config for total updates.
func (c Config) optim(total int) trainer.Config {
	o := trainer.DefaultConfig()
	o.LearningRate, o.WeightDecay, o.MaxGradNorm = c.LearningRate, c.WeightDecay, c.MaxGradNorm
	o.WarmupRatio, o.TotalSteps, o.GradAccumulation = c.WarmupRatio, total, c.GradAccumulation
	o.SkipNonFinite = c.SkipNonFinite
	return o
}

// MetricLogger receives per-update metrics ("loss", "learning_rate",
// "grad_norm", "epoch"); *tracker.Run (data/tracker) implements it.
type MetricLogger interface {
	LogMetrics(values map[string]float64, step int) error
}

// Result is what Train returns.
type Result struct {
	Model          *bert.Model         // trained weights (also saved in OutputDir)
	Tokenizer      tokenizer.Tokenizer // the init directory's tokenizer
	Steps          int                 // updates completed in total (resumed ones included)
	History        []trainer.LogEntry  // one entry per update, resumed history included
	LastCheckpoint string              // path of the last checkpoint written
	ResumedFrom    string              // checkpoint resumed from, "" for a fresh run
	// SkippedNonFinite is the number of updates skipped as non-finite
	// (Config.SkipNonFinite; resumed ones included).
	SkippedNonFinite int
}

// Plan is the size of a run: micro-batches per epoch
// ceil(len/BatchSize), updates per epoch ceil(micro/GradAccumulation) (the
// last group of an epoch may be short, as in HF), and total updates.
func (c Config) Plan(numTriplets int) (microPerEpoch, updatesPerEpoch, total int) {
	microPerEpoch = (numTriplets + c.BatchSize - 1) / c.BatchSize
	updatesPerEpoch = (microPerEpoch + c.GradAccumulation - 1) / c.GradAccumulation
	return microPerEpoch, updatesPerEpoch, updatesPerEpoch * c.Epochs
}

// EpochOrder is the order of the triplets in epoch e (0-based): a
// permutation drawn from PCG(seed, e), so a resumed run sees the same order.
func EpochOrder(seed uint64, epoch, n int) []int {
	return rand.New(rand.NewPCG(seed, uint64(epoch))).Perm(n)
}

// tokenized holds the pre-tokenized texts of the run.
type tokenized struct {
	q     [][]int   // [T] query (with instruction)
	hypo  [][][]int // [T][≤N]
	pos   [][]int   // [T]
	negs  [][][]int // [T][≤n]
	empty []int     // [CLS][SEP], the filler of missing slots
}

// Train fine-tunes the BERT checkpoint in initDir (bert.Load; its tokenizer
// is read with tokenizer.Load from the same directory) on triplets with
// InfoNCE (Eq. 8) and AdamW (train/trainer), following SL-HyDE:
//
//   - the query vector is Eq. 10 computed by the trainable encoder,
//     v_q = (e(q) + Σ_k e(d′_k)) / (1 + #d′), re-normalised when
//     cfg.Normalize, so gradients reach the encoder through query and
//     hypothetical documents;
//   - candidates of query i are every positive and hard negative of its
//     micro-batch; another query's positive with the same text as query i's
//     positive (or a hard negative equal to it) is masked (CandidateMask),
//     texts compared after chunk.TextKey (NFC, case folding, white space).
//
// Memory and speed (performance only; the loss and its gradient are those
// of the whole micro-batch): an update encodes each distinct text of its
// micro-batches once (a positive that is also another query's hard
// negative, a repeated hypothetical document; duplicates then share one
// dropout draw), sorted by token length and padded per length bucket, in
// sub-batches of at most cfg.SubBatchTokens padded tokens, with gradient
// caching (Gao et al. 2021): embeddings without gradients, ∂L/∂e on the
// embeddings, then the encoder's gradient sub-batch by sub-batch with the
// same dropout masks. Missing hypothetical documents and negatives are not
// encoded (their weight or mask is 0). One graph is compiled per sub-batch
// shape (one per length bucket) and reused.
//
// Data order: EpochOrder per epoch, micro-batches of BatchSize consecutive
// triplets, GradAccumulation micro-batches per update. Each update's
// loss / learning rate / gradient norm go to run (when non-nil) and
// progress (when non-nil). Checkpoints (trainer.WriteCheckpoint) hold the
// model (bert.Model.Save), vocab (tokenizer Save), optimizer.safetensors
// and trainer_state.json; with cfg.Resume the latest one is continued
// exactly (same data order, optimiser and dropout state). ctx cancellation
// stops between updates with ctx.Err() (the last checkpoint stays valid).
//
// Errors: an invalid config, no triplets, load failures, a resume
// checkpoint from other data/settings, graph or execution failures, a
// non-finite loss, logger errors.
func Train(ctx context.Context, cfg Config, triplets []Triplet, initDir string, run MetricLogger,
	progress func(trainer.LogEntry)) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(triplets) == 0 {
		return nil, errors.New("retriever train: no triplets")
	}
	be, err := backend.New(cfg.Backend)
	if err != nil {
		return nil, fmt.Errorf("retriever train: %w", err)
	}
	tok, err := tokenizer.Load(initDir)
	if err != nil {
		return nil, fmt.Errorf("retriever train: tokenizer: %w", err)
	}
	res := &Result{Tokenizer: tok}
	state, modelDir, err := startState(cfg, triplets, initDir, res)
	if err != nil {
		return nil, err
	}
	m, err := encode.LoadModel(be, modelDir) // BERT or XLM-R by model_type
	if err != nil {
		return nil, fmt.Errorf("retriever train: %w", err)
	}
	if tok.Len() > m.Config.VocabSize {
		return nil, fmt.Errorf("retriever train: tokenizer of %s has %d tokens, more than vocab_size %d in %s: ids from %d on have no embedding",
			initDir, tok.Len(), m.Config.VocabSize, filepath.Join(modelDir, bert.ConfigFile), m.Config.VocabSize)
	}
	m.GradientCheckpointing = cfg.GradientCheckpointing
	res.Model = m
	t, err := newTrainRun(be, cfg, triplets, tok, m, state, res)
	if err != nil {
		return nil, err
	}
	t.run, t.progress = run, progress
	for epoch := t.state.Epoch; epoch < cfg.Epochs; epoch++ {
		if err := t.epoch(ctx, epoch); err != nil {
			return res, err
		}
	}
	if err := t.finish(); err != nil {
		return res, err
	}
	return res, nil
}

// startState returns the trainer state Train starts from and the model
// directory to load: a fresh state and initDir, or with cfg.Resume the
// latest checkpoint in cfg.OutputDir (also set as res.ResumedFrom), which
// must have been trained on the same triplets and trajectory settings.
func startState(cfg Config, triplets []Triplet, initDir string, res *Result) (trainer.State, string, error) {
	dataHash, err := hashJSON(triplets)
	if err != nil {
		return trainer.State{}, "", fmt.Errorf("retriever train: %w", err)
	}
	cfgHash, err := hashJSON(trajectory(cfg))
	if err != nil {
		return trainer.State{}, "", fmt.Errorf("retriever train: %w", err)
	}
	state := trainer.State{Seed: int64(cfg.Seed), DataHash: dataHash, ConfigHash: cfgHash, BestMetric: -1}
	modelDir := initDir
	if cfg.Resume {
		last, err := trainer.LatestCheckpoint(cfg.OutputDir)
		if err != nil {
			return trainer.State{}, "", fmt.Errorf("retriever train: resume: %w", err)
		}
		if last != "" {
			st, err := trainer.ReadState(last)
			if err != nil {
				return trainer.State{}, "", fmt.Errorf("retriever train: resume: %w", err)
			}
			if st.DataHash != dataHash {
				return trainer.State{}, "", fmt.Errorf("retriever train: resume %s: field %q: checkpoint was trained on other triplets", last, "data_hash")
			}
			if st.ConfigHash != cfgHash {
				return trainer.State{}, "", fmt.Errorf("retriever train: resume %s: field %q: checkpoint was trained with other settings", last, "config_hash")
			}
			state, modelDir, res.ResumedFrom = st, last, last
		}
	}
	return state, modelDir, nil
}

// trainRun is one Train call after loading: the model, its gradient cache
// and optimizer, and the trainer state that checkpoints record.
type trainRun struct {
	cfg           Config
	triplets      []Triplet
	tok           tokenizer.Tokenizer
	m             *bert.Model
	gc            *gradCache
	tr            *trainer.Trainer
	state         trainer.State
	res           *Result
	microPerEpoch int
	run           MetricLogger           // nil: no metrics
	progress      func(trainer.LogEntry) // nil: no progress
}

// newTrainRun tokenizes the triplets, builds the gradient cache and the
// optimizer, and restores the optimizer from res.ResumedFrom or seeds the
// RNG.
func newTrainRun(be backends.Backend, cfg Config, triplets []Triplet, tok tokenizer.Tokenizer, m *bert.Model,
	state trainer.State, res *Result) (*trainRun, error) {
	maxTok := min(cfg.MaxLength, m.MaxLength())
	n := cfg.NumNegatives
	nh := cfg.NumHypo
	maxNegs, maxHypo := 0, 0
	for _, t := range triplets {
		maxNegs, maxHypo = max(maxNegs, len(t.Negs)), max(maxHypo, len(t.HypoDocs))
	}
	n, nh = min(n, maxNegs), min(nh, maxHypo)
	tk, err := tokenizeAll(tok, triplets, cfg.QueryInstruction, cfg.DocInstruction, maxTok, n, nh)
	if err != nil {
		return nil, fmt.Errorf("retriever train: %w", err)
	}

	microPerEpoch, _, total := cfg.Plan(len(triplets))
	gc, err := newGradCache(be, m, cfg, tk, n, nh, maxTok)
	if err != nil {
		return nil, fmt.Errorf("retriever train: %w", err)
	}
	tr, err := trainer.New(be, m.Ctx, gc.surrogate, cfg.optim(total))
	if err != nil {
		return nil, fmt.Errorf("retriever train: %w", err)
	}
	if res.ResumedFrom != "" {
		if err := tr.LoadState(filepath.Join(res.ResumedFrom, trainer.OptimizerFile)); err != nil {
			return nil, fmt.Errorf("retriever train: resume: %w", err)
		}
		if tr.GlobalStep() != state.GlobalStep {
			return nil, fmt.Errorf("retriever train: resume %s: optimizer step %d, trainer_state global_step %d", res.ResumedFrom, tr.GlobalStep(), state.GlobalStep)
		}
	} else if err := m.Ctx.SetRNGStateFromSeed(int64(cfg.Seed)); err != nil {
		return nil, fmt.Errorf("retriever train: seed: %w", err)
	}
	return &trainRun{cfg: cfg, triplets: triplets, tok: tok, m: m, gc: gc, tr: tr, state: state, res: res,
		microPerEpoch: microPerEpoch}, nil
}

// save writes a checkpoint at the current step and records it in
// res.LastCheckpoint.
func (t *trainRun) save() error {
	dir, err := trainer.WriteCheckpoint(t.cfg.OutputDir, t.tr.GlobalStep(), func(dir string) error {
		if err := t.m.Save(dir); err != nil {
			return err
		}
		if err := t.tok.Save(dir); err != nil {
			return err
		}
		if err := t.tr.SaveState(filepath.Join(dir, trainer.OptimizerFile)); err != nil {
			return err
		}
		return trainer.WriteState(dir, t.state)
	})
	t.res.LastCheckpoint = dir
	return err
}

// epoch runs the updates of epoch, from the stored position when it is the
// state's epoch, logging and checkpointing as it goes.
func (t *trainRun) epoch(ctx context.Context, epoch int) error {
	cfg, state, microPerEpoch := t.cfg, &t.state, t.microPerEpoch
	order := EpochOrder(cfg.Seed, epoch, len(t.triplets))
	start := 0
	if epoch == state.Epoch {
		start = state.BatchInEpoch
	}
	for b := start; b < microPerEpoch; b += cfg.GradAccumulation {
		if err := ctx.Err(); err != nil {
			return err
		}
		var micro [][]int
		for k := b; k < min(b+cfg.GradAccumulation, microPerEpoch); k++ {
			micro = append(micro, order[k*cfg.BatchSize:min((k+1)*cfg.BatchSize, len(order))])
		}
		sr, err := t.gc.update(t.tr, t.triplets, micro)
		if err != nil {
			return fmt.Errorf("retriever train: epoch %d, micro-batches %d..%d: %w", epoch, b, b+len(micro)-1, err)
		}
		done := b + len(micro)
		state.GlobalStep, state.Epoch, state.BatchInEpoch = sr.Step, epoch, done
		if done == microPerEpoch {
			state.Epoch, state.BatchInEpoch = epoch+1, 0
		}
		if !sr.Skipped { // a skipped update logs nothing; its data counts as consumed
			entry := trainer.LogEntry{Step: sr.Step, Epoch: float64(epoch) + float64(done)/float64(microPerEpoch),
				Loss: sr.Loss, LearningRate: sr.LearningRate, GradNorm: sr.GradNorm}
			state.LogHistory = append(state.LogHistory, entry)
			if t.run != nil {
				if err := t.run.LogMetrics(map[string]float64{"loss": sr.Loss, "learning_rate": sr.LearningRate,
					"grad_norm": sr.GradNorm, "epoch": entry.Epoch}, sr.Step); err != nil {
					return fmt.Errorf("retriever train: step %d: log: %w", sr.Step, err)
				}
			}
			if t.progress != nil {
				t.progress(entry)
			}
		}
		if (cfg.SaveSteps > 0 && !sr.Skipped && sr.Step%cfg.SaveSteps == 0) || done == microPerEpoch {
			if err := t.save(); err != nil {
				return fmt.Errorf("retriever train: %w", err)
			}
		}
	}
	return nil
}

// finish fills res's totals, logs the skipped updates and saves the final
// model, tokenizer and sentence-transformers files in cfg.OutputDir.
func (t *trainRun) finish() error {
	cfg, res, m := t.cfg, t.res, t.m
	res.Steps, res.History, res.SkippedNonFinite = t.tr.GlobalStep(), t.state.LogHistory, t.tr.SkippedNonFinite()
	if t.run != nil && cfg.SkipNonFinite {
		if err := t.run.LogMetrics(map[string]float64{"skipped_nonfinite": float64(res.SkippedNonFinite)}, res.Steps); err != nil {
			return fmt.Errorf("retriever train: log: %w", err)
		}
	}
	if err := m.Save(cfg.OutputDir); err != nil {
		return fmt.Errorf("retriever train: save final model: %w", err)
	}
	if err := t.tok.Save(cfg.OutputDir); err != nil {
		return fmt.Errorf("retriever train: save tokenizer: %w", err)
	}
	// The final model is also a sentence-transformers directory that encodes
	// as training did.
	if err := hf.WriteSentenceTransformer(cfg.OutputDir, SentenceTransformer(cfg, m)); err != nil {
		return fmt.Errorf("retriever train: %w", err)
	}
	return nil
}

// trajectory is the part of Config that determines the training trajectory
// (hashed into trainer_state.json so a resume cannot silently change it).
func trajectory(c Config) Config {
	c.OutputDir, c.Backend, c.SaveSteps, c.Resume, c.SkipNonFinite = "", "", 0, false, false
	if c.SubBatchTokens == 0 {
		c.SubBatchTokens = DefaultSubBatchTokens
	}
	return c
}

func hashJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

func tokenizeAll(tok tokenizer.Tokenizer, ts []Triplet, instr, docInstr string, maxTok, n, nh int) (*tokenized, error) {
	enc := func(texts []string) ([][]int, error) {
		e, err := tokenizer.EncodeBatchErr(tok, texts, tokenizer.EncodeOptions{MaxLength: maxTok, Truncation: true})
		if err != nil {
			return nil, err
		}
		out := make([][]int, len(e))
		for i := range e {
			out[i] = e[i].IDs
		}
		return out, nil
	}
	tk := &tokenized{hypo: make([][][]int, len(ts)), negs: make([][][]int, len(ts))}
	qs := make([]string, len(ts))
	ps := make([]string, len(ts))
	for i, t := range ts {
		qs[i], ps[i] = instr+t.Query, docInstr+t.Pos
	}
	var err error
	if tk.q, err = enc(qs); err != nil {
		return nil, fmt.Errorf("tokenize queries: %w", err)
	}
	if tk.pos, err = enc(ps); err != nil {
		return nil, fmt.Errorf("tokenize positives: %w", err)
	}
	for i, t := range ts {
		if tk.hypo[i], err = enc(prefixed(docInstr, t.HypoDocs[:min(nh, len(t.HypoDocs))])); err != nil {
			return nil, fmt.Errorf("tokenize triplet %d: hypothetical documents: %w", i, err)
		}
		if tk.negs[i], err = enc(prefixed(docInstr, t.Negs[:min(n, len(t.Negs))])); err != nil {
			return nil, fmt.Errorf("tokenize triplet %d: negatives: %w", i, err)
		}
	}
	e, err := enc([]string{""})
	if err != nil {
		return nil, err
	}
	tk.empty = e[0]
	return tk, nil
}

// FuseGraph is Eq. 10 in the graph: q [B, H], hypo [B·N, H] (query i's
// documents at rows i·N..i·N+N−1), weights [B, N] (1 = present, 0 =
// missing) → (q_i + Σ_k w_ik·h_ik) / (1 + Σ_k w_ik), [B, H], L2-normalised
// (max(‖x‖, 1e-12)) when normalize, matching hyde.Fuse with ModeFusion.
func FuseGraph(q, hypo, weights *graph.Node, normalize bool) *graph.Node {
	dims := q.Shape().Dimensions
	b, h := dims[0], dims[1]
	nh := weights.Shape().Dimensions[1]
	hr := graph.Reshape(hypo, b, nh, h)
	w := graph.ConvertDType(weights, q.DType())
	sum := graph.Add(q, graph.ReduceSum(graph.Mul(hr, graph.BroadcastToDims(graph.ExpandAxes(w, -1), b, nh, h)), 1))
	cnt := graph.OnePlus(graph.ReduceAndKeep(w, graph.ReduceSum, 1)) // [b, 1]
	out := graph.Div(sum, graph.BroadcastToDims(cnt, b, h))
	if normalize {
		norm := graph.MaxScalar(graph.Sqrt(graph.ReduceAndKeep(graph.Square(out), graph.ReduceSum, -1)), 1e-12)
		out = graph.Div(out, graph.BroadcastToDims(norm, b, h))
	}
	return out
}

// prefixed returns texts with prefix prepended to each (texts itself when
// prefix is empty).
func prefixed(prefix string, texts []string) []string {
	if prefix == "" {
		return texts
	}
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = prefix + t
	}
	return out
}
