// Package label produces, stores and reviews the training labels of the RAG²
// filter (Sohn et al., NAACL 2025, "Rationale-Guided Retrieval Augmented
// Generation for Medical Question Answering").
//
// Two labelers write the same schema:
//
//   - PerplexityLabeler (RAG² §3.1): a snippet is [HELPFUL] when adding it to
//     the prompt lowers a scorer LM's perplexity of the question's rationale
//     (or reference answer) by at least a margin. Scorers are any
//     models/lm.Scorer: a local seq2seq model (lm.T5Scorer), a local
//     Llama/Qwen decoder (lm.Decoder, scoring as vLLM's echo) or an
//     OpenAI-compatible /v1/completions server that returns prompt
//     log-probabilities (lm.HTTPScorer).
//   - EvidenceLabeler: BM25 (or any retrieval.Retriever) candidates are
//     [HELPFUL] when they contain the reference evidence (AP paper's
//     normalized-substring / 5-gram rule, evidence spans, or BEIR qrels).
//
// Examples follow the RAG² filter schema of models/filter (id, question,
// answer, dataset_name), read and written as JSON or JSONL. Every label is
// kept with its provenance in models/labelstore's SQLite store (human
// reviews beside the machine label, never over it; scorer log-probabilities
// cached in the same database, so an interrupted labeling run resumes
// without rescoring finished pairs).
//
// The package prints nothing: progress goes through callbacks.
package label
