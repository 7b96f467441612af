package selflearn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/chunk"
	"github.com/ragforge/ragforge/data/npy"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/bert"
	"github.com/ragforge/ragforge/models/generate"
	"github.com/ragforge/ragforge/models/lm"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/train/lora"
	"github.com/ragforge/ragforge/train/retriever"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestSelectBest(t *testing.T) {
	tests := []struct {
		ranks []int
		want  int
	}{
		{nil, -1},
		{[]int{5}, 0},
		{[]int{7, 3, 9, 4}, 1},
		{[]int{4, 2, 2, 8}, 1}, // tie: first
		{[]int{3, 3, 3}, 0},
		{[]int{11, 11, 10}, 2},
	}
	for _, tc := range tests {
		if got := SelectBest(tc.ranks); got != tc.want {
			t.Errorf("SelectBest(%v) = %d, want %d", tc.ranks, got, tc.want)
		}
	}
}

func TestRankOf(t *testing.T) {
	hits := []retrieval.Hit{{ID: "a#0"}, {ID: "b#1"}, {ID: "c#0"}}
	for id, want := range map[string]int{"a#0": 1, "c#0": 3, "z#9": 4} {
		if got := RankOf(hits, id); got != want {
			t.Errorf("RankOf(%q) = %d, want %d", id, got, want)
		}
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n got: %s\nwant: %s", name, got, want)
	}
}

func TestSFTExportGolden(t *testing.T) {
	pairs := []SFTPair{{Query: "what causes gout?", Output: "Gout is caused by uric acid crystals."},
		{Query: "aspirin <dose> & \"heart\"", Output: "Aspirin 75 mg daily."}}
	var a, m bytes.Buffer
	if err := WriteSFTAlpaca(&a, pairs); err != nil {
		t.Fatal(err)
	}
	if err := WriteSFTMessages(&m, pairs, "Q: {query}\nA:"); err != nil {
		t.Fatal(err)
	}
	golden(t, "sft_alpaca.golden.jsonl", a.Bytes())
	golden(t, "sft_messages.golden.jsonl", m.Bytes())
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.WorkDir, ok.RetrieverDir, ok.Generator = "w", "r", "ict"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field string
		mod   func(*Config)
	}{
		{"WorkDir", func(c *Config) { c.WorkDir = "" }},
		{"RetrieverDir", func(c *Config) { c.RetrieverDir = "" }},
		{"Generator", func(c *Config) { c.Generator = "gpt" }},
		{"L", func(c *Config) { c.L = 0 }},
		{"RankFrom/RankTo", func(c *Config) { c.RankFrom, c.RankTo = 10, 10 }},
		{"Temperature", func(c *Config) { c.Temperature = 0 }},
		{"Rounds", func(c *Config) { c.Rounds = 0 }},
		{"NegativeMaxScore", func(c *Config) { c.NegativeMaxScore = 1.5 }},
		{"SubBatchTokens", func(c *Config) { c.SubBatchTokens = -1 }},
		{"NegativeMaxScore", func(c *Config) { c.NegativeMaxScore = -0.5 }},
		{"QueriesPerChunk", func(c *Config) { c.QueriesPerChunk = 0 }},
		{"Pooling", func(c *Config) { c.Pooling = "max" }},
		{"BM25", func(c *Config) { c.BM25 = bm25.Config{K1: 1.2, B: 0.75, Analyzer: "klingon"} }},
		{"BM25", func(c *Config) { c.BM25 = bm25.Config{K1: 1.2, B: 1.5} }},
		{"GeneratorLoRA", func(c *Config) { c.GeneratorLoRA = lora.DefaultConfig(); c.GeneratorLoRA.BatchSize = 0 }},
		{"GeneratorLoRA", func(c *Config) {
			c.GeneratorLoRA = lora.DefaultConfig()
			c.GeneratorLoRA.LoRA.TargetModules = []string{"c_attn"}
		}},
	}
	for _, tc := range tests {
		c := ok
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.field)) {
			t.Errorf("%s: err %v", tc.field, err)
		}
	}
}

