package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/models/decoder"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/hf"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/eval"
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
	BM25    bm25Flags // the BM25 and hybrid variants' BM25 (Config.BM25)
	// A decoder generator's LoRA warmup and checkpoint spacing
	// (Config.GeneratorLoRA).
	LoRAWarmup, LoRASaveSteps int
}

func newSelflearnCmd(g *globals) *cobra.Command {
	o := selflearnOptions{Config: selflearn.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "selflearn",
		Short: "Run SL-HyDE self-learning rounds on an unlabeled corpus and report retrieval before and after each round",
		Long: `Runs SL-HyDE (AutoMIR) rounds on an unlabeled, chunked corpus with generator G
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
are given.`,
		Example: `  ragforge models init --arch bert --size tiny --tokenizer ../shared/fixtures/bert-tiny/vocab.txt --out work/bert-tiny
  ragforge selflearn --corpus ../shared/data/ap_protocols --chunk-size 512 --chunk-overlap 128 \
    --retriever work/bert-tiny --generator ict --rounds 2 --eval-qa ../shared/data/ap_protocols_qa/dev.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Config.RetrieverDir != "" {
				recipe, err := resolveRecipe(o.Recipe, o.Config.RetrieverDir)
				if err != nil {
					return err
				}
				r, err := selflearn.LookupRecipe(recipe)
				if err != nil {
					return err
				}
				x := o.Config
				r.Apply(&o.Config)
				c := &o.Config
				keepExplicit(cmd, map[string]func(){
					"retriever-lr": func() { c.RetrieverLR = x.RetrieverLR }, "retriever-batch": func() { c.RetrieverBatch = x.RetrieverBatch },
					"epochs": func() { c.Epochs = x.Epochs }, "fusion-holdout": func() { c.FusionHoldout = x.FusionHoldout },
					"queries-per-chunk": func() { c.QueriesPerChunk = x.QueriesPerChunk },
				})
				o.Recipe = recipe
			}
			return runSelflearn(cmd, g, o)
		},
	}
	o.Corpus.add(cmd)
	c := &o.Config
	f := cmd.Flags()
	f.StringVar(&c.RetrieverDir, "retriever", "", "initial BERT bi-encoder directory (HF layout) (required)")
	addRecipeFlag(cmd, &o.Recipe, "BERT")
	f.Float64Var(&c.FusionHoldout, "fusion-holdout", c.FusionHoldout, "fraction of each round's pseudo-queries held out of training to choose the hybrid's dense/BM25 weights on (0: the AP paper's 0.3/0.7)")
	f.StringVar(&c.Generator, "generator", "ict", "generator: ict | t5:DIR | hf:DIR (T5 or Llama/Qwen2/Qwen3 by model_type) | qwen2:DIR | llama:DIR | qwen3:DIR (model_type checked) | openai:URL[#model]; a local T5 or decoder is fine-tuned each round")
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
	o.BM25.add(cmd)
	return cmd
}

func runSelflearn(cmd *cobra.Command, g *globals, o selflearnOptions) error {
	if o.EvalQA == "" || o.Config.RetrieverDir == "" {
		return fmt.Errorf("--retriever and --eval-qa are required")
	}
	if o.Relevan != "contains" && o.Relevan != "span" {
		return fmt.Errorf("--relevance %q: want contains or span", o.Relevan)
	}
	cfg := o.Config
	bm, err := o.BM25.config()
	if err != nil {
		return err
	}
	if !bm.Equal(bm25.DefaultConfig()) {
		cfg.BM25 = bm // else zero: the config hash of earlier runs stays
	}
	cfg.Backend = g.Backend
	cfg.ResumeRunID = o.Resume
	cfg.Recipe = o.Recipe
	cfg.ChunkSize, cfg.ChunkOverlap = o.Corpus.ChunkSize, o.Corpus.Overlap
	generatorLoRAFlags(cmd, &cfg, o)
	if err := startRetrieverSettings(cmd, g, &cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Before the corpus is read: a retriever step that cannot fit stops here.
	if err := checkRetrieverMemory(g.Err, cfg.RetrieverDir, cfg.MaxLength, cfg.SubBatchTokens, cfg.GradientCheckpointing); err != nil {
		return err
	}
	docs, chunks, err := o.Corpus.load(g)
	if err != nil {
		return err
	}
	if o.Corpus.encoded != nil && o.Relevan == "span" {
		return fmt.Errorf("--relevance span needs the source documents; a pre-encoded corpus (%s) holds only chunks (use contains)", o.Corpus.Path)
	}
	queries, qrels, err := data.OpenQueries(o.EvalQA, o.Split)
	if err != nil {
		return err
	}
	if o.Limit > 0 && o.Limit < len(queries) {
		queries = queries[:o.Limit]
	}
	if qrels == nil {
		rule := eval.Rule{}
		if o.Relevan == "span" {
			rule = eval.SpanRule(docs)
		}
		if qrels, err = eval.BuildQrels(queries, chunks, rule); err != nil {
			return err
		}
	} else if o.Corpus.ChunkSize > 0 {
		qrels = chunkQrels(qrels, chunks)
	}
	st, err := openStore(g)
	if err != nil {
		return err
	}
	defer st.Close()
	stages := progress.NewStages(g.Err, "selflearn")
	rep, err := selflearn.Run(cmdContext(cmd), cfg, chunks, queries, qrels, st, stages.Func())
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

// generatorLoRAFlags sets cfg.GeneratorLoRA, a decoder generator's LoRA
// SFT, from lora.DefaultConfig() (AutoMIR) and the generator flags the
// user set: --generator-lr, --generator-batch, --epochs,
// --generator-warmup-steps, --generator-save-steps. With none set, or a
// generator that is not a local decoder, it stays zero (the defaults; the
// config hash of T5 runs stays).
func generatorLoRAFlags(cmd *cobra.Command, cfg *selflearn.Config, o selflearnOptions) {
	spec, err := generate.ParseGeneratorSpec(cfg.Generator)
	if err != nil || spec.Dir == "" {
		return // Validate reports a bad spec
	}
	if mt, err := hf.ModelType(spec.Dir); err != nil || !slices.Contains(decoder.ModelTypes(), mt) {
		return
	}
	lc := lora.DefaultConfig()
	set := map[string]func(){
		"generator-lr":           func() { lc.LearningRate = cfg.GeneratorLR },
		"generator-batch":        func() { lc.BatchSize = cfg.GeneratorBatch },
		"epochs":                 func() { lc.Epochs = cfg.Epochs },
		"generator-warmup-steps": func() { lc.WarmupSteps = o.LoRAWarmup },
		"generator-save-steps":   func() { lc.SaveSteps = o.LoRASaveSteps },
	}
	changed := false
	for flag, apply := range set {
		if cmd.Flags().Changed(flag) {
			apply()
			changed = true
		}
	}
	if changed {
		cfg.GeneratorLoRA = lc
	}
}

// chunkQrels turns document-level qrels into chunk-level ones (every chunk
// of a relevant document inherits its grade), for BEIR data that was chunked.
func chunkQrels(qrels data.Qrels, chunks []data.Chunk) data.Qrels {
	byDoc := map[string][]string{}
	for _, c := range chunks {
		byDoc[c.DocID] = append(byDoc[c.DocID], c.ID)
	}
	out := data.Qrels{}
	for q, docs := range qrels {
		out[q] = map[string]int{}
		for d, rel := range docs {
			for _, c := range byDoc[d] {
				out[q][c] = rel
			}
		}
	}
	return out
}

// startRetrieverSettings takes the token limit, the query and document
// prompts and the normalization of the rounds from the start retriever's
// sentence-transformers files (encode.DirSettings) when it has them:
// --max-length overrides the limit and says so on stderr. Every round's retriever is trained and exported
// with them, so the next round reads them back the same way.
func startRetrieverSettings(cmd *cobra.Command, g *globals, cfg *selflearn.Config) error {
	s, src, err := encode.DirSettings(cfg.RetrieverDir)
	if err != nil {
		return err
	}
	if src.MaxLength == encode.SourceModel {
		switch {
		case !cmd.Flags().Changed("max-length"):
			cfg.MaxLength = s.MaxLength
		case cfg.MaxLength != s.MaxLength:
			fmt.Fprintf(g.Err, "retriever %s: --max-length %d overrides the model's %d\n", cfg.RetrieverDir, cfg.MaxLength, s.MaxLength)
		}
	}
	if src.QueryPrefix == encode.SourceModel {
		cfg.QueryInstruction, cfg.DocInstruction, cfg.Unnormalized = s.QueryPrefix, s.PassagePrefix, !s.Normalize
	}
	return nil
}
