package demo

import (
	"fmt"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/retrieval/evalrun"
	"github.com/ragforge/ragforge/train/trainer"
)

// Options are the demo's settings; every stage reads what it needs.
// DefaultOptions holds `ragforge demo`'s defaults.
type Options struct {
	Corpus, QA string // default: the sample embedded in the binary (both or neither)
	Work       string // working directory for models, indexes, runs
	// DB is the run store (SQLite path or postgres:// URL); empty: the
	// SQLite file ragforge.db inside Work.
	DB string
	// Backend is the GoMLX backend of every model ("": go).
	Backend   string
	ChunkSize int
	Overlap   int
	Seed      int64
	Samples   int // chunks sampled for the self-learning round
	Epochs    int // filter training epochs (0: the recipe's)
	// ICTPerChunk and ICTMaxChunks are label ict's --per-chunk and
	// --max-chunks for the filter's examples (8 and 150: the sample's
	// sweep; a large corpus trades pseudo-questions per chunk for chunks).
	ICTPerChunk, ICTMaxChunks int
	// FilterEnsembleSeeds are the seeds of extra filters trained beside the
	// first and evaluated with it as an ensemble (none: one filter).
	FilterEnsembleSeeds []int64
	// FilterFinetuneEpochs fine-tunes the ICT-trained filter on the
	// training questions' evidence labels for this many epochs at
	// finetuneLR (0: no fine-tuning; docs/recipes.md, "AP filter,
	// fourth sweep").
	FilterFinetuneEpochs int
	// FilterMatchMarks trains every filter with train filter --match-marks
	// (exact-match marks in the evidence; docs/recipes.md, "Filter:
	// exact-match marks").
	FilterMatchMarks bool
	// FilterMatchMarksRare is train filter's --match-marks-rare (needs
	// FilterMatchMarks).
	FilterMatchMarksRare []float64
	// FilterCalibrate fits train calibration on the training questions'
	// evidence labels and evaluates, exports and serves the calibrated
	// filter (docs/recipes.md, "Filter: calibration with word-overlap
	// features").
	FilterCalibrate bool
	// QueriesPerChunk is selflearn's --queries-per-chunk (0: the recipe's).
	QueriesPerChunk int
	// Negatives, Candidates and TrainFuse are selflearn's --negatives (-1:
	// its default, 7; 0 is a setting, in-batch negatives only),
	// --candidates (0: its default, 4) and --train-fuse (-1: its default,
	// SL-HyDE's fused query).
	Negatives, Candidates, TrainFuse int
	// BM25 is passed on to every stage that builds BM25 (the BM25 and
	// hybrid evaluations, the evidence labels' candidates, selflearn's
	// BM25 and fusion choice, the exported pipeline).
	BM25   evalrun.BM25
	Quick  bool   // fewer steps (tests)
	Recipe string // training recipe for the filter and the retriever (auto: scratch, models init marks them random)
}

// DefaultOptions are `ragforge demo`'s defaults: the embedded sample in
// ragforge-demo, 512/128-character chunks, seed 42, 64 chunks sampled for
// the self-learning round, 8 ICT pseudo-questions from each of 150 chunks.
func DefaultOptions() Options {
	return Options{Work: "ragforge-demo", ChunkSize: 512, Overlap: 128, Seed: 42, Samples: 64,
		ICTPerChunk: 8, ICTMaxChunks: 150, Negatives: -1, TrainFuse: -1, BM25: evalrun.DefaultBM25(), Recipe: "auto"}
}

// Check returns an error for settings that make no sense together; Run
// calls it before any work.
func (o Options) Check() error {
	if (o.Corpus == "") != (o.QA == "") {
		return fmt.Errorf("--corpus and --qa go together")
	}
	if o.Work == "" {
		return fmt.Errorf("--work: empty")
	}
	switch o.Recipe {
	case "", "auto", trainer.RecipePretrained, trainer.RecipeScratch:
	default:
		return fmt.Errorf("--recipe %q: want %s, %s or auto", o.Recipe, trainer.RecipePretrained, trainer.RecipeScratch)
	}
	for _, n := range []struct {
		flag     string
		v, least int
	}{{"chunk-size", o.ChunkSize, 0}, {"chunk-overlap", o.Overlap, 0}, {"filter-epochs", o.Epochs, 0},
		{"filter-finetune-epochs", o.FilterFinetuneEpochs, 0}, {"queries-per-chunk", o.QueriesPerChunk, 0},
		{"candidates", o.Candidates, 0}, {"ict-max-chunks", o.ICTMaxChunks, 0}, {"ict-per-chunk", o.ICTPerChunk, 1},
		{"train-fuse", o.TrainFuse, -1}, {"negatives", o.Negatives, -1}} {
		if n.v < n.least {
			return fmt.Errorf("--%s %d: must be at least %d", n.flag, n.v, n.least)
		}
	}
	if len(o.FilterMatchMarksRare) > 0 && !o.FilterMatchMarks {
		return fmt.Errorf("--filter-match-marks-rare needs --filter-match-marks")
	}
	if err := filter.CheckRareDocFractions(o.FilterMatchMarksRare); err != nil {
		return fmt.Errorf("--filter-match-marks-rare: %w", err)
	}
	if o.FilterCalibrate && len(o.FilterEnsembleSeeds) > 0 {
		return fmt.Errorf("--filter-calibrate with --filter-ensemble-seeds: a calibration fits one filter, not an ensemble")
	}
	if o.FilterCalibrate && o.FilterFinetuneEpochs > 0 {
		return fmt.Errorf("--filter-calibrate with --filter-finetune-epochs: the fine-tuning trains on the training questions' labels, which the calibration must not have seen")
	}
	seen := map[int64]bool{o.Seed: true}
	for _, seed := range o.FilterEnsembleSeeds {
		if seen[seed] {
			return fmt.Errorf("--filter-ensemble-seeds: seed %d twice (--seed %d is the first filter's): a member must differ from the others", seed, o.Seed)
		}
		seen[seed] = true
	}
	if _, err := o.BM25.Config(); err != nil {
		return err
	}
	return nil
}