// TestConfigHashWithoutBM25: the zero BM25 (the default) is left out of the
// config, so runs made before the field existed still resume; a set one
// changes the hash.
func TestConfigHashWithoutBM25(t *testing.T) {
	c := DefaultConfig()
	if b, _ := json.Marshal(c); strings.Contains(string(b), "BM25") {
		t.Errorf("default config JSON names BM25: %s", b)
	}
	pt := c
	pt.BM25 = bm25.Config{K1: 0.9, B: 0.75, Analyzer: "pt"}
	if configHash(pt) == configHash(c) {
		t.Error("a BM25 config leaves the config hash unchanged")
	}
}

// The zero GeneratorLoRA (lora.DefaultConfig, AutoMIR's) is left out of
// the config, so earlier runs still resume; a set one changes the hash and
// replaces the defaults.
func TestConfigHashGeneratorLoRA(t *testing.T) {
	c := DefaultConfig()
	if b, _ := json.Marshal(c); strings.Contains(string(b), "GeneratorLoRA") {
		t.Errorf("default config JSON names GeneratorLoRA: %s", b)
	}
	if !reflect.DeepEqual(c.generatorLoRA(), lora.DefaultConfig()) {
		t.Errorf("zero GeneratorLoRA gives %+v, want lora.DefaultConfig()", c.generatorLoRA())
	}
	set := c
	set.GeneratorLoRA = lora.DefaultConfig()
	set.GeneratorLoRA.WarmupSteps = 2
	if configHash(set) == configHash(c) || set.generatorLoRA().WarmupSteps != 2 {
		t.Error("a GeneratorLoRA leaves the config hash or the LoRA settings unchanged")
	}
}

// SubBatchTokens 0 (the trainer's default) keeps earlier runs' config hash;
// another pass size changes it (it changes the dropout masks drawn).
func TestConfigHashSubBatchTokens(t *testing.T) {
	c := DefaultConfig()
	if b, _ := json.Marshal(c); strings.Contains(string(b), "SubBatchTokens") {
		t.Errorf("default config JSON names SubBatchTokens: %s", b)
	}
	small := c
	small.SubBatchTokens = 1024
	if configHash(small) == configHash(c) {
		t.Error("--sub-batch-tokens leaves the config hash unchanged")
	}
}

