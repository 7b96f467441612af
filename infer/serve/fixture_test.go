package serve

import (
	"bytes"
	"encoding/json"
	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/filter"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/infer/pipeline"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
	"github.com/ragforge/ragforge/models/tokenizer/wordpiece"
)

// Chunks of the tiny pipeline: two corpora, words chosen so BM25 matches
// are known by hand ("hematoxylin" only in tb#0, "formalin" only in pm#0).
var (
	textbook = []data.Chunk{
		{ID: "tb#0", DocID: "tb", Index: 0, Text: "stain sections with hematoxylin for five minutes", End: 48, Meta: map[string]any{"title": "Staining"}},
		{ID: "tb#1", DocID: "tb", Index: 1, Text: "rinse the slides in running tap water", Start: 49, End: 86},
		{ID: "tb#2", DocID: "tb", Index: 2, Text: "counterstain with eosin and dehydrate", Start: 87, End: 124},
	}
	pubmed = []data.Chunk{
		{ID: "pm#0", DocID: "pm", Index: 0, Text: "fix the specimen in neutral buffered formalin", End: 45},
		{ID: "pm#1", DocID: "pm", Index: 1, Text: "the slides were examined by two pathologists", Start: 46, End: 90},
	}
)

type fixture struct {
	dir        string // pipeline dir
	filterDir  string
	genDir     string
	comps      *Components
	srv        *Server
	ts         *httptest.Server
	store      *labelstore.Store
	storePath  string
	labelID    int64
	closeStore sync.Once
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	buildSkip string
)

// buildPipeline writes, once per test binary, a tiny pipeline with random
// models: BERT-tiny-shaped retriever and cross-encoder (bert-tiny vocab),
// a TinyConfig T5 filter with the two label tokens added and a T5
// generator (the fixture SentencePiece model).
func buildPipeline(t *testing.T) string {
	t.Helper()
	vocab := testutil.SharedPath(t, "fixtures/bert-tiny")
	spm := testutil.SharedPath(t, "fixtures/tokenizer")
	buildOnce.Do(func() {
		root, err := os.MkdirTemp("", "ragforge-serve-test-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir, buildErr = writePipeline(root, vocab, spm)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func writePipeline(root, vocabDir, spmDir string) (string, error) {
	be, err := backend.New("")
	if err != nil {
		return "", err
	}
	wp, err := wordpiece.Load(vocabDir)
	if err != nil {
		return "", err
	}
	retr := filepath.Join(root, "src-retriever")
	bm, err := bert.NewRandom(be, bert.TinyConfig(wp.Len()), false, 1)
	if err != nil {
		return "", err
	}
	if err := bm.Save(retr); err != nil {
		return "", err
	}
	if err := wp.Save(retr); err != nil {
		return "", err
	}
	rr := filepath.Join(root, "src-reranker")
	cfg := bert.TinyConfig(wp.Len())
	cfg.NumLabels = 1
	cm, err := bert.NewRandom(be, cfg, true, 2)
	if err != nil {
		return "", err
	}
	if err := cm.Save(rr); err != nil {
		return "", err
	}
	if err := wp.Save(rr); err != nil {
		return "", err
	}
	filt := filepath.Join(root, "src-filter")
	tok, err := sentencepiece.LoadT5(spmDir)
	if err != nil {
		return "", err
	}
	tok.AddTokens([]string{filter.Helpful, filter.NotHelpful})
	fm, err := t5.NewRandom(be, t5.TinyConfig(tok.Len()), 3)
	if err != nil {
		return "", err
	}
	if err := fm.Save(filt); err != nil {
		return "", err
	}
	if err := tok.Save(filt); err != nil {
		return "", err
	}
	gen := filepath.Join(root, "src-generator")
	gtok, err := sentencepiece.LoadT5(spmDir)
	if err != nil {
		return "", err
	}
	gm, err := t5.NewRandom(be, t5.TinyConfig(gtok.Len()), 4)
	if err != nil {
		return "", err
	}
	if err := gm.Save(gen); err != nil {
		return "", err
	}
	if err := gtok.Save(gen); err != nil {
		return "", err
	}
	m := pipeline.DefaultManifest()
	m.Retrieval.Depth = 10
	m.Filter.MaxSeqLength = 64
	m.Filter.DocStride = 16
	m.Rerank = pipeline.Rerank{TopN: 4, K: 2}
	dir := filepath.Join(root, "pipeline")
	err = pipeline.Build(dir, pipeline.BuildOptions{Parts: pipeline.Parts{
		Manifest:  m,
		Corpora:   []pipeline.CorpusPart{{Name: "pubmed", Chunks: pubmed}, {Name: "textbook", Chunks: textbook}},
		Retriever: retr, Filter: filt, Generator: gen, Reranker: rr,
	}})
	return dir, err
}

// newFixture loads the pipeline, a label store holding one label, and
// starts an httptest server with opt.
func newFixture(t *testing.T, opt Options) *fixture {
	t.Helper()
	dir := buildPipeline(t)
	c, err := Load(Config{PipelineDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, comps: c, filterDir: c.Pipeline.Filter, genDir: c.Pipeline.Generator}
	f.storePath = filepath.Join(t.TempDir(), "runs.sqlite")
	if f.store, err = labelstore.OpenStore(f.storePath); err != nil {
		t.Fatal(err)
	}
	l := []labelstore.Label{{RunID: "run1", Key: "k1", ExampleID: "q1#tb#0", Question: "q", Snippet: "s", Label: filter.NotHelpful, Method: labelstore.MethodEvidence}}
	if err := f.store.Put(l); err != nil {
		t.Fatal(err)
	}
	f.labelID = l[0].ID
	opt.Labels = f.store
	if f.srv, err = New(opt, c); err != nil {
		t.Fatal(err)
	}
	f.ts = httptest.NewServer(f.srv.Handler())
	t.Cleanup(func() {
		f.ts.Close()
		f.srv.Close()
		c.Pipeline.Close()
		f.store.Close()
	})
	return f
}

// call sends method path with body (JSON-encoded unless []byte or nil)
// and returns the status and the body.
func (f *fixture) call(t *testing.T, method, path string, body any, token string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, f.ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func decodeInto(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}
