package selflearn

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/atomicfile"
	"github.com/ragforge/ragforge/internal/version"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/train/retriever"
	"github.com/ragforge/ragforge/train/trainer"
)

func (s *state) retrieverDir(tag int) string {
	if tag == 0 {
		return s.cfg.RetrieverDir
	}
	return filepath.Join(s.roundDir(tag), "retriever")
}

func (s *state) encoder(tag int) (*encode.BERTEncoder, error) {
	if e, ok := s.encs[tag]; ok {
		return e, nil
	}
	dir := s.retrieverDir(tag)
	pool, err := s.pooling()
	if err != nil {
		return nil, err
	}
	e, err := encode.LoadBERT(dir, s.cfg.Backend, string(pool))
	if err != nil {
		return nil, fmt.Errorf("retriever: %w", err)
	}
	// The settings the rounds train with, whatever the directory declares.
	e.Apply(encode.Settings{Pooling: pool, Normalize: !s.cfg.Unnormalized, MaxLength: s.cfg.MaxLength,
		QueryPrefix: s.cfg.QueryInstruction, PassagePrefix: s.cfg.DocInstruction})
	s.encs[tag] = e
	return e, nil
}

// index returns the FAISS Flat inner-product index of the corpus encoded by
// retriever tag. The vectors are cached in RAG²'s retriever layout under
// WorkDir/vectors (data.WriteRAG2: embeddings/r<tag>/r<tag>_Embeds_0.npy,
// float32 [len(corpus), dim], beside articles/r<tag>/r<tag>_Articles_0.json
// with the chunk ids), so `--corpus rag2:WORK/vectors#r<tag>` and numpy read
// them; a cache made from other chunks or other weights is rebuilt.
func (s *state) index(tag int) (*dense.Index, *encode.BERTEncoder, error) {
	enc, err := s.encoder(tag)
	if err != nil {
		return nil, nil, err
	}
	if ix, ok := s.indexes[tag]; ok {
		return ix, enc, nil
	}
	dim := enc.Dim()
	root, name := filepath.Join(s.cfg.WorkDir, "vectors"), fmt.Sprintf("r%d", tag)
	info, err := enc.Info(s.retrieverDir(tag))
	if err != nil {
		return nil, nil, err
	}
	info.Source, info.ChunkSize, info.ChunkOverlap, info.Version = "selflearn corpus", s.cfg.ChunkSize, s.cfg.ChunkOverlap, version.Version
	var vecs []float32
	if pre, err := data.OpenEncoded(data.EncodedScheme + root + "#" + name); err == nil && s.sameEncoding(pre, info) {
		vecs = pre.Vectors
	} else {
		stage := fmt.Sprintf("r%d/encode-corpus", tag)
		if vecs, _, err = encode.EncodeCorpus(enc, s.corpus, func(d, n int) { s.report(stage, d, n) }); err != nil {
			return nil, nil, err
		}
		for _, sub := range []string{"embeddings", "articles"} {
			if err := os.RemoveAll(filepath.Join(root, sub, name)); err != nil {
				return nil, nil, err
			}
		}
		if err := data.WriteRAG2(root, name, s.corpus, vecs, dim, 0, info); err != nil {
			return nil, nil, err
		}
	}
	ids := make([]string, len(s.corpus))
	for i, c := range s.corpus {
		ids[i] = c.ID
	}
	ix, err := dense.Build(ids, vecs, dim, "Flat")
	if err != nil {
		return nil, nil, err
	}
	s.indexes[tag] = ix
	s.vecs[tag] = vecs
	return ix, enc, nil
}

// sameEncoding reports whether a cached pre-encoded corpus holds the
// corpus's chunks, in order, encoded as info says.
func (s *state) sameEncoding(pre *data.Encoded, info data.EncodeInfo) bool {
	if pre.Info == nil || len(pre.Docs) != len(s.corpus) {
		return false
	}
	got := *pre.Info
	info.Rows, info.Dim, info.Version = got.Rows, got.Dim, got.Version
	if got.Dim != pre.Dim || got != info {
		return false
	}
	for i, d := range pre.Docs {
		if d.ID != s.corpus[i].ID || d.Text != s.corpus[i].Text {
			return false
		}
	}
	return true
}

func (s *state) trainRetriever(ctx context.Context, t int, triplets []retriever.Triplet) error {
	if ok, err := s.stepDone(t, "train-retriever"); ok || err != nil {
		return err
	}
	stage := roundKey(t, "train-retriever")
	rc := retriever.DefaultConfig()
	rc.OutputDir, rc.Backend, rc.Resume = s.retrieverDir(t), s.cfg.Backend, true
	rc.Epochs, rc.BatchSize, rc.LearningRate, rc.WarmupRatio = s.cfg.Epochs, s.cfg.RetrieverBatch, s.cfg.RetrieverLR, s.cfg.WarmupRatio
	rc.Temperature, rc.MaxLength, rc.NumNegatives, rc.NumHypo = s.cfg.Temperature, s.cfg.MaxLength, s.cfg.NumNegatives, max(s.cfg.N, 1)
	if s.cfg.TrainFuse >= 0 {
		rc.NumHypo = s.cfg.TrainFuse
	}
	rc.QueryInstruction, rc.Seed = s.cfg.QueryInstruction, uint64(s.cfg.Seed)+uint64(t)
	rc.DocInstruction, rc.Normalize = s.cfg.DocInstruction, !s.cfg.Unnormalized
	rc.SkipNonFinite = s.cfg.SkipNonFinite
	rc.GradientCheckpointing = s.cfg.GradientCheckpointing
	if s.cfg.SubBatchTokens > 0 {
		rc.SubBatchTokens = s.cfg.SubBatchTokens
	}
	pool, err := s.pooling()
	if err != nil {
		return err
	}
	rc.Pooling = pool
	_, _, total := rc.Plan(len(triplets))
	s.report(stage, 0, total)
	res, err := retriever.Train(ctx, rc, triplets, s.retrieverDir(t-1), s.run, func(e trainer.LogEntry) {
		s.report(stage, e.Step, total)
	})
	if err != nil {
		return err
	}
	// Skipped (non-finite) updates and a resumed, finished training log no
	// entry, so the bar would end short of total: every planned update has run.
	s.report(stage, total, total)
	if err := s.run.Artifact("retriever", filepath.Join(rc.OutputDir, "model.safetensors")); err != nil {
		return err
	}
	note := fmt.Sprintf("steps %d", res.Steps)
	if s.cfg.SkipNonFinite {
		note += fmt.Sprintf(", skipped non-finite %d", res.SkippedNonFinite)
	}
	return s.markDone(t, "train-retriever", note)
}

// copyRetriever makes R_t a copy of R_{t-1} when nothing could be trained.
func (s *state) copyRetriever(t int) error {
	src, dst := s.retrieverDir(t-1), s.retrieverDir(t)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := atomicfile.WriteBytes(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
