package serve

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/retrieval/hyde"
	"github.com/ragforge/ragforge/retrieval/search"
)

// batchedEncoder is an encode.Encoder whose EncodeQueries and EncodeDocs
// calls from concurrent requests are merged by two Batchers (one text per
// item).
type batchedEncoder struct {
	encode.Encoder
	queries, docs *Batcher[string, []float32]
}

func newBatchedEncoder(e encode.Encoder, maxBatch int, wait time.Duration, m *Metrics) *batchedEncoder {
	return &batchedEncoder{
		Encoder: e,
		queries: NewBatcher(e.EncodeQueries, maxBatch, wait, func(n int) { m.ObserveBatch("encode_queries", n) }),
		docs:    NewBatcher(e.EncodeDocs, maxBatch, wait, func(n int) { m.ObserveBatch("encode_docs", n) }),
	}
}

func (b *batchedEncoder) EncodeQueries(texts []string) ([][]float32, error) {
	return b.queries.Do(context.Background(), texts)
}

func (b *batchedEncoder) EncodeDocs(texts []string) ([][]float32, error) {
	return b.docs.Do(context.Background(), texts)
}

// queriesCtx and docsCtx are EncodeQueries and EncodeDocs stopping at the
// next micro-batch when ctx ends.
func (b *batchedEncoder) queriesCtx(ctx context.Context, texts []string) ([][]float32, error) {
	return b.queries.Do(ctx, texts)
}

func (b *batchedEncoder) docsCtx(ctx context.Context, texts []string) ([][]float32, error) {
	return b.docs.Do(ctx, texts)
}

func (b *batchedEncoder) close() {
	b.queries.Close()
	b.docs.Close()
}

// RetrieveRequest is the body of POST /v1/retrieve.
type RetrieveRequest struct {
	Query string `json:"query"`
	// Mode is bm25, dense, hybrid or hyde; empty takes the pipeline default.
	Mode search.Mode `json:"mode,omitempty"`
	// K is the number of hits (1..Options.MaxK); 0 takes the default.
	K int `json:"k,omitempty"`
	// Corpora selects corpora by name; empty means all.
	Corpora []string `json:"corpora,omitempty"`
	// Balanced overrides the pipeline's balanced multi-corpus setting.
	Balanced *bool `json:"balanced,omitempty"`
	// HypotheticalDocuments are used by mode hyde instead of asking the
	// LLM (SL-HyDE's d′_k).
	HypotheticalDocuments []string `json:"hypothetical_documents,omitempty"`
}

// Hit is one retrieved chunk with its text and source.
type Hit struct {
	ID     string         `json:"id"`
	Corpus string         `json:"corpus"`
	DocID  string         `json:"doc_id"`
	Index  int            `json:"index"`
	Score  float64        `json:"score"`
	Text   string         `json:"text"`
	Start  int            `json:"start"`
	End    int            `json:"end"`
	Meta   map[string]any `json:"meta,omitempty"`
}

// RetrieveResponse is the answer of POST /v1/retrieve.
type RetrieveResponse struct {
	Mode       search.Mode `json:"mode"`
	K          int         `json:"k"`
	Corpora    []string    `json:"corpora"`
	Balanced   bool        `json:"balanced"`
	Hypotheses []string    `json:"hypothetical_documents,omitempty"`
	Hits       []Hit       `json:"hits"`
	TookMs     float64     `json:"took_ms"`
}

// requestError is a client error (4xx): the request is wrong, not the server.
type requestError struct {
	code    int
	msg     string
	param   string // the request field at fault, when one is
	errCode string // OpenAI's machine-readable code; "" derives it from the status
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{code: 400, msg: fmt.Sprintf(format, args...)}
}

// engine retrieves over the corpora of a pipeline.
type engine struct {
	p      *pipeline.Pipeline
	enc    encode.Encoder // nil without retriever
	llm    LLM            // HyDE documents; may be nil
	maxK   int
	corpus map[string]*pipeline.Corpus // chunk id → corpus
}

func newEngine(p *pipeline.Pipeline, enc encode.Encoder, llm LLM, maxK int) *engine {
	e := &engine{p: p, enc: enc, llm: llm, maxK: maxK, corpus: map[string]*pipeline.Corpus{}}
	for _, c := range p.Corpora {
		for _, ch := range c.Chunks {
			e.corpus[ch.ID] = c
		}
	}
	return e
}

// hit returns the full Hit of a chunk id.
func (e *engine) hit(id string, score float64) (Hit, bool) {
	c, ok := e.corpus[id]
	if !ok {
		return Hit{}, false
	}
	ch, _ := c.Chunk(id)
	return Hit{ID: id, Corpus: c.Name, DocID: ch.DocID, Index: ch.Index, Score: score, Text: ch.Text, Start: ch.Start, End: ch.End, Meta: ch.Meta}, true
}

// text returns a chunk's text (rerank.CrossEncoder's textOf).
func (e *engine) text(id string) (string, bool) {
	c, ok := e.corpus[id]
	if !ok {
		return "", false
	}
	ch, _ := c.Chunk(id)
	return ch.Text, true
}

