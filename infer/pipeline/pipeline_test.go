package pipeline

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/faiss"
)

var (
	corpusA = []data.Chunk{
		{ID: "a#0", DocID: "a", Index: 0, Text: "hematoxylin stains nuclei", End: 25, Meta: map[string]any{"page": 3.0}},
		{ID: "a#1", DocID: "a", Index: 1, Text: "eosin stains cytoplasm", Start: 26, End: 48},
	}
	corpusB = []data.Chunk{{ID: "b#0", DocID: "b", Text: "formalin fixes tissue", End: 21}}
)

func bm25Only(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "p")
	m := DefaultManifest()
	m.Name = "tiny"
	err := Save(dir, Parts{Manifest: m, Corpora: []CorpusPart{{Name: "A", Chunks: corpusA}, {Name: "B", Chunks: corpusB}}})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// A BM25-only pipeline round-trips: manifest (corpora filled in), chunks
// with meta, BM25 indexes answering a one-term query, no model parts.
func TestSaveLoadBM25Only(t *testing.T) {
	dir := bm25Only(t)
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !reflect.DeepEqual(p.Manifest.Corpora, []string{"A", "B"}) || p.Manifest.Name != "tiny" {
		t.Errorf("manifest %+v", p.Manifest)
	}
	if p.Retriever != "" || p.Filter != "" || p.Generator != "" || p.Reranker != "" {
		t.Errorf("model parts %q %q %q %q, want none", p.Retriever, p.Filter, p.Generator, p.Reranker)
	}
	a, ok := p.Corpus("A")
	if !ok || !reflect.DeepEqual(a.Chunks, corpusA) || a.Dense != nil {
		t.Fatalf("corpus A %+v", a)
	}
	hits, err := a.BM25.Search("eosin", 5)
	if err != nil || len(hits) != 1 || hits[0].ID != "a#1" {
		t.Errorf("bm25 eosin: %v %v", hits, err)
	}
	if c, ok := a.Chunk("a#0"); !ok || c.Meta["page"] != 3.0 {
		t.Errorf("Chunk(a#0) = %+v %v", c, ok)
	}
	// No temporary directory is left beside the pipeline.
	ents, _ := os.ReadDir(filepath.Dir(dir))
	if len(ents) != 1 {
		t.Errorf("parent holds %d entries, want only the pipeline", len(ents))
	}
}

