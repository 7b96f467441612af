// Package hyde builds query representations from hypothetical documents,
// following SL-HyDE (Li et al., "AutoMIR: Effective Zero-Shot Medical
// Information Retrieval without Relevance Labels", §3, Eq. 10–11) and HyDE
// (Gao et al. 2022): an LLM writes N hypothetical documents d′_1..d′_N for
// query q, and the retriever searches with
//
//	v_q = ( Σ_{k=1..N} e(d′_k) + e(q) ) / (N + 1)          (Eq. 10–11)
//
// The paper's ablations are available as modes: document only (the mean of
// the e(d′_k) without e(q), HyDE's original form without the query) and
// string concatenation (q and the d′_k joined into one text and encoded
// once).
//
// Normalisation: e(·) of a normalised encoder (BGE, MedEmbed) has unit
// norm, but an average of unit vectors does not. FAISS inner product equals
// cosine similarity only for unit vectors, so with normalize the fused
// vector is L2-normalised again after averaging. This changes no ranking
// under inner product (it scales all scores of one query by the same
// positive factor) but keeps scores in [-1, 1] and comparable across
// queries.
package hyde

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/ragforge/ragforge/retrieval/encode"
)

// Mode selects how query and hypothetical documents are combined.
type Mode string

const (
	// ModeFusion is SL-HyDE's Eq. 10–11: mean of e(q) and the e(d′_k). The
	// default (the zero Mode means ModeFusion).
	ModeFusion Mode = "fusion"
	// ModeDocOnly is the ablation "document only": mean of the e(d′_k).
	ModeDocOnly Mode = "doc_only"
	// ModeConcat is the ablation "string concatenation": e(q + " " + d′_1 +
	// " " + ... + d′_N), see ConcatText.
	ModeConcat Mode = "concat"
)

// Valid reports whether m is one of the modes (or empty, i.e. ModeFusion).
func (m Mode) Valid() bool {
	return m == "" || m == ModeFusion || m == ModeDocOnly || m == ModeConcat
}

// DefaultN is the default number of hypothetical documents per query: one
// generation per query, ragforge's setting (HyDE, Gao et al., sampled 8;
// N is configurable through Config.N).
const DefaultN = 1

// Fuse combines query and hypothetical-document embeddings, all of the same
// dimension d:
//
//	ModeFusion:  (Σ_k docs[k] + q) / (len(docs) + 1)    (Eq. 10–11)
//	ModeDocOnly: Σ_k docs[k] / len(docs)
//	ModeConcat:  q, which must already be e(ConcatText(query, hypos)); docs
//	             are ignored.
//
// With normalize the result is divided by its L2 norm (a zero vector is
// left as is), see the package doc. Sums are accumulated in float64.
// It returns a new slice and never modifies its inputs. Errors: an unknown
// mode, a vector whose length differs from len(q), or ModeDocOnly without
// documents.
func Fuse(q []float32, docs [][]float32, mode Mode, normalize bool) ([]float32, error) {
	d := len(q)
	acc := make([]float64, d)
	n := 0
	add := func(v []float32, what string) error {
		if len(v) != d {
			return fmt.Errorf("hyde: fuse: %s has length %d, query %d", what, len(v), d)
		}
		for i, x := range v {
			acc[i] += float64(x)
		}
		n++
		return nil
	}
	switch mode {
	case ModeFusion, "":
		if err := add(q, "query"); err != nil {
			return nil, err
		}
		fallthrough
	case ModeDocOnly:
		for k, v := range docs {
			if err := add(v, fmt.Sprintf("document %d", k)); err != nil {
				return nil, err
			}
		}
		if n == 0 {
			return nil, errors.New("hyde: fuse: document-only mode needs at least one hypothetical document")
		}
	case ModeConcat:
		if err := add(q, "query"); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("hyde: fuse: unknown mode %q", mode)
	}
	var ss float64
	for i := range acc {
		acc[i] /= float64(n)
		ss += acc[i] * acc[i]
	}
	scale := 1.0
	if normalize && ss > 0 {
		scale = 1 / math.Sqrt(ss)
	}
	out := make([]float32, d)
	for i, x := range acc {
		out[i] = float32(x * scale)
	}
	return out, nil
}

// ConcatText is the text of the "string concatenation" ablation: the query
// followed by the hypothetical documents, joined by single spaces.
func ConcatText(query string, hypos []string) string {
	return strings.Join(append([]string{query}, hypos...), " ")
}