// normalize validates req and fills its defaults. Client errors are
// *requestError.
func (e *engine) normalize(req *RetrieveRequest) error {
	d := e.p.Manifest.Retrieval
	if strings.TrimSpace(req.Query) == "" {
		return badRequest("field %q: empty", "query")
	}
	if req.Mode == "" {
		req.Mode = d.Mode
		if e.enc == nil && req.Mode.Dense() {
			req.Mode = search.BM25 // a pipeline without retriever only has BM25
		}
	}
	if err := req.Mode.Check(); err != nil {
		return badRequest("field %q: %v", "mode", err)
	}
	if req.Mode.Dense() && e.enc == nil {
		return badRequest("field %q: mode %q needs a dense retriever; this pipeline has none (use bm25)", "mode", req.Mode)
	}
	if req.Mode == search.HyDE && len(req.HypotheticalDocuments) == 0 && e.llm == nil {
		return badRequest("field %q: mode hyde needs hypothetical_documents or a server started with an LLM", "mode")
	}
	if req.K == 0 {
		req.K = d.K
	}
	if req.K < 1 || req.K > e.maxK {
		return badRequest("field %q: %d outside [1, %d] (max-k)", "k", req.K, e.maxK)
	}
	if len(req.Corpora) == 0 {
		req.Corpora = append([]string(nil), e.p.Manifest.Corpora...)
	}
	seen := map[string]bool{}
	for _, c := range req.Corpora {
		if _, ok := e.p.Corpus(c); !ok {
			return badRequest("field %q: unknown corpus %q (have %s)", "corpora", c, strings.Join(e.p.Manifest.Corpora, ", "))
		}
		if seen[c] {
			return badRequest("field %q: corpus %q repeated", "corpora", c)
		}
		seen[c] = true
	}
	if req.Balanced == nil {
		b := d.Balanced
		req.Balanced = &b
	}
	return nil
}

// Retrieve answers a RetrieveRequest: per selected corpus, the mode's
// retriever returns its top k (bm25: BM25; dense: the encoded query in the
// FAISS index; hybrid: weighted RRF of dense and BM25 top-Depth lists, AP
// paper weights; hyde: the SL-HyDE fused vector, Eq. 10–11, in the FAISS
// index); several corpora are combined by fusion.Balanced (RAG²) or, when
// not balanced, by equal-weight RRF. The query is encoded once for all
// corpora.
func (e *engine) Retrieve(ctx context.Context, req RetrieveRequest) (*RetrieveResponse, error) {
	start := time.Now()
	if err := e.normalize(&req); err != nil {
		return nil, err
	}
	cfg := e.config()
	cfg.Mode = req.Mode
	var hypos []string
	if req.Mode == search.HyDE {
		var err error
		if hypos, err = e.hypotheses(ctx, req); err != nil {
			return nil, err
		}
	}
	// The query is encoded once for every corpus.
	qs := []search.Query{{Text: req.Query, Hypos: hypos}}
	vecs, err := (&search.Pipeline{Config: cfg, Encoder: e.enc}).Encode(qs)
	if err != nil {
		return nil, fmt.Errorf("retrieve: %w", err)
	}
	per := map[string][]retrieval.Hit{}
	var lists [][]retrieval.Hit
	for _, name := range req.Corpora {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, _ := e.p.Corpus(name)
		rp := &search.Pipeline{Config: cfg, BM25: c.BM25, Encoder: e.enc}
		if c.Dense != nil {
			rp.Index = c.Dense
		}
		hits, err := searchCorpus(rp, qs, vecs, req.K)
		if err != nil {
			return nil, fmt.Errorf("retrieve: corpus %q: %w", name, err)
		}
		per[name] = hits
		lists = append(lists, hits)
	}
	var fused []retrieval.Hit
	switch {
	case len(lists) == 1:
		fused = lists[0]
	case *req.Balanced:
		fused = fusion.Balanced(per, req.K)
	default:
		if fused, err = fusion.RRF(lists, nil, req.K, fusion.Options{C: cfg.C}); err != nil {
			return nil, fmt.Errorf("retrieve: fuse corpora: %w", err)
		}
	}
	out := &RetrieveResponse{Mode: req.Mode, K: req.K, Corpora: req.Corpora, Balanced: *req.Balanced, Hypotheses: hypos, Hits: make([]Hit, 0, len(fused))}
	for _, h := range fused {
		full, ok := e.hit(h.ID, h.Score)
		if !ok {
			return nil, fmt.Errorf("retrieve: hit %q is not a chunk of the pipeline", h.ID)
		}
		out.Hits = append(out.Hits, full)
	}
	out.TookMs = msSince(start)
	return out, nil
}

// config is the manifest's retrieval settings as a retrieval pipeline
// configuration (the mode is the request's).
func (e *engine) config() search.Config {
	d := e.p.Manifest.Retrieval
	return search.Config{DenseWeight: d.DenseWeight, BM25Weight: d.BM25Weight, C: d.RRFC, Depth: d.Depth,
		HyDE: hyde.Config{Mode: hyde.Mode(d.HyDEMode), N: d.HyDEN, Normalize: d.Normalize}}
}

// hypotheses returns the request's hypothetical documents, or asks the LLM
// for max(HyDEN, 1) of them with the pipeline's HyDE prompt (empty answers
// dropped).
func (e *engine) hypotheses(ctx context.Context, req RetrieveRequest) ([]string, error) {
	if len(req.HypotheticalDocuments) > 0 {
		return req.HypotheticalDocuments, nil
	}
	d := e.p.Manifest.Retrieval
	prompt := strings.ReplaceAll(e.p.Manifest.Prompts.HyDE, "{query}", req.Query)
	var hypos []string
	for range max(d.HyDEN, 1) {
		h, err := e.llm.Complete(ctx, prompt, 0)
		if err != nil {
			return nil, fmt.Errorf("retrieve: hyde: generate: %w", err)
		}
		if strings.TrimSpace(h) != "" {
			hypos = append(hypos, h)
		}
	}
	return hypos, nil
}

// searchCorpus searches one corpus with the query vectors shared by all.
func searchCorpus(rp *search.Pipeline, qs []search.Query, vecs [][]float32, k int) ([]retrieval.Hit, error) {
	if err := rp.Validate(); err != nil {
		return nil, err
	}
	hits, err := rp.SearchVectors(qs, vecs, k)
	if err != nil {
		return nil, err
	}
	return hits[0], nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
