// Package retrieve assembles ragforge's retrievers over a chunked corpus —
// BM25, dense (encoder + FAISS) and their RRF hybrid — and runs a query set
// through them for evaluation. The CLI, the demo and the server share it.
package retrieve

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
)

// CorpusOptions says where a corpus is and how to chunk it.
type CorpusOptions struct {
	Path   string            // HF save_to_disk dir, BEIR dir, .jsonl or .csv
	Fields data.FieldOptions // --text-field/--id-field/--title-field
	// Chunk is the recursive splitter's configuration; Size 0 indexes whole
	// documents (one chunk each, as BEIR evaluation expects).
	Chunk chunk.Config
}

// LoadChunks loads the corpus at opt.Path and splits it.
// progress receives (documents split, total documents).
func LoadChunks(opt CorpusOptions, progress func(done, total int)) ([]data.Document, []data.Chunk, error) {
	docs, err := loadDocs(opt)
	if err != nil {
		return nil, nil, err
	}
	if len(docs) == 0 {
		return nil, nil, fmt.Errorf("corpus %s: no documents", opt.Path)
	}
	if opt.Chunk.Size == 0 {
		chunks := make([]data.Chunk, len(docs))
		for i, d := range docs {
			text := d.Text
			if d.Title != "" {
				text = d.Title + " " + d.Text // BEIR convention: title + text
			}
			chunks[i] = data.Chunk{ID: d.ID, DocID: d.ID, Text: chunk.Collapse(text), Start: 0, End: len(d.Text), Meta: d.Meta}
		}
		return docs, chunks, nil
	}
	chunks, _, err := chunk.SplitAll(docs, opt.Chunk, progress)
	if err != nil {
		return nil, nil, fmt.Errorf("chunk %s: %w", opt.Path, err)
	}
	return docs, chunks, nil
}

func loadDocs(opt CorpusOptions) ([]data.Document, error) {
	st, err := os.Stat(opt.Path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(opt.Path, "corpus.jsonl")); err == nil {
			return data.LoadJSONL(filepath.Join(opt.Path, "corpus.jsonl"), opt.Fields)
		}
	}
	return data.LoadCorpus(opt.Path, opt.Fields)
}

// Queries loads an evaluation set: an AP QA CSV (Question, Ground_Truth,
// Context), or a BEIR directory (queries.jsonl + qrels/<split>.tsv). qrels is
// nil for the CSV (judgments come from the relevance rule) and set for BEIR.
func Queries(path, split string) ([]data.Query, data.Qrels, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("queries: %w", err)
	}
	if st.IsDir() {
		if split == "" {
			split = "test"
		}
		qs, err := data.LoadBEIRQueries(filepath.Join(path, "queries.jsonl"))
		if err != nil {
			return nil, nil, err
		}
		qrels, err := data.LoadQrels(filepath.Join(path, "qrels", split+".tsv"))
		if err != nil {
			return nil, nil, err
		}
		var kept []data.Query
		for _, q := range qs {
			if _, ok := qrels[q.ID]; ok {
				kept = append(kept, q)
			}
		}
		return kept, qrels, nil
	}
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		qs, err := data.LoadAPQA(path)
		return qs, nil, err
	}
	return nil, nil, fmt.Errorf("queries %s: want an AP QA .csv or a BEIR directory", path)
}
