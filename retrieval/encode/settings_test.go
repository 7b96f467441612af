package encode

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ragforge/ragforge/models/hf"
)

// stReference embeds text as sentence-transformers' encode_query /
// encode_document document it (SentenceTransformer.py and
// models/Transformer.py, v5.1): prompt + text tokenized as [CLS] … [SEP],
// truncated to maxSeqLength tokens (the prompt's included), last hidden
// states mean-pooled over every token (include_prompt true), then divided
// by the L2 norm (Normalize). It uses only the tokenizer and the model's
// last_hidden_state, none of BERTEncoder.
func stReference(t *testing.T, e *BERTEncoder, prompt, text string, maxSeqLength int) []float64 {
	t.Helper()
	ids := e.Tokenizer.Encode(prompt+text, true)
	if len(ids) > maxSeqLength { // HF truncation: keep [CLS], the first tokens, and [SEP]
		ids = append(append([]int(nil), ids[:maxSeqLength-1]...), ids[len(ids)-1])
	}
	out, err := e.Model.Forward([][]int{ids}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := out.Hidden
	v := make([]float64, h)
	for pos := range ids {
		for j := range v {
			v[j] += float64(out.LastHidden[pos*h+j])
		}
	}
	var norm float64
	for j := range v {
		v[j] /= float64(len(ids))
		norm += v[j] * v[j]
	}
	for j := range v {
		v[j] /= math.Sqrt(norm)
	}
	return v
}

// Issue 36, acceptance 2 (golden): a small exported bi-encoder with mean
// pooling, Normalize, max_seq_length 10 and "query" / "passage" prompts is
// loaded with no settings given, and its query and passage vectors equal
// the documented sentence-transformers semantics within 1e-6 — for texts
// the prompt pushes past max_seq_length too.
func TestLoadBERTFollowsSentenceTransformersSemantics(t *testing.T) {
	toy := toyEncoder(t)
	dir := filepath.Join(t.TempDir(), "st")
	if err := toy.Model.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := toy.Tokenizer.Save(dir); err != nil {
		t.Fatal(err)
	}
	const maxLen = 10
	st := hf.SentenceTransformer{Dim: toy.Dim(), Pooling: "mean", Normalize: true, MaxSeqLength: maxLen}
	if err := hf.WriteSentenceTransformer(dir, st); err != nil {
		t.Fatal(err)
	}
	// "passage", not "document": encode_document's second prompt name.
	prompts := `{"prompts": {"query": "what causes ", "passage": "the kidney "}, "default_prompt_name": null}`
	if err := os.WriteFile(filepath.Join(dir, hf.STVersionFile), []byte(prompts), 0o644); err != nil {
		t.Fatal(err)
	}
	enc, err := LoadBERT(dir, testBackend, "")
	if err != nil {
		t.Fatal(err)
	}
	s, src, err := DirSettings(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Pooling: "mean", Normalize: true, MaxLength: maxLen, QueryPrefix: "what causes ", PassagePrefix: "the kidney "}
	if s != want || src != (Sources{Pooling: "model", Normalize: "model", MaxLength: "model", QueryPrefix: "model", PassagePrefix: "model"}) {
		t.Fatalf("DirSettings = %+v %+v, want %+v from the model", s, src, want)
	}
	q, err := enc.EncodeQueries(texts)
	if err != nil {
		t.Fatal(err)
	}
	d, err := enc.EncodeDocs(texts)
	if err != nil {
		t.Fatal(err)
	}
	truncated := 0
	for i, text := range texts {
		if len(toy.Tokenizer.Encode("the kidney "+text, true)) > maxLen {
			truncated++
		}
		for _, c := range []struct {
			what, prompt string
			got          []float32
		}{{"query", "what causes ", q[i]}, {"passage", "the kidney ", d[i]}} {
			ref := stReference(t, toy, c.prompt, text, maxLen)
			for j := range ref {
				if math.Abs(float64(c.got[j])-ref[j]) > 1e-6 {
					t.Fatalf("%s %q [%d] = %v, sentence-transformers semantics give %v", c.what, text, j, c.got[j], ref[j])
				}
			}
		}
	}
	if truncated == 0 || truncated == len(texts) {
		t.Fatalf("%d of %d texts truncated: the test needs both kinds", truncated, len(texts))
	}
	// Without the files: ragforge's defaults, all from "default".
	bare := t.TempDir()
	if s, src, err := DirSettings(bare); err != nil || s != DefaultSettings() || src.MaxLength != SourceDefault || src.Pooling != SourceDefault {
		t.Errorf("bare directory: %+v %+v %v", s, src, err)
	}
}
