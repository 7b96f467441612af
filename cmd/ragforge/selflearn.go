package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/eval"
	"github.com/ragforge/ragforge/retrieval/evalrun"
	"github.com/ragforge/ragforge/train/lora"
	"github.com/ragforge/ragforge/train/selflearn"
)

type selflearnOptions struct {
	Corpus  corpusFlags
	Config  selflearn.Config
	EvalQA  string
	Split   string
	Resume  string
	Relevan string
	Limit   int
	Recipe  string
	BM25    evalrun.BM25 // the BM25 and hybrid variants' BM25 (Config.BM25)
	// A decoder generator's LoRA warmup and checkpoint spacing
	// (Config.GeneratorLoRA).
	LoRAWarmup, LoRASaveSteps int
	// changed are the flags given (explicit flags override the recipe and
	// the start retriever's settings).
	changed    map[string]bool
	GenServers genServerFlags // limits per openai generator server
}

const selflearnLong = `Runs SL-HyDE (AutoMIR) rounds on an unlabeled, chunked corpus with generator G
and retriever R:
  1. queries q = G(d) per sampled chunk (Eq. 2), --queries-per-chunk of them
  2. L hypothetical documents d'_i = G(q, d) (Eq. 3)
  3. keep the d' that ranks the true chunk highest with R over FAISS (Eq. 4-5)
  4. fine-tune a local generator on (q, d*) (Eq. 6) and export SFT JSONL: a T5 in
     full, a decoder (hf:/qwen2:/llama:/qwen3:DIR) with LoRA at AutoMIR's settings
     (r 8, AdamW, cosine after 200 warmup steps, lr 1e-5, batch 2, 1 epoch), its
     prompt rendered through the chat template as for generation; the merged
     checkpoint is round-<t>/generator, the PEFT adapter round-<t>/generator-lora/adapter
  5. regenerate d' with the tuned generator: triplets (q, d'; d)
  6. mine 7 hard negatives from ranks [10, 100) excluding the chunk's document and any
     chunk whose text equals the chunk's or the query's (Eq. 7)
  7. train R with InfoNCE (temperature 0.02, in-batch + hard negatives; Eq. 8)
  8. query vector = mean of e(q) and N e(d') (Eq. 10-11)
After every round, --eval-qa is evaluated for BM25, the BM25+dense hybrid, the
base retriever, HyDE, SL-HyDE and the two ablations. Every item is stored, so
rerunning the same command resumes an interrupted round where it stopped.

Generators: ict (inverse cloze: a sentence of the chunk is its query; no LLM
needed), t5:DIR (local T5, sampling), openai:URL[#model] (an OpenAI-compatible
chat server: vLLM, llama.cpp server, Ollama).

--recipe pretrained keeps SL-HyDE's retriever settings (lr 1e-5, batch 32, one
epoch) and the AP paper's hybrid weights (dense 0.3, BM25 0.7); --recipe
scratch, the default for a retriever whose config.json has
"ragforge_random_init": true, generates 16 pseudo-queries per chunk
(--queries-per-chunk) and trains at a higher learning rate (docs/recipes.md)
and holds out --fusion-holdout of each round's
pseudo-queries to choose the hybrid's dense weight (0 to 1, BM25 gets the
rest) by nDCG@10 on them: no relevance labels are used, and a dense model
that adds nothing gets weight 0, so the hybrid is then BM25 alone. The chosen
weights go to round-<t>/retriever/ragforge_fusion.json, which eval retrieval
--retriever hybrid uses for that encoder unless --dense-weight/--bm25-weight
are given.`

