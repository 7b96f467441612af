package data

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Corpus is an opened corpus: its documents, or, for a pre-encoded corpus
// ("rag2:DIR"), its stored chunks and vectors.
type Corpus struct {
	// Path is the argument Open was given.
	Path string
	// Docs are the documents; nil for a pre-encoded corpus, whose records
	// are already chunks (Encoded.Chunks).
	Docs []Document
	// Encoded is the pre-encoded corpus for "rag2:DIR[#name]"; nil otherwise.
	Encoded *Encoded
}

// Open opens the corpus a command line names:
//
//   - "rag2:DIR" or "rag2:DIR#name": OpenEncoded (RAG²'s retriever layout,
//     chunks with their vectors; fields do not apply);
//   - a directory with corpus.jsonl (BEIR layout): LoadJSONL of that file;
//   - a directory with state.json or dataset_dict.json: LoadHFDataset;
//   - a .jsonl or .csv file: LoadJSONL or LoadCSV.
//
// Errors: a missing path, an unknown format, the readers' record errors
// (naming file, record and field), and a corpus without documents.
func Open(path string, fields FieldOptions) (*Corpus, error) {
	if IsEncodedSpec(path) {
		enc, err := OpenEncoded(path)
		if err != nil {
			return nil, err
		}
		return &Corpus{Path: path, Encoded: enc}, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var docs []Document
	if c := filepath.Join(path, "corpus.jsonl"); st.IsDir() && exists(c) {
		docs, err = LoadJSONL(c, fields)
	} else {
		docs, err = LoadCorpus(path, fields)
	}
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("corpus %s: no documents", path)
	}
	return &Corpus{Path: path, Docs: docs}, nil
}

// OpenQueries loads an evaluation set: an AP QA CSV (Question,
// Ground_Truth, Context), or a BEIR directory (queries.jsonl +
// qrels/<split>.tsv, split "" meaning "test"; only the judged queries are
// kept, in file order). qrels is nil for the CSV (judgments then come from
// a relevance rule, retrieval/eval.BuildQrels) and set for BEIR.
func OpenQueries(path, split string) ([]Query, Qrels, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("queries: %w", err)
	}
	if st.IsDir() {
		if split == "" {
			split = "test"
		}
		qs, err := LoadBEIRQueries(filepath.Join(path, "queries.jsonl"))
		if err != nil {
			return nil, nil, err
		}
		qrels, err := LoadQrels(filepath.Join(path, "qrels", split+".tsv"))
		if err != nil {
			return nil, nil, err
		}
		var kept []Query
		for _, q := range qs {
			if _, ok := qrels[q.ID]; ok {
				kept = append(kept, q)
			}
		}
		return kept, qrels, nil
	}
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		qs, err := LoadAPQA(path)
		return qs, nil, err
	}
	return nil, nil, fmt.Errorf("queries %s: want an AP QA .csv or a BEIR directory", path)
}
