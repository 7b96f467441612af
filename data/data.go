// Package data holds ragforge's corpus, query and judgment types and the
// loaders that read them from Hugging Face save_to_disk directories, JSONL,
// CSV and BEIR layouts.
//
// Dependencies point one way: every other ragforge package may import data;
// data imports no other ragforge package (only its own subpackage data/npy).
package data

// Document is one corpus record (a page, an article, a passage).
//
// ID is stable across runs: the source's id field, or the 0-based record
// index ("0", "1", ...) when the source has none. Text is the raw text as stored; Meta keeps every other
// field of the record (for the AP corpus: document_code, category, title,
// page_number, ...), with JSON-compatible values.
type Document struct {
	ID    string         `json:"id"`
	Title string         `json:"title,omitempty"`
	Text  string         `json:"text"`
	Meta  map[string]any `json:"meta,omitempty"`
}

// Chunk is a piece of a Document produced by a splitter.
//
// Start and End are the [Start, End) byte offsets in Document.Text of the span
// the chunk came from (before whitespace collapsing), so evidence spans located
// in the document map back to chunks. Text is the chunk as indexed.
type Chunk struct {
	ID    string         `json:"id"`     // "<doc id>#<index>"
	DocID string         `json:"doc_id"` // Document.ID
	Index int            `json:"index"`  // position among the document's chunks
	Text  string         `json:"text"`
	Start int            `json:"start"`
	End   int            `json:"end"`
	Meta  map[string]any `json:"meta,omitempty"` // copied from the Document
}

// Query is an evaluation or training question.
//
// Answer is the reference answer (AP QA "Ground_Truth"); Context is the
// reference passage (AP QA "Context"), used by the substring/5-gram relevance
// rule and by evidence labels. Both may be empty (BEIR queries).
type Query struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	Answer  string `json:"answer,omitempty"`
	Context string `json:"context,omitempty"`
}

// Qrels maps query id → document (or chunk) id → graded relevance (> 0 is
// relevant), as in BEIR's qrels/<split>.tsv and pytrec_eval.
type Qrels map[string]map[string]int
