package pipeline

import (
	"fmt"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// preEncodedPart makes a pipeline corpus of a pre-encoded corpus (--corpus
// rag2:DIR): its stored vectors become the dense index as they are, and the
// manifest's encoder settings become those the corpus was encoded with, so
// the server encodes queries (and any other corpus) the same way. done
// reports whether an earlier corpus already set them; settings that differ
// between corpora are an error, as is a retriever whose weights or
// dimension differ from the corpus's.
func preEncodedPart(m *Manifest, done *bool, retrieverDir, name string, chunks []data.Chunk, pre *data.Encoded) (CorpusPart, error) {
	part := CorpusPart{Name: name, Chunks: chunks}
	if retrieverDir == "" {
		return part, fmt.Errorf("--corpus %s=rag2:%s: a pre-encoded corpus needs --retriever, the encoder of its vectors (for the queries)", name, pre.Root)
	}
	cfg, err := encode.LoadConfig(retrieverDir)
	if err != nil {
		return part, err
	}
	if cfg.HiddenSize != pre.Dim {
		return part, fmt.Errorf("--corpus %s: vectors have dim %d, --retriever %s has hidden size %d", name, pre.Dim, retrieverDir, cfg.HiddenSize)
	}
	if info := pre.Info; info != nil {
		sum, err := encode.WeightsSHA256(retrieverDir)
		if err != nil {
			return part, err
		}
		if info.WeightsSHA256 != "" && sum != "" && sum != info.WeightsSHA256 {
			return part, fmt.Errorf("--retriever %s: weights differ from those corpus %q was encoded with (%s)", retrieverDir, name, info.Encoder)
		}
		r := m.Retrieval
		r.Pooling, r.Normalize, r.MaxLength, r.QueryInstruction, r.DocInstruction = info.Pooling, info.Normalize, info.MaxLength, info.QueryPrefix, info.PassagePrefix
		r.Sources = info.Sources
		if *done && r != m.Retrieval {
			return part, fmt.Errorf("--corpus %s: encoded with other settings (%s) than an earlier pre-encoded corpus", name, data.EncodeInfoFile)
		}
		m.Retrieval, *done = r, true
	}
	ids := make([]string, len(pre.Docs))
	for i, d := range pre.Docs {
		ids[i] = d.ID
	}
	factory := m.FAISSFactory
	if factory == "" {
		factory = "Flat"
	}
	ix, err := dense.Build(ids, pre.Vectors, pre.Dim, factory)
	if err != nil {
		return part, fmt.Errorf("--corpus %s: %w", name, err)
	}
	part.Dense = ix
	return part, nil
}