func TestSaveErrors(t *testing.T) {
	base := t.TempDir()
	good := []CorpusPart{{Name: "A", Chunks: corpusA}}
	bad := DefaultManifest()
	bad.Retrieval.Mode = "sparse"
	noContext, noQuestion := DefaultManifest(), DefaultManifest()
	noContext.Prompts.Answer = "Question: {question}\nAnswer:"
	noQuestion.Prompts.Rationale = "Explain the medical knowledge needed."
	// Model directories whose config.json names a family (all CheckParts reads).
	typed := func(mt string) string {
		d := filepath.Join(base, "models", mt)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "config.json"), []byte(`{"model_type": "`+mt+`"}`), 0o644)
		return d
	}
	bertDir, t5Dir := typed("bert"), typed("t5")
	cases := []struct {
		name  string
		parts Parts
		want  string
	}{
		{"bad mode", Parts{Manifest: bad, Corpora: good}, `"retrieval.mode": unknown mode "sparse"`},
		{"bad corpus name", Parts{Manifest: DefaultManifest(), Corpora: []CorpusPart{{Name: "../x", Chunks: corpusA}}}, `name "../x"`},
		{"retriever without dense", Parts{Manifest: DefaultManifest(), Corpora: good, Retriever: bertDir}, "a dense index needs a retriever"},
		{"answer prompt without context", Parts{Manifest: noContext, Corpora: good}, `field "prompts.answer": "Question: {question}\nAnswer:" has no {context}`},
		{"rationale prompt without question", Parts{Manifest: noQuestion, Corpora: good}, `field "prompts.rationale": "Explain the medical knowledge needed." has no {question}`},
		{"bert as filter", Parts{Manifest: DefaultManifest(), Corpora: good, Filter: bertDir}, `filter ` + bertDir + `: config.json model_type "bert" is not a T5 filter (want t5, mt5)`},
		{"bert as generator", Parts{Manifest: DefaultManifest(), Corpora: good, Generator: bertDir}, `generator ` + bertDir + `: config.json model_type "bert" is not a language model`},
		{"t5 as reranker", Parts{Manifest: DefaultManifest(), Corpora: good, Reranker: t5Dir}, `reranker ` + t5Dir + `: config.json model_type "t5" is not a BERT cross-encoder`},
		{"t5 as retriever", Parts{Manifest: DefaultManifest(), Corpora: good, Retriever: t5Dir}, `retriever: encoder ` + t5Dir + `: config.json model_type "t5" is not a supported bi-encoder`},
		{"repeated chunk id", Parts{Manifest: DefaultManifest(), Corpora: []CorpusPart{{Name: "A", Chunks: []data.Chunk{corpusA[0], corpusA[0]}}}}, "a#0"},
	}
	for i, c := range cases {
		dir := filepath.Join(base, "p", string(rune('0'+i)))
		os.MkdirAll(filepath.Dir(dir), 0o755)
		err := Save(dir, c.parts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if _, serr := os.Stat(dir); serr == nil {
			t.Errorf("%s: %s written despite the error", c.name, dir)
		}
	}
	existing := bm25Only(t)
	if err := Save(existing, Parts{Manifest: DefaultManifest(), Corpora: good}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("existing dir: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(dir string)
		want   string
	}{
		{"no manifest", func(d string) { os.Remove(filepath.Join(d, ManifestFile)) }, "pipeline.json"},
		{"unknown manifest field", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, ManifestFile))
			os.WriteFile(filepath.Join(d, ManifestFile), []byte(strings.Replace(string(b), "{", `{"extra": 1,`, 1)), 0o644)
		}, `unknown field "extra"`},
		{"chunk without id", func(d string) {
			os.WriteFile(filepath.Join(d, CorporaDir, "B", ChunksFile), []byte("{\"doc_id\":\"b\"}\n"), 0o644)
		}, `line 1: field "id": empty`},
		{"bad json line", func(d string) {
			os.WriteFile(filepath.Join(d, CorporaDir, "B", ChunksFile), []byte("{\"id\":\"b#0\",\"doc_id\":\"b\"}\n\n{oops\n"), 0o644)
		}, "line 3"},
		{"chunk count differs from index", func(d string) {
			os.WriteFile(filepath.Join(d, CorporaDir, "B", ChunksFile), []byte("{\"id\":\"b#0\",\"doc_id\":\"b\"}\n{\"id\":\"b#1\",\"doc_id\":\"b\"}\n"), 0o644)
		}, "bm25 index holds 1 chunks"},
		{"id in two corpora", func(d string) {
			os.WriteFile(filepath.Join(d, CorporaDir, "B", ChunksFile), []byte("{\"id\":\"a#0\",\"doc_id\":\"a\"}\n"), 0o644)
		}, `chunk id "a#0" is in corpora "A" and "B"`},
		{"dense without retriever", func(d string) { os.MkdirAll(filepath.Join(d, CorporaDir, "A", DenseDir), 0o755) }, "has no retriever/"},
		{"listed part missing", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, ManifestFile))
			os.WriteFile(filepath.Join(d, ManifestFile), []byte(strings.Replace(string(b), "{", `{"parts": ["filter"],`, 1)), 0o644)
		}, `part "filter", listed in pipeline.json, is missing`},
		{"unknown part", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, ManifestFile))
			os.WriteFile(filepath.Join(d, ManifestFile), []byte(strings.Replace(string(b), "{", `{"parts": ["tokenizer"],`, 1)), 0o644)
		}, `field "parts": "tokenizer"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := bm25Only(t)
			c.mutate(dir)
			p, err := Load(dir)
			if err == nil {
				p.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Load: %v, want %q", err, c.want)
			}
		})
	}
}

func TestFromRun(t *testing.T) {
	dir := bm25Only(t)
	st, err := tracker.Open(filepath.Join(t.TempDir(), "runs.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	withPipe, err := st.Start("export", map[string]string{}, "test", "go")
	if err != nil {
		t.Fatal(err)
	}
	if err := withPipe.Artifact(ArtifactKind, filepath.Join(dir, ManifestFile)); err != nil {
		t.Fatal(err)
	}
	without, err := st.Start("train", map[string]string{}, "test", "go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromRun(st, withPipe.ID)
	if err != nil || got != dir {
		t.Errorf("FromRun = %q, %v; want %q", got, err, dir)
	}
	if _, err := FromRun(st, without.ID); err == nil || !strings.Contains(err.Error(), `no "pipeline" artifact`) {
		t.Errorf("run without pipeline: %v", err)
	}
	if _, err := FromRun(st, "nope"); err == nil {
		t.Error("unknown run accepted")
	}
}

// hashEncoder embeds a text as 8 floats derived from its bytes, normalized;
// the same text always gets the same vector.
type hashEncoder struct{}

func (hashEncoder) Dim() int                                            { return 8 }
func (hashEncoder) Name() string                                        { return "hash" }
func (e hashEncoder) EncodeQueries(texts []string) ([][]float32, error) { return e.EncodeDocs(texts) }
func (hashEncoder) EncodeDocs(texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, s := range texts {
		v := make([]float32, 8)
		for j := 0; j < len(s); j++ {
			v[(j+int(s[j]))%8] += float32(s[j]%13) + 1
		}
		if err := faiss.Normalize(v, 8); err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// A pipeline built with --faiss HNSW32 --ef-search 128 records both in
// pipeline.json, and Load serves an HNSW index with efSearch 128 applied;
// SetSearch overrides it; a setting the index cannot take fails the build.
func TestBuildHNSWEfSearch(t *testing.T) {
	retr := filepath.Join(t.TempDir(), "retriever")
	if err := os.MkdirAll(retr, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(retr, "config.json"), []byte(`{"model_type": "bert"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m := DefaultManifest()
	m.FAISSFactory = "HNSW32"
	m.FAISSSearch = dense.SearchParams{EfSearch: 128}
	dir := filepath.Join(t.TempDir(), "p")
	parts := Parts{Manifest: m, Corpora: []CorpusPart{{Name: "A", Chunks: corpusA}, {Name: "B", Chunks: corpusB}}, Retriever: retr}
	if err := Build(dir, BuildOptions{Parts: parts, Encoder: hashEncoder{}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"faiss_factory": "HNSW32"`) || !strings.Contains(string(b), `"ef_search": 128`) {
		t.Errorf("pipeline.json lacks the factory or efSearch:\n%s", b)
	}
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	q, _ := hashEncoder{}.EncodeQueries([]string{"eosin stains cytoplasm"})
	for _, c := range p.Corpora {
		fx := c.Dense.Faiss()
		if fx.EfSearch() != 128 || fx.Nprobe() != 0 {
			t.Errorf("corpus %s: efSearch %d nprobe %d, want an HNSW index with efSearch 128", c.Name, fx.EfSearch(), fx.Nprobe())
		}
		hits, err := c.Dense.Search(q[0], 5)
		if err != nil || len(hits[0]) != len(c.Chunks) {
			t.Errorf("corpus %s: search: %v, %v; want all %d chunks", c.Name, hits, err, len(c.Chunks))
		}
	}
	if a, _ := p.Corpus("A"); a != nil {
		if hits, _ := a.Dense.Search(q[0], 1); len(hits[0]) != 1 || hits[0][0].ID != "a#1" {
			t.Errorf("top hit %v, want a#1 (the query is its text)", hits)
		}
	}
	if err := p.SetSearch(dense.SearchParams{EfSearch: 40}); err != nil {
		t.Fatal(err)
	}
	if a, _ := p.Corpus("A"); a.Dense.Faiss().EfSearch() != 40 {
		t.Errorf("SetSearch: efSearch %d, want 40", a.Dense.Faiss().EfSearch())
	}
	if err := p.SetSearch(dense.SearchParams{Nprobe: 4}); err == nil || !strings.Contains(err.Error(), "not an IVF index") {
		t.Errorf("nprobe on HNSW: err %v", err)
	}

	bad := parts
	bad.Manifest.FAISSSearch = dense.SearchParams{Nprobe: 8}
	if err := Build(filepath.Join(t.TempDir(), "q"), BuildOptions{Parts: bad, Encoder: hashEncoder{}}); err == nil || !strings.Contains(err.Error(), "not an IVF index") {
		t.Errorf("nprobe with HNSW32: err %v", err)
	}
	bad.Manifest.FAISSSearch = dense.SearchParams{EfSearch: -1}
	bad.Manifest.Corpora = []string{"A"}
	if err := bad.Manifest.Validate(); err == nil || !strings.Contains(err.Error(), "faiss_search") {
		t.Errorf("negative efSearch: err %v", err)
	}
}
