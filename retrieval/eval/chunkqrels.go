package eval

import "github.com/ragforge/ragforge/data"

// ChunkQrels turns document-level qrels into chunk-level ones: every chunk
// of a relevant document inherits its grade (BEIR data that was chunked).
func ChunkQrels(qrels data.Qrels, chunks []data.Chunk) data.Qrels {
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
