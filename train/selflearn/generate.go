package selflearn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/train/lora"
)

// genItems generates the items of kind under keys that are not stored
// without error, GenBatch at a time, storing each item after its batch. gen
// receives the indices (into keys) to generate. It returns the stored texts
// of every successful key and the number of failed items.
func (s *state) genItems(ctx context.Context, stage, kind string, keys []string,
	gen func(ctx context.Context, idx []int) ([][]string, []error), rd *Round) (map[string][]string, int, error) {
	ok := map[string][]string{}
	var pending []int
	for i, k := range keys {
		var it genItem
		found, err := s.run.GetItem(kind, k, &it)
		if err != nil {
			return nil, 0, err
		}
		if found && it.Error == "" {
			ok[k] = it.Texts
		} else {
			pending = append(pending, i)
		}
	}
	done := len(keys) - len(pending)
	s.report(stage, done, len(keys))
	for b := 0; b < len(pending); b += s.cfg.GenBatch {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		idx := pending[b:min(b+s.cfg.GenBatch, len(pending))]
		outs, errs := gen(ctx, idx)
		if err := ctx.Err(); err != nil {
			return nil, 0, err // results of a cancelled call are not stored
		}
		for j, i := range idx {
			it := genItem{Texts: outs[j]}
			if errs[j] != nil {
				it = genItem{Error: errs[j].Error()}
			}
			if err := s.run.PutItem(kind, keys[i], it); err != nil {
				return nil, 0, err
			}
			if it.Error == "" {
				ok[keys[i]] = it.Texts
			}
		}
		done += len(idx)
		s.report(stage, done, len(keys))
	}
	failed := 0
	for _, k := range keys {
		if _, good := ok[k]; !good {
			failed++
			if rd != nil && len(rd.Errors) < 20 {
				var it genItem
				if _, err := s.run.GetItem(kind, k, &it); err == nil {
					rd.Errors = append(rd.Errors, fmt.Sprintf("%s %s: %s", kind, k, it.Error))
				}
			}
		}
	}
	return ok, failed, nil
}

// sample returns the chunk indices sampled in round t.
func (s *state) sample(t int) []int {
	perm := rand.New(rand.NewPCG(uint64(s.cfg.Seed), uint64(t))).Perm(len(s.corpus))
	if s.cfg.Samples > 0 && s.cfg.Samples < len(perm) {
		perm = perm[:s.cfg.Samples]
	}
	sort.Ints(perm)
	return perm
}

func (s *state) genOpt(t int, n, maxNew int) lm.Options {
	return lm.Options{MaxNewTokens: maxNew, Temperature: s.cfg.GenTemperature, TopP: s.cfg.TopP,
		Seed: s.cfg.Seed + int64(t), N: n}
}

// tunable reports whether the generator can be fine-tuned here: a T5
// (FineTuneT5) or a decoder (LoRA, tuneDecoder) checkpoint directory.
func (s *state) tunable() bool {
	switch g := s.gen0.(type) {
	case *lm.T5:
		return g.Dir != ""
	case *lm.Decoder:
		return g.Dir != ""
	}
	return false
}

// generator returns G_tag: the initial generator (tag 0), else the tuned
// checkpoint round-<tag>/generator, loaded as the initial one's kind.
func (s *state) generator(tag int) (lm.Generator, error) {
	if g, ok := s.gens[tag]; ok {
		return g, nil
	}
	dir := filepath.Join(s.roundDir(tag), "generator")
	var g lm.Generator
	switch g0 := s.gen0.(type) {
	case *lm.Decoder:
		d, err := lm.LoadDecoder(dir, s.cfg.Backend)
		if err != nil {
			return nil, err
		}
		g = d
	case *lm.T5:
		t5, err := lm.LoadT5(dir, s.cfg.Backend)
		if err != nil {
			return nil, err
		}
		t5.MaxInputTokens = g0.MaxInputTokens
		g = t5
	default:
		return nil, fmt.Errorf("selflearn: generator %s cannot be tuned, so it has no round %d checkpoint", s.gen0.Name(), tag)
	}
	s.gens[tag] = g
	return g, nil
}

// genTag is the tag of the generator after round t: the last round ≤ t
// whose generator fine-tuning finished (a round without selected pairs
// tunes nothing and keeps G_{t−1}); 0 when the generator is not tuned.
func (s *state) genTag(t int) int {
	if !s.tunable() {
		return 0
	}
	for ; t > 0; t-- {
		if done, err := s.stepDone(t, "sft"); err == nil && done {
			return t
		}
	}
	return 0
}

