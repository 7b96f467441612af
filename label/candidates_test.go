package label

import (
	"io"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/retrieval/evalrun"
)

func TestLoadCandidates(t *testing.T) {
	corpus, qa, err := sample.WriteTo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	all, _, err := data.OpenQueries(qa, "test")
	if err != nil {
		t.Fatal(err)
	}
	c := evalrun.DefaultCorpus(corpus)
	queries, qrels, idx, err := LoadCandidates(qa, 2, &c, evalrun.DefaultBM25(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	if len(queries) != 2 || queries[0].ID != all[0].ID || queries[1].ID != all[1].ID {
		t.Errorf("limit 2: got %d queries, want the first 2 of %d", len(queries), len(all))
	}
	if _, want, _ := data.OpenQueries(qa, "test"); len(qrels) != len(want) || idx.Count() == 0 {
		t.Errorf("qrels %d (want %d, the QA file's), indexed chunks %d (want > 0)", len(qrels), len(want), idx.Count())
	}
	if hits, err := idx.Search(queries[0].Text, 3); err != nil || len(hits) == 0 {
		t.Errorf("search %q: %d hits, %v", queries[0].Text, len(hits), err)
	}

	bad := evalrun.DefaultBM25()
	bad.Preset = "okapi"
	for _, tc := range []struct {
		name, qa string
		bm       evalrun.BM25
		want     string
	}{
		{"no qa", "", evalrun.DefaultBM25(), "--qa is required"},
		{"bad preset", qa, bad, "okapi"},
	} {
		c := evalrun.DefaultCorpus(corpus)
		if _, _, _, err := LoadCandidates(tc.qa, 0, &c, tc.bm, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to name %q", tc.name, err, tc.want)
		}
	}
}