func newSelflearnCmd(g *globals) *cobra.Command {
	o := selflearnOptions{Config: selflearn.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "selflearn",
		Short: "Run SL-HyDE self-learning rounds on an unlabeled corpus and report retrieval before and after each round",
		Long:  selflearnLong,
		Example: `  ragforge models init --arch bert --size tiny --tokenizer ../shared/fixtures/bert-tiny/vocab.txt --out work/bert-tiny
  ragforge selflearn --corpus ../shared/data/ap_protocols --chunk-size 512 --chunk-overlap 128 \
    --retriever work/bert-tiny --generator ict --rounds 2 --eval-qa ../shared/data/ap_protocols_qa/dev.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.changed = changedFlags(cmd)
			return runSelflearn(cmdContext(cmd), g, o)
		},
	}
	o.Corpus.add(cmd)
	addSelflearnFlags(cmd, &o)
	addSelflearnTrainingFlags(cmd, &o)
	addBM25Flags(cmd, &o.BM25)
	o.GenServers.add(cmd)
	return cmd
}

// addSelflearnFlags adds the flags of the run, the generation and the evaluation.
func addSelflearnFlags(cmd *cobra.Command, o *selflearnOptions) {
	c := &o.Config
	f := cmd.Flags()
	f.StringVar(&c.RetrieverDir, "retriever", "", "initial BERT bi-encoder directory (HF layout) (required)")
	addRecipeFlag(cmd, &o.Recipe, "BERT")
	f.Float64Var(&c.FusionHoldout, "fusion-holdout", c.FusionHoldout, "fraction of each round's pseudo-queries held out of training to choose the hybrid's dense/BM25 weights on (0: the AP paper's 0.3/0.7)")
	c.Generator = "ict"
	f.Var(&genList{p: &c.Generator}, "generator", "generator: ict | t5:DIR | hf:DIR (T5 or Llama/Qwen2/Qwen3 by model_type) | qwen2:DIR | llama:DIR | qwen3:DIR (model_type checked) | openai:URL[#model], or several openai:URL (repeated, or one comma-separated list), one per server, that generation splits its prompts over; a local T5 or decoder is fine-tuned each round")
	f.StringVar(&c.WorkDir, "work", "ragforge-selflearn", "working directory (per-round files, tuned models; resumes from run.json)")
	f.StringVar(&o.Resume, "resume", "", "attach to this run id instead of the work directory's")
	f.StringVar(&o.EvalQA, "eval-qa", "", "evaluation questions: AP QA CSV or BEIR dir (required)")
	f.StringVar(&o.Split, "split", "test", "BEIR qrels split")
	f.StringVar(&o.Relevan, "relevance", "contains", "relevance rule for a QA CSV: contains | span")
	f.IntVar(&o.Limit, "eval-limit", 0, "evaluate on the first N questions only (0 = all)")
	minInt(f, 0, "eval-limit")
	f.IntVar(&c.Rounds, "rounds", c.Rounds, "self-learning rounds")
	f.IntVar(&c.Samples, "samples", c.Samples, "chunks sampled per round for queries (<= 0: all)")
	f.IntVar(&c.QueriesPerChunk, "queries-per-chunk", c.QueriesPerChunk, "pseudo-queries generated per sampled chunk (SL-HyDE: 1; scratch recipe: 16; ict draws distinct sentences, then word spans)")
	f.StringVar(&c.Pooling, "pooling", c.Pooling, `retriever pooling: cls | mean (default: the retriever directory's 1_Pooling/config.json, else cls)`)
	minInt(f, 1, "queries-per-chunk")
	f.IntVar(&c.L, "candidates", c.L, "hypothetical documents per query, L (Eq. 3)")
	f.IntVar(&c.N, "fuse", c.N, "hypothetical documents fused with the query, N (Eq. 10)")
	f.IntVar(&c.TrainFuse, "train-fuse", c.TrainFuse, "hypothetical documents fused with the query in retriever training (-1: as --fuse, SL-HyDE; 0: the plain query)")
	f.Float64Var(&c.GenTemperature, "gen-temperature", c.GenTemperature, "generator sampling temperature")
	f.IntVar(&c.MaxQueryTokens, "max-query-tokens", c.MaxQueryTokens, "new tokens per generated query")
	f.IntVar(&c.MaxDocTokens, "max-doc-tokens", c.MaxDocTokens, "new tokens per hypothetical document")
}

// addSelflearnTrainingFlags adds the flags of mining and of both trainings.
func addSelflearnTrainingFlags(cmd *cobra.Command, o *selflearnOptions) {
	c := &o.Config
	f := cmd.Flags()
	f.IntVar(&c.RankFrom, "neg-from", c.RankFrom, "hard negatives: first rank (0-based, inclusive)")
	f.IntVar(&c.RankTo, "neg-to", c.RankTo, "hard negatives: last rank (exclusive)")
	f.IntVar(&c.NumNegatives, "negatives", c.NumNegatives, "hard negatives per query")
	f.Float64Var(&c.NegativeMaxScore, "negative-max-score", c.NegativeMaxScore, "hard negatives: drop candidates scoring above this fraction of the positive's score, e.g. 0.95 (0 = off)")
	minInt(f, 0, "negatives")
	f.Float64Var(&c.Temperature, "temperature", c.Temperature, "InfoNCE temperature")
	f.Float64Var(&c.RetrieverLR, "retriever-lr", c.RetrieverLR, "retriever AdamW peak learning rate")
	f.BoolVar(&c.SkipNonFinite, "skip-nonfinite", false, "retriever training: skip and count updates whose loss or gradient is not finite (default: stop with an error)")
	f.IntVar(&c.RetrieverBatch, "retriever-batch", c.RetrieverBatch, "retriever batch size")
	f.Float64Var(&c.GeneratorLR, "generator-lr", c.GeneratorLR, "generator AdamW peak learning rate (T5 and decoder LoRA)")
	f.IntVar(&c.GeneratorBatch, "generator-batch", c.GeneratorBatch, "generator SFT batch size (a decoder's LoRA: 2 unless set)")
	f.IntVar(&o.LoRAWarmup, "generator-warmup-steps", lora.DefaultConfig().WarmupSteps, "decoder generator LoRA: linear warmup updates before the cosine decay (T5: --warmup-ratio)")
	f.IntVar(&o.LoRASaveSteps, "generator-save-steps", 0, "decoder generator LoRA: a resumable checkpoint every N updates (0: at the end only)")
	f.IntVar(&c.Epochs, "epochs", c.Epochs, "epochs of both trainings per round")
	f.IntVar(&c.MaxLength, "max-length", c.MaxLength, "retriever max sequence length (tokens)")
	f.IntVar(&c.SubBatchTokens, "sub-batch-tokens", 0, "retriever training: padded tokens per GradCache encoder pass, which bounds its activation memory (0: 4096)")
	f.BoolVar(&c.GradientCheckpointing, "gradient-checkpointing", false, "retriever and generator training: "+"recompute each transformer block in the backward pass instead of keeping its activations (HF gradient_checkpointing): the same gradients, less memory, about one more forward pass per step")
	f.Int64Var(&c.Seed, "seed", c.Seed, "seed for sampling, negatives and data order")
}

// selflearnSettings are the flags that override the recipe, the start
// retriever's settings or make a decoder generator's LoRA, by the
// selflearn.Settings.Explicit name each sets.
var selflearnSettings = map[string]string{"retriever-lr": "RetrieverLR", "retriever-batch": "RetrieverBatch", "epochs": "Epochs",
	"fusion-holdout": "FusionHoldout", "queries-per-chunk": "QueriesPerChunk", "max-length": "MaxLength", "generator-lr": "GeneratorLR",
	"generator-batch": "GeneratorBatch", "generator-warmup-steps": "LoRAWarmupSteps", "generator-save-steps": "LoRASaveSteps"}

// selflearnConfig is the Config of the flags: BM25, backend, resume and
// chunking set, then selflearn.Prepare (recipe, decoder LoRA, the start
// retriever's settings), validated.
func selflearnConfig(g *globals, o selflearnOptions) (selflearn.Config, error) {
	cfg := o.Config
	if cfg.RetrieverDir != "" {
		recipe, err := resolveRecipe(o.Recipe, cfg.RetrieverDir)
		if err != nil {
			return cfg, err
		}
		o.Recipe = recipe
	}
	if o.EvalQA == "" || o.Config.RetrieverDir == "" {
		return cfg, fmt.Errorf("--retriever and --eval-qa are required")
	}
	if o.Relevan != "contains" && o.Relevan != "span" {
		return cfg, fmt.Errorf("--relevance %q: want contains or span", o.Relevan)
	}
	bm, err := o.BM25.Config()
	if err != nil {
		return cfg, err
	}
	if !bm.Equal(bm25.DefaultConfig()) {
		cfg.BM25 = bm // else zero: the config hash of earlier runs stays
	}
	cfg.Backend = g.Backend
	cfg.ResumeRunID = o.Resume
	cfg.ChunkSize, cfg.ChunkOverlap = o.Corpus.ChunkSize, o.Corpus.Overlap
	o.GenServers.apply(&cfg)
	s := selflearn.Settings{Recipe: o.Recipe, LoRAWarmupSteps: o.LoRAWarmup, LoRASaveSteps: o.LoRASaveSteps}
	for flag, name := range selflearnSettings {
		if o.changed[flag] {
			s.Explicit = append(s.Explicit, name)
		}
	}
	return selflearn.Prepare(cfg, s, g.Err)
}

func runSelflearn(ctx context.Context, g *globals, o selflearnOptions) error {
	cfg, err := selflearnConfig(g, o)
	if err != nil {
		return err
	}
	// Before the corpus is read: a retriever step that cannot fit stops here.
	if err := checkRetrieverMemory(g.Err, cfg.RetrieverDir, cfg.MaxLength, cfg.SubBatchTokens, cfg.GradientCheckpointing); err != nil {
		return err
	}
	chunks, queries, qrels, err := selflearnInputs(g, &o)
	if err != nil {
		return err
	}
	st, err := openStore(g)
	if err != nil {
		return err
	}
	defer st.Close()
	stages := progress.NewStages(g.Err, "selflearn")
	rep, err := selflearn.Run(ctx, cfg, chunks, queries, qrels, st, stages.Func())
	stages.Finish()
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.Out, rep)
	}
	fmt.Fprintf(g.Out, "run %s (generator %s)\n\n", rep.RunID, rep.Generator)
	return rep.Table(g.Out)
}