// Config sets how Encode and EncodeBatch build query vectors.
type Config struct {
	Mode Mode
	// N is the number of hypothetical documents used (the first N given);
	// 0 means all given. DefaultN is the paper's setting.
	N int
	// Normalize re-normalises the fused vector; set it when the encoder
	// normalises (BGE, MedEmbed) and the index ranks by inner product.
	Normalize bool
}

// DefaultConfig is ModeFusion, N = DefaultN, Normalize true (BGE).
func DefaultConfig() Config { return Config{Mode: ModeFusion, N: DefaultN, Normalize: true} }

// Encode returns the query vector of query given its hypothetical documents
// hypos: EncodeBatch of one query.
func Encode(enc encode.Encoder, cfg Config, query string, hypos []string) ([]float32, error) {
	v, err := EncodeBatch(enc, cfg, []string{query}, [][]string{hypos})
	if err != nil {
		return nil, err
	}
	return v[0], nil
}

// EncodeBatch returns one query vector per query, given each query's
// hypothetical documents hypos[i] (the first cfg.N of them when cfg.N > 0):
// the queries are embedded with one enc.EncodeQueries call and all their
// documents with one enc.EncodeDocs call (ModeFusion, ModeDocOnly), or the
// ConcatText of each query with one EncodeQueries call (ModeConcat); then
// Fuse per query. Under ModeDocOnly a query without documents is searched
// by its own embedding (ModeFusion of the query alone), as HyDE falls back
// to the plain query when nothing was generated. Results equal those of
// Encode query by query up to the encoder's batching (float rounding).
// Errors: an unknown mode, len(hypos) != len(queries), encoder errors and
// those of Fuse.
func EncodeBatch(enc encode.Encoder, cfg Config, queries []string, hypos [][]string) ([][]float32, error) {
	if len(hypos) != len(queries) {
		return nil, fmt.Errorf("hyde: encode: %d hypothetical-document lists for %d queries", len(hypos), len(queries))
	}
	if !cfg.Mode.Valid() {
		return nil, fmt.Errorf("hyde: encode: unknown mode %q", cfg.Mode)
	}
	used := make([][]string, len(hypos))
	for i, h := range hypos {
		if cfg.N > 0 && len(h) > cfg.N {
			h = h[:cfg.N]
		}
		used[i] = h
	}
	out := make([][]float32, len(queries))
	if cfg.Mode == ModeConcat {
		texts := make([]string, len(queries))
		for i, q := range queries {
			texts[i] = ConcatText(q, used[i])
		}
		qv, err := enc.EncodeQueries(texts)
		if err != nil {
			return nil, fmt.Errorf("hyde: encode concatenation: %w", err)
		}
		for i := range out {
			if out[i], err = Fuse(qv[i], nil, ModeConcat, cfg.Normalize); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	// e(q) for the queries that use it: all but document-only ones with documents.
	var qtexts []string
	for i, q := range queries {
		if cfg.Mode != ModeDocOnly || len(used[i]) == 0 {
			qtexts = append(qtexts, q)
		}
	}
	var qv [][]float32
	if len(qtexts) > 0 {
		var err error
		if qv, err = enc.EncodeQueries(qtexts); err != nil {
			return nil, fmt.Errorf("hyde: encode %d queries: %w", len(qtexts), err)
		}
	}
	var docs []string
	for _, h := range used {
		docs = append(docs, h...)
	}
	var dv [][]float32
	if len(docs) > 0 {
		var err error
		if dv, err = enc.EncodeDocs(docs); err != nil {
			return nil, fmt.Errorf("hyde: encode %d hypothetical documents: %w", len(docs), err)
		}
	}
	atQ, atD := 0, 0
	for i, h := range used {
		mode, q := cfg.Mode, []float32(nil)
		switch {
		case mode == ModeDocOnly && len(h) > 0:
			q = make([]float32, enc.Dim())
		case mode == ModeDocOnly:
			mode = ModeFusion // nothing generated: the plain query
			fallthrough
		default:
			q = qv[atQ]
			atQ++
		}
		var err error
		if out[i], err = Fuse(q, dv[atD:atD+len(h)], mode, cfg.Normalize); err != nil {
			return nil, err
		}
		atD += len(h)
	}
	return out, nil
}
