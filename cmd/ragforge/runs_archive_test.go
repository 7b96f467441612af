package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/storedb/storedbtest"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
)

// runs export from a SQLite file, runs import into the other store, export
// again: the same file.
func TestRunsExportImport(t *testing.T) { storedbtest.Each(t, testRunsExportImport) }

func testRunsExportImport(t *testing.T, target string) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	st, err := tracker.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Start("label perplexity", map[string]int{"k": 8}, "v", "cpu")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := labelstore.NewStore(st.DB())
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Put([]labelstore.Label{{RunID: r.ID, Key: "k1", ExampleID: "q#c", Question: "q", Snippet: "s",
		Label: filter.Helpful, Method: labelstore.MethodPerplexity, PPLWithout: 2, PPLWith: 1.5}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Metric("helpful_rate", 1, 0.3); err != nil {
		t.Fatal(err)
	}
	if err := r.Finish(nil); err != nil {
		t.Fatal(err)
	}
	st.Close()

	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	run(t, "--db", src, "runs", "export", "--all", "-o", a)
	if out := run(t, "--db", target, "runs", "import", a); !strings.Contains(out, "imported 1 runs") {
		t.Errorf("import said %q", out)
	}
	run(t, "--db", target, "runs", "export", r.ID[:20], "-o", b)
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if len(ab) == 0 || string(ab) != string(bb) {
		t.Errorf("export after import differs:\n%s\n%s", ab, bb)
	}
	if code, stderr := runErr("--db", target, "runs", "import", a); code == 0 || !strings.Contains(stderr, "run already exists") {
		t.Errorf("second import: code %d, stderr %q", code, stderr)
	}
	if code, stderr := runErr("--db", src, "runs", "export", "-o", a); code == 0 || !strings.Contains(stderr, "--all") {
		t.Errorf("export without runs: code %d, stderr %q", code, stderr)
	}
}
