// Package label produces, stores and reviews the training labels of the RAG²
// filter (Sohn et al., NAACL 2025, "Rationale-Guided Retrieval Augmented
// Generation for Medical Question Answering").
//
// Two labelers write the same schema:
//
//   - PerplexityLabeler (RAG² §3.1): a snippet is [HELPFUL] when adding it to
//     the prompt lowers a scorer LM's perplexity of the question's rationale
//     (or reference answer) by at least a margin. Scorers are a local seq2seq
//     model (LocalT5Scorer) or an OpenAI-compatible /v1/completions server that
//     returns prompt log-probabilities (HTTPScorer).
//   - EvidenceLabeler: BM25 (or any retrieval.Retriever) candidates are
//     [HELPFUL] when they contain the reference evidence (AP paper's
//     normalized-substring / 5-gram rule, evidence spans, or BEIR qrels).
//
// Examples follow the RAG² filter schema of models/filter (id, question,
// answer, dataset_name), read and written as JSON or JSONL. Every label is kept in SQLite (Store) with
// its provenance; human reviews are stored beside the machine label, never over
// it. Scorer log-probabilities are cached in the same database, so an
// interrupted labeling run resumes without rescoring finished pairs.
//
// The package prints nothing: progress goes through callbacks.
package label

import (
	"crypto/sha256"
	"encoding/hex"
)

// Label methods recorded as provenance.
const (
	MethodPerplexity = "perplexity"
	MethodEvidence   = "evidence"
	MethodImport     = "import" // read from an existing RAG² JSON/JSONL file
)

// Key is the identity of a (question, snippet) pair shared by every run and
// method, used to diff runs and to find perplexity/evidence disagreements:
// 16 hex digits of sha256(question), ":", and the chunk id, or when chunkID is
// empty "sha:" and 16 hex digits of sha256(snippet).
func Key(question, chunkID, snippet string) string {
	q := shortHash(question)
	if chunkID != "" {
		return q + ":" + chunkID
	}
	return q + ":sha:" + shortHash(snippet)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

func fullHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
