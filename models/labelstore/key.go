package labelstore

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