// evalHypos returns the hypothetical documents of every evaluation query
// by generator tag (stored as KindEvalHypo "g<tag>/<query id>"); failed
// queries get none (HyDE then uses the plain query).
func (s *state) evalHypos(ctx context.Context, tag int, rd *Round) (map[string][]string, error) {
	g, err := s.generator(tag)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(s.queries))
	pfx := "g" + strconv.Itoa(tag) + "/"
	for i, q := range s.queries {
		keys[i] = pfx + q.ID
	}
	got, nErr, err := s.genItems(ctx, pfx+"eval-hypo", KindEvalHypo, keys, func(ctx context.Context, sel []int) ([][]string, []error) {
		q := make([]string, len(sel))
		for j, i := range sel {
			q[j] = s.queries[i].Text
		}
		return generate.HypoDocs(ctx, g, s.cfg.HypoTemplate, q, nil, s.genOpt(0, max(s.cfg.N, 1), s.cfg.MaxDocTokens))
	}, rd)
	if err != nil {
		return nil, err
	}
	rd.Counts.EvalHypoErrors += nErr
	out := map[string][]string{}
	for k, v := range got {
		out[k[len(pfx):]] = v
	}
	return out, nil
}

func (s *state) selectAll(ctx context.Context, t int, keys []string, qs, cands map[string][]string) (map[string]selItem, error) {
	out := map[string]selItem{}
	stage := roundKey(t, "selection")
	var pending []string
	for _, k := range keys {
		var it selItem
		found, err := s.run.GetItem(KindSelection, k, &it)
		if err != nil {
			return nil, err
		}
		if found {
			out[k] = it
		} else {
			pending = append(pending, k)
		}
	}
	s.report(stage, len(out), len(keys))
	if len(pending) == 0 {
		return out, nil
	}
	ix, enc, err := s.index(t - 1)
	if err != nil {
		return nil, err
	}
	depth := min(s.cfg.SelectionDepth, len(s.corpus))
	// Blocks are fixed over keys (not over the pending items), so a resumed
	// run encodes and searches exactly the batches an uninterrupted one does.
	for b := 0; b < len(keys); b += selectBlock {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		blk := keys[b:min(b+selectBlock, len(keys))]
		todo := false
		for _, k := range blk {
			if _, ok := out[k]; !ok {
				todo = true
			}
		}
		if !todo {
			continue
		}
		var texts []string
		for _, k := range blk {
			texts = append(texts, cands[k]...)
		}
		vecs, err := enc.EncodeDocs(texts)
		if err != nil {
			return nil, fmt.Errorf("selection: %s..%s: %w", blk[0], blk[len(blk)-1], err)
		}
		flat := make([]float32, 0, len(vecs)*enc.Dim())
		for _, v := range vecs {
			flat = append(flat, v...)
		}
		hits, err := ix.Search(flat, depth)
		if err != nil {
			return nil, fmt.Errorf("selection: %s..%s: %w", blk[0], blk[len(blk)-1], err)
		}
		at := 0
		for _, k := range blk {
			nc := len(cands[k])
			if _, ok := out[k]; ok {
				at += nc
				continue
			}
			it := selItem{Query: qs[k][0], Cands: cands[k], Ranks: make([]int, nc)}
			for i, h := range hits[at : at+nc] {
				it.Ranks[i] = RankOf(h, s.chunkOfKey(k))
			}
			at += nc
			it.Best = SelectBest(it.Ranks)
			if err := s.run.PutItem(KindSelection, k, it); err != nil {
				return nil, err
			}
			out[k] = it
		}
		s.report(stage, len(out), len(keys))
	}
	return out, nil
}

// tuneGenerator fine-tunes G_{t−1} on the round's (q, d*) pairs into
// round-<t>/generator (4., Eq. 6): a T5 in full (FineTuneT5), a decoder
// with LoRA (tuneDecoder). The per-update losses go to the run as
// r<t>/generator/loss. A finished step is skipped.
func (s *state) tuneGenerator(ctx context.Context, t int, pairs []SFTPair) error {
	if ok, err := s.stepDone(t, "sft"); ok || err != nil {
		return err
	}
	stage := roundKey(t, "sft")
	s.report(stage, 0, 1)
	out := filepath.Join(s.roundDir(t), "generator")
	var losses []float64
	var err error
	switch g0 := s.gen0.(type) {
	case *lm.Decoder:
		losses, err = s.tuneDecoder(ctx, t, g0, pairs, out)
	case *lm.T5:
		losses, err = s.tuneT5(ctx, t, g0, pairs, out)
	default:
		err = fmt.Errorf("selflearn: generator %s cannot be tuned", s.gen0.Name())
	}
	if err != nil {
		return err
	}
	for i, l := range losses {
		if err := s.run.Metric(fmt.Sprintf("r%d/generator/loss", t), i+1, l); err != nil {
			return err
		}
	}
	if err := s.run.Artifact("generator", filepath.Join(out, "model.safetensors")); err != nil {
		return err
	}
	s.report(stage, 1, 1)
	return s.markDone(t, "sft", out)
}