// toyRetriever writes a random tiny BERT with testdata/vocab.txt.
func toyRetriever(t *testing.T) string {
	t.Helper()
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	cfg := bert.TinyConfig(tok.Len())
	cfg.HiddenSize, cfg.NumAttentionHeads, cfg.IntermediateSize, cfg.NumHiddenLayers = 16, 2, 32, 1
	cfg.MaxPositionEmbeddings = 64
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0, 0
	m, err := bert.NewRandom(be, cfg, false, 7)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

var topics = []string{
	"gout is caused by uric acid crystals in the joint. the joint pain is severe in adults. treat gout with a drug for inflammation.",
	"asthma is a chronic disease of the airway. wheeze and airway inflammation are symptoms. the lungs of children with asthma wheeze.",
	"eczema is a skin rash with itch. treat the skin rash of eczema daily. the itch of eczema is mild in adults.",
	"aspirin lowers fever and heart attack risk. the aspirin dose is mg daily. aspirin reduces blood inflammation.",
	"insulin treatment helps diabetes. blood sugar is high in diabetes. the insulin dose for diabetes is daily.",
	"a kidney stone causes severe pain. fever and infection with a kidney stone. treat the kidney stone pain.",
}

// toyCorpus has 6 documents of 2 chunks each.
func toyCorpus() []data.Chunk {
	var out []data.Chunk
	for d, text := range topics {
		sents := strings.SplitAfter(text, ". ")
		halves := []string{strings.Join(sents[:2], ""), strings.Join(sents[1:], "")}
		for i, h := range halves {
			out = append(out, data.Chunk{ID: fmt.Sprintf("d%d#%d", d, i), DocID: fmt.Sprintf("d%d", d), Index: i, Text: strings.TrimSpace(h)})
		}
	}
	return out
}

func toyEval() ([]data.Query, data.Qrels) {
	qs := []data.Query{{ID: "q1", Text: "what causes gout pain?"}, {ID: "q2", Text: "asthma symptoms in children"},
		{ID: "q3", Text: "insulin dose for diabetes"}}
	qrels := data.Qrels{"q1": {"d0#0": 1, "d0#1": 1}, "q2": {"d1#0": 1, "d1#1": 1}, "q3": {"d4#0": 1, "d4#1": 1}}
	return qs, qrels
}

func toyConfig(t *testing.T, retDir string) Config {
	cfg := DefaultConfig()
	cfg.WorkDir, cfg.RetrieverDir, cfg.Generator = t.TempDir(), retDir, "ict"
	cfg.L, cfg.RankFrom, cfg.RankTo, cfg.NumNegatives = 3, 2, 8, 2
	cfg.MaxLength, cfg.RetrieverBatch, cfg.GenBatch, cfg.Backend = 48, 4, 3, "go"
	cfg.RetrieverLR = 1e-3
	return cfg
}

func openStore(t *testing.T) *tracker.Store {
	s, err := tracker.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// counting wraps ICT: it counts generated items per task and can cancel
// the run after a number of items, or fail the items whose text contains a
// marker.
type counting struct {
	generate.ICT
	mu       sync.Mutex
	items    int
	cancelAt int
	cancel   context.CancelFunc
	failOn   string
}

func (c *counting) count(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items += n
	if c.cancel != nil && c.items >= c.cancelAt {
		c.cancel()
	}
}

func (c *counting) fail(texts []string, outs [][]string, errs []error) {
	for i, s := range texts {
		if c.failOn != "" && strings.Contains(s, c.failOn) {
			outs[i], errs[i] = nil, fmt.Errorf("generator answered: %w", lm.ErrEmpty)
		}
	}
}

func (c *counting) Queries(ctx context.Context, docs []string, opt lm.Options) ([][]string, []error) {
	outs, errs := c.ICT.Queries(ctx, docs, opt)
	c.fail(docs, outs, errs)
	c.count(len(docs))
	return outs, errs
}

func (c *counting) HypoDocs(ctx context.Context, q, docs []string, opt lm.Options) ([][]string, []error) {
	outs, errs := c.ICT.HypoDocs(ctx, q, docs, opt)
	c.count(len(q))
	return outs, errs
}

func variants(r *Report) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, rd := range r.Rounds {
		for _, v := range rd.Variants {
			out[fmt.Sprintf("%d/%s", rd.Round, v.Name)] = v.Metrics
		}
	}
	return out
}

// One ICT round end to end on the toy corpus: every step's items and files
// exist, the report holds the baseline and round variants, and the counts
// match the corpus.
func TestRunICTEndToEnd(t *testing.T) {
	ret := toyRetriever(t)
	cfg := toyConfig(t, ret)
	cfg.NegativeMaxScore = 0.99 // exercises the ceiling (positive scores from the corpus vectors)
	qs, qrels := toyEval()
	store := openStore(t)
	var stages []string
	rep, err := Run(context.Background(), cfg, toyCorpus(), qs, qrels, store, func(st string, d, n int) {
		if d == n {
			stages = append(stages, st)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 2 {
		t.Fatalf("rounds %d, want 2 (baseline + 1)", len(rep.Rounds))
	}
	c := rep.Rounds[1].Counts
	if c.Sampled != 12 || c.Queries != 12 || c.Candidates != 12 || c.Selected != 12 || c.Triplets != 12 || c.QueryErrors != 0 {
		t.Fatalf("counts %+v", c)
	}
	got := variants(rep)
	for _, k := range []string{"0/bm25", "0/hybrid", "0/dense", "0/hyde", "1/dense", "1/hybrid", "1/sl-hyde", "1/no-gen-tuning", "1/no-ret-tuning"} {
		m, ok := got[k]
		if !ok {
			t.Fatalf("variant %s missing from %v", k, got)
		}
		if v := m["Recall@100"]; v != 1 {
			t.Errorf("%s Recall@100 = %v, want 1 (the corpus has 12 chunks)", k, v)
		}
	}
	// BM25 ranks q1's chunks first: both d0 chunks share "gout" and "pain"/"causes".
	if got["0/bm25"]["Recall@1"] <= 0 {
		t.Errorf("bm25 Recall@1 = %v", got["0/bm25"]["Recall@1"])
	}
	for _, f := range []string{"run.json", "report.json", "round-1/sft_alpaca.jsonl", "round-1/sft_messages.jsonl",
		"round-1/train.jsonl", "round-1/retriever/model.safetensors"} {
		if _, err := os.Stat(filepath.Join(cfg.WorkDir, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	// Corpus vectors of R_0 and R_1 are .npy files with the chunk ids beside them.
	for _, r := range []string{"r0", "r1"} {
		npyPath := filepath.Join(cfg.WorkDir, "vectors", "embeddings", r, r+"_Embeds_0.npy")
		if n, d, err := npy.ReadShape(npyPath); err != nil || n != 12 || d != 16 {
			t.Errorf("%s: shape [%d, %d] (%v), want [12, 16]", npyPath, n, d, err)
		}
		pre, err := data.OpenEncoded(data.EncodedScheme + filepath.Join(cfg.WorkDir, "vectors") + "#" + r)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range toyCorpus() {
			if pre.Docs[i].ID != c.ID {
				t.Fatalf("%s row %d: id %q, want %q", r, i, pre.Docs[i].ID, c.ID)
			}
		}
	}
	run, err := store.Attach(rep.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]int{KindQuery: 12, KindCandidates: 12, KindSelection: 12} {
		items, err := run.Items(kind)
		if err != nil || len(items) != want {
			t.Errorf("%s items: %d (%v), want %d", kind, len(items), err, want)
		}
	}
	// ICT selection: the candidates are windows of the chunk itself, and
	// the best one is stored with the lowest rank.
	var sel selItem
	if ok, err := run.GetItem(KindSelection, "r1/d0#0", &sel); !ok || err != nil {
		t.Fatalf("selection item: %v %v", ok, err)
	}
	if len(sel.Ranks) != 3 || sel.Best != SelectBest(sel.Ranks) {
		t.Fatalf("selection %+v", sel)
	}
	triplets, err := retriever.ReadJSONLFile(filepath.Join(cfg.WorkDir, "round-1/train.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range triplets {
		for _, n := range tr.Negs {
			if k := chunk.TextKey(n); k == chunk.TextKey(tr.Pos) || k == chunk.TextKey(tr.Query) {
				t.Errorf("triplet %d: negative %q repeats the positive or the query", i, n)
			}
		}
	}
	var table bytes.Buffer
	if err := rep.Table(&table); err != nil || !strings.Contains(table.String(), "sl-hyde") {
		t.Fatalf("table: %v\n%s", err, table.String())
	}
	t.Logf("report:\n%s", table.String())
	joined := strings.Join(stages, ",")
	for _, st := range []string{"r1/queries", "r1/candidates", "r1/selection", "r1/mine", "r1/eval"} {
		if !strings.Contains(joined, st) {
			t.Errorf("stage %s never reported done (%s)", st, joined)
		}
	}
}

// Cancel after some generated items, rerun: finished items are not
// generated again and the final metrics equal an uninterrupted run.
func TestRunResumeMatchesUninterrupted(t *testing.T) {
	ret := toyRetriever(t)
	qs, qrels := toyEval()

	full := &counting{}
	cfgA := toyConfig(t, ret)
	cfgA.GeneratorImpl = full
	repA, err := Run(context.Background(), cfgA, toyCorpus(), qs, qrels, openStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}

	cfgB := toyConfig(t, ret)
	store := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	g1 := &counting{cancelAt: 5, cancel: cancel}
	cfgB.GeneratorImpl = g1
	repI, err := Run(ctx, cfgB, toyCorpus(), qs, qrels, store, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err %v, want context.Canceled", err)
	}
	if d, err := store.Get(repI.RunID); err != nil || d.Status != tracker.StatusInterrupted {
		t.Fatalf("interrupted run reads %+v (%v), want status interrupted", d, err)
	}
	g2 := &counting{}
	cfgB.GeneratorImpl = g2
	repB, err := Run(context.Background(), cfgB, toyCorpus(), qs, qrels, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	// g1 generated its first batches (3 items each); the batch in flight at
	// cancellation is not stored, so g2 redoes only that one.
	stored := g1.items - cfgB.GenBatch
	if g2.items != full.items-stored {
		t.Fatalf("resumed run generated %d items, want %d (uninterrupted %d, stored before the kill %d)", g2.items, full.items-stored, full.items, stored)
	}
	if !reflect.DeepEqual(variants(repA), variants(repB)) {
		t.Fatalf("metrics differ:\n uninterrupted %v\n resumed       %v", variants(repA), variants(repB))
	}
	if repA.RunID == repB.RunID {
		t.Fatal("separate stores should have separate runs")
	}
	if d, _ := store.Get(repB.RunID); repB.RunID != repI.RunID || d.Status != tracker.StatusDone {
		t.Fatalf("resumed run %s (%s), want the interrupted %s, done", repB.RunID, d.Status, repI.RunID)
	}
}

// An error after the run is open finishes it as failed with the error.
func TestRunErrorFinishesRun(t *testing.T) {
	cfg := toyConfig(t, toyRetriever(t))
	cfg.Generator = "t5:" + filepath.Join(t.TempDir(), "no-such-model")
	store := openStore(t)
	_, err := Run(context.Background(), cfg, toyCorpus(), nil, nil, store, nil)
	if err == nil {
		t.Fatal("Run with a missing generator succeeded")
	}
	l, lerr := store.List(tracker.ListOptions{Kind: "selflearn"})
	if lerr != nil || len(l) != 1 {
		t.Fatalf("runs: %v, %v", l, lerr)
	}
	if l[0].Status != tracker.StatusFailed || l[0].Error != err.Error() {
		t.Errorf("run after %q: status %s error %q, want failed with the error", err, l[0].Status, l[0].Error)
	}
}

// Items whose generator answer is bad are stored with their error and
// counted; the round goes on with the others; a rerun retries only them.
func TestRunPerItemErrors(t *testing.T) {
	ret := toyRetriever(t)
	cfg := toyConfig(t, ret)
	g := &counting{failOn: "eczema"}
	cfg.GeneratorImpl = g
	store := openStore(t)
	rep, err := Run(context.Background(), cfg, toyCorpus(), nil, nil, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Rounds[1].Counts
	if c.QueryErrors != 2 || c.Queries != 10 || c.Triplets != 10 {
		t.Fatalf("counts %+v, want 2 query errors (the eczema chunks) and 10 triplets", c)
	}
	if len(rep.Rounds[1].Errors) != 2 || !strings.Contains(rep.Rounds[1].Errors[0], "empty") {
		t.Fatalf("errors %q", rep.Rounds[1].Errors)
	}
	g2 := &counting{failOn: "eczema"}
	cfg.GeneratorImpl = g2
	if _, err := Run(context.Background(), cfg, toyCorpus(), nil, nil, store, nil); err != nil {
		t.Fatal(err)
	}
	if g2.items != 2 {
		t.Fatalf("rerun generated %d items, want the 2 failed ones", g2.items)
	}
}

func TestRunEmptyCorpus(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WorkDir, cfg.RetrieverDir, cfg.Generator = t.TempDir(), "x", "ict"
	if _, err := Run(context.Background(), cfg, nil, nil, nil, openStore(t), nil); err == nil || !strings.Contains(err.Error(), "empty corpus") {
		t.Fatalf("err %v", err)
	}
}

func t5Fixture(t *testing.T) string { return testutil.SharedPath(t, "fixtures/t5-flan-tiny") }

// A round with a local T5 generator: real sampling, selection, SFT of the
// generator (saved and reloaded), triplets regenerated by the tuned model.
func TestRunT5Generator(t *testing.T) {
	ret := toyRetriever(t)
	cfg := toyConfig(t, ret)
	cfg.Generator = "t5:" + t5Fixture(t)
	cfg.L, cfg.MaxQueryTokens, cfg.MaxDocTokens, cfg.MaxTargetTokens, cfg.GeneratorBatch = 2, 6, 8, 8, 4
	cfg.GenTemperature = 1.0
	qs, qrels := toyEval()
	store := openStore(t)
	rep, err := Run(context.Background(), cfg, toyCorpus()[:6], qs[:1], qrels, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	rd := rep.Rounds[1]
	t.Logf("counts %+v errors %q", rd.Counts, rd.Errors)
	if rd.Counts.Queries+rd.Counts.QueryErrors != 6 {
		t.Fatalf("counts %+v: every sampled chunk must end as a query or an error", rd.Counts)
	}
	if rd.Counts.Selected == 0 {
		t.Skip("SKIP: the tiny fixture produced no usable query/candidate pair")
	}
	if _, err := os.Stat(filepath.Join(rd.GeneratorDir, "model.safetensors")); err != nil {
		t.Fatalf("tuned generator not saved: %v", err)
	}
	run, _ := store.Attach(rep.RunID)
	items, err := run.Items(KindTriplet)
	if err != nil || len(items) != rd.Counts.Selected {
		t.Fatalf("triplet items %d (%v), want %d", len(items), err, rd.Counts.Selected)
	}
	if len(variants(rep)) != 9 {
		t.Fatalf("variants %v", variants(rep))
	}
}

// A handful of real AP protocol chunks (512/128 characters, the foundation
// chunking) through one ICT round.
func TestRunAPCorpusHandful(t *testing.T) {
	dir := testutil.SharedPath(t, "data/ap_protocols")
	docs, err := data.LoadHFDataset(dir, data.HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chunks, _, err := chunk.SplitAll(docs[:3], chunk.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) > 10 {
		chunks = chunks[:10]
	}
	cfg := toyConfig(t, toyRetriever(t))
	rep, err := Run(context.Background(), cfg, chunks, nil, nil, openStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Rounds[1].Counts
	if c.Sampled != len(chunks) || c.Queries+c.QueryErrors != len(chunks) || c.Triplets == 0 {
		t.Fatalf("counts %+v for %d chunks (errors %q)", c, len(chunks), rep.Rounds[1].Errors)
	}
}

// TestRunFusionHoldout: with FusionHoldout the round keeps that share of
// its pseudo-queries out of training, chooses the hybrid's weight on them
// (a grid value, BM25 getting the rest), writes it beside the retriever and
// evaluates the round's hybrid with it; the hybrid then is never below BM25
// on the held-out queries' own nDCG (the grid includes w = 0).
func TestRunFusionHoldout(t *testing.T) {
	cfg := toyConfig(t, toyRetriever(t))
	cfg.FusionHoldout = 0.25
	qs, qrels := toyEval()
	rep, err := Run(context.Background(), cfg, toyCorpus(), qs, qrels, openStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	rd := rep.Rounds[1]
	if rd.Counts.HeldOut != 3 || rd.Counts.Triplets != 9 {
		t.Fatalf("held out %d, trained %d; want 3 and 9 of 12", rd.Counts.HeldOut, rd.Counts.Triplets)
	}
	f := rd.Fusion
	if f == nil || f.HeldOut != 3 || len(f.NDCG) != len(FusionGrid) || math.Abs(f.DenseWeight+f.BM25Weight-1) > 1e-12 {
		t.Fatalf("fusion choice %+v", f)
	}
	for w, v := range f.NDCG {
		if v > f.NDCG[strconv.FormatFloat(f.DenseWeight, 'f', 1, 64)]+1e-12 {
			t.Errorf("weight %s has nDCG %v above the chosen %v", w, v, f.DenseWeight)
		}
	}
	w, ok, err := fusion.ReadWeights(rd.RetrieverDir)
	if err != nil || !ok || w.Dense != f.DenseWeight || w.BM25 != f.BM25Weight {
		t.Errorf("%s/%s = %+v, %v, %v; want the chosen weights", rd.RetrieverDir, fusion.WeightsFile, w, ok, err)
	}
}
