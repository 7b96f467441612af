package evalrun

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/retrieval/search"
)

func TestConfigCheck(t *testing.T) {
	pseudo := func(context.Context, []data.Chunk, float64, uint64) ([]data.Query, data.Qrels, []data.Chunk, error) {
		return nil, nil, nil, nil
	}
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string // "" = valid
	}{
		{"defaults", func(c *Config) {}, ""},
		{"pseudo ict", func(c *Config) { c.QA, c.Pseudo, c.PseudoQueries = "", "ict", pseudo }, ""},
		{"unknown pseudo", func(c *Config) { c.QA, c.Pseudo = "", "cloze" }, `--pseudo-queries "cloze": want ict`},
		{"pseudo and qa", func(c *Config) { c.Pseudo = "ict" }, "exclude each other"},
		{"no questions", func(c *Config) { c.QA = "" }, "--qa is required"},
		{"keep above 1", func(c *Config) { c.QA, c.Pseudo, c.PseudoKeep = "", "ict", 1.5 }, "--pseudo-keep 1.5"},
		{"pseudo without source", func(c *Config) { c.QA, c.Pseudo = "", "ict" }, "no pseudo-query source"},
		{"k not a number", func(c *Config) { c.Ks = "1,x" }, `"x" is not a positive integer`},
		{"k empty entry", func(c *Config) { c.Ks = "1,,4" }, "entry 2 is empty"},
		{"relevance", func(c *Config) { c.Relevance = "exact" }, `--relevance "exact"`},
		{"depth below k", func(c *Config) { c.Depth = 4 }, "--depth 4: below the largest --k 8"},
		{"union on bm25", func(c *Config) { c.Retriever.Union = true }, "--union applies to --retriever hybrid only"},
		{"dense without encoder", func(c *Config) { c.Retriever.Mode = search.Dense }, "--retriever dense needs --encoder"},
		{"unknown mode", func(c *Config) { c.Retriever.Mode = "sparse" }, `--retriever "sparse"`},
		{"nprobe on bm25", func(c *Config) { c.Retriever.Nprobe = 8 }, "--retriever bm25 has none"},
		{"bad preset", func(c *Config) { c.Retriever.Preset = "okapi" }, `--bm25-preset "okapi"`},
		{"batch size", func(c *Config) { c.Retriever.Enc.BatchSize = 0 }, "--batch-size 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig("corpus.jsonl", "qa.csv")
			tc.edit(&c)
			ks, err := c.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.want == "" && len(ks) != 4:
				t.Errorf("cutoffs %v, want 1,2,4,8", ks)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Check = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestBM25Config(t *testing.T) {
	given := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, g := range names {
				if g == n {
					return true
				}
			}
			return false
		}
	}
	for _, tc := range []struct {
		name    string
		b       BM25
		k1, bb  float64
		wantErr string
	}{
		{"default preset", DefaultBM25(), 1.2, 0.75, ""},
		{"rank_bm25 preset", BM25{Preset: "rank_bm25", B: -1}, 1.5, 0.75, ""},
		{"k1 and b set in code", BM25{Preset: "default", K1: 0.9, B: 0.4}, 0.9, 0.4, ""},
		{"b 0 set in code applies", BM25{Preset: "default", B: 0}, 1.2, 0, ""},
		{"k1 -5 not given keeps the preset", BM25{Preset: "default", K1: -5, B: -1, Given: given()}, 1.2, 0.75, ""},
		{"k1 -5 given is refused", BM25{Preset: "default", K1: -5, B: -1, Given: given("bm25-k1")}, 0, 0, `field "K1": -5`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.b.Config()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Config = %+v, %v; want an error with %q", cfg, err, tc.wantErr)
				}
				return
			}
			if err != nil || cfg.K1 != tc.k1 || cfg.B != tc.bb {
				t.Errorf("Config = k1 %v b %v (%v), want k1 %v b %v", cfg.K1, cfg.B, err, tc.k1, tc.bb)
			}
		})
	}
}

// The stored run config keeps the fields `ragforge eval retrieval` has
// always recorded (pipeline build --from-run and runs show read them).
func TestConfigJSONGolden(t *testing.T) {
	c := DefaultConfig("corpus.jsonl", "qa.csv")
	got, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "default_config.json")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(got)+"\n" {
		t.Errorf("config JSON changed:\n%s\nwant:\n%s", got, want)
	}
	var back Config
	if err := json.Unmarshal(got, &back); err != nil || back.Retriever.Mode != search.BM25 || back.Ks != "1,2,4,8" || back.Corpus.ChunkSize != 512 {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

// Run records what Evaluate computes: the same metrics with and without a
// run store, the run finished with its config, metrics and files.
func TestRunRecordsTheEvaluation(t *testing.T) {
	dir := t.TempDir()
	corpus, qa, err := sample.WriteTo(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tracker.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := DefaultConfig(corpus, qa)
	res, err := Run(context.Background(), st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Queries != 37 || res.Metrics["Recall@8"] < 0.8 || res.RunID == "" {
		t.Errorf("queries %d, Recall@8 %.3f, run %q; want 37, >= 0.8, an id", res.Queries, res.Metrics["Recall@8"], res.RunID)
	}
	if want := filepath.Join(dir, "runs", res.RunID, "run.trec"); res.Files["trec"] != want {
		t.Errorf("run.trec at %s, want %s", res.Files["trec"], want)
	}
	d, err := st.Get(res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var stored Config
	if err := json.Unmarshal(d.Config, &stored); err != nil || d.Kind != Kind || d.Status != tracker.StatusDone || stored.QA != qa {
		t.Errorf("stored run: kind %s, status %s, qa %q (%v)", d.Kind, d.Status, stored.QA, err)
	}
	logged := map[string]float64{}
	for _, m := range d.Metrics {
		logged[m.Name] = m.Value
	}
	cfg.Out = filepath.Join(dir, "bare")
	bare, err := Evaluate(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range bare.Metrics {
		if res.Metrics[k] != v || logged[k] != v {
			t.Errorf("%s: run %v, logged %v, without a store %v", k, res.Metrics[k], logged[k], v)
		}
	}
	if bare.RunID != "" {
		t.Errorf("run id %q without a run", bare.RunID)
	}
}

func TestLabel(t *testing.T) {
	for _, tc := range []struct {
		mode        string
		dense, bm25 float64
		want        string
	}{
		{"hybrid", 0, 1, "BM25 (dense weight 0)"},
		{"hybrid", 0.3, 0.7, "hybrid (dense 0.3, bm25 0.7)"},
		{"dense", 0, 0, "dense"},
		{"bm25", 0, 0, "bm25"},
	} {
		if got := Label(tc.mode, tc.dense, tc.bm25); got != tc.want {
			t.Errorf("Label(%s, %v, %v) = %q, want %q", tc.mode, tc.dense, tc.bm25, got, tc.want)
		}
	}
}