// prevGeneratorDir is G_{t−1}'s checkpoint directory (genTag: the initial
// one until a round has tuned it).
func (s *state) prevGeneratorDir(t int, initial string) string {
	if tag := s.genTag(t - 1); tag > 0 {
		return filepath.Join(s.roundDir(tag), "generator")
	}
	return initial
}

// tuneT5 fine-tunes a fresh copy of the T5 G_{t−1} (the in-memory one stays
// untouched for the ablations) and saves it to out.
func (s *state) tuneT5(ctx context.Context, t int, g0 *lm.T5, pairs []SFTPair, out string) ([]float64, error) {
	g, err := lm.LoadT5(s.prevGeneratorDir(t, g0.Dir), s.cfg.Backend)
	if err != nil {
		return nil, err
	}
	g.MaxInputTokens = g0.MaxInputTokens
	losses, err := FineTuneT5(ctx, g, pairs, SFTConfig{LearningRate: s.cfg.GeneratorLR, WarmupRatio: s.cfg.WarmupRatio,
		Epochs: s.cfg.Epochs, BatchSize: s.cfg.GeneratorBatch, MaxTargetTokens: s.cfg.MaxTargetTokens,
		Template: s.cfg.HypoTemplate, Seed: s.cfg.Seed + int64(t), GradientCheckpointing: s.cfg.GradientCheckpointing})
	if err != nil {
		return nil, err
	}
	return losses, atomicfile.Dir(out, true, func(tmp string) error {
		if err := g.Model.Save(tmp); err != nil {
			return err
		}
		return g.Tokenizer.Save(tmp)
	})
}

// LoRADir is the LoRA run of a decoder generator inside round-<t>/: its
// checkpoints and the PEFT adapter folder (adapter/), beside the merged
// round-<t>/generator.
const LoRADir = "generator-lora"

// tuneDecoder LoRA-trains the decoder G_{t−1} on pairs (DecoderSFTExamples,
// Config.GeneratorLoRA with seed Seed + t) into round-<t>/generator-lora
// and moves its merged checkpoint to out, so round t+1 and the evaluation
// generate with the tuned weights. A killed run resumes from the newest
// LoRA checkpoint (lora.Train with Resume; GeneratorLoRA.SaveSteps sets
// their spacing) and ends with the same adapter; if it was killed after the
// merge, the merge is redone from the final checkpoint.
func (s *state) tuneDecoder(ctx context.Context, t int, g0 *lm.Decoder, pairs []SFTPair, out string) ([]float64, error) {
	prev := s.prevGeneratorDir(t, g0.Dir)
	c := s.cfg.generatorLoRA()
	c.Seed = s.cfg.Seed + int64(t)
	c.MaxLength = min(c.MaxLength, g0.MaxContext())
	c.GradientCheckpointing = c.GradientCheckpointing || s.cfg.GradientCheckpointing
	examples, err := DecoderSFTExamples(g0.Tokenizer, pairs, s.cfg.HypoTemplate, s.cfg.MaxTargetTokens, c.MaxLength)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(s.roundDir(t), LoRADir)
	stage := roundKey(t, "sft")
	res, err := lora.Train(ctx, lora.Options{Config: c, ModelDir: prev, OutputDir: dir, Backend: s.cfg.Backend, Resume: true, Merge: true},
		examples, nil, func(p lora.Progress) {
			if p.Phase == "train" {
				s.report(stage, p.Step, p.Steps+1) // the last unit is the merge
			}
		})
	if err != nil {
		return nil, err
	}
	// The merge is done (the last unit), and skipped or resumed steps
	// report nothing: end the bar at its total.
	s.report(stage, res.TotalSteps+1, res.TotalSteps+1)
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	if err := os.Rename(res.MergedDir, out); err != nil {
		return nil, err
	}
	losses := make([]float64, len(res.History))
	for i, h := range res.History {
		losses[i] = h.Loss
	}
	return losses, nil
}