// selflearnInputs loads the corpus' chunks and the evaluation questions
// with their chunk-level judgments: qrels built by --relevance for a QA
// CSV, a BEIR set's qrels given to every chunk of a judged document.
func selflearnInputs(g *globals, o *selflearnOptions) ([]data.Chunk, []data.Query, data.Qrels, error) {
	docs, chunks, err := o.Corpus.load(g)
	if err != nil {
		return nil, nil, nil, err
	}
	if o.Corpus.encoded != nil && o.Relevan == "span" {
		return nil, nil, nil, fmt.Errorf("--relevance span needs the source documents; a pre-encoded corpus (%s) holds only chunks (use contains)", o.Corpus.Path)
	}
	queries, qrels, err := data.OpenQueries(o.EvalQA, o.Split)
	if err != nil {
		return nil, nil, nil, err
	}
	if o.Limit > 0 && o.Limit < len(queries) {
		queries = queries[:o.Limit]
	}
	if qrels == nil {
		rule := eval.Rule{}
		if o.Relevan == "span" {
			rule = eval.SpanRule(docs)
		}
		qrels, err = eval.BuildQrels(queries, chunks, rule)
	} else if o.Corpus.ChunkSize > 0 {
		qrels = eval.ChunkQrels(qrels, chunks)
	}
	return chunks, queries, qrels, err
}
