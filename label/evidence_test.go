package label

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/filter"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/eval"
)

// fixedRetriever returns preset hits per query text.
type fixedRetriever map[string][]retrieval.Hit

func (f fixedRetriever) Search(q string, k int) ([]retrieval.Hit, error) {
	h, ok := f[q]
	if !ok {
		return nil, errors.New("unknown query " + q)
	}
	return h[:min(k, len(h))], nil
}

var evChunks = map[string]data.Chunk{
	"a#0": {ID: "a#0", DocID: "a", Text: "Corar com Azul de Toluidina durante 1 minuto e lavar."}, // contains the 5-gram "corar com azul de toluidina"
	"a#1": {ID: "a#1", DocID: "a", Text: "Diferenciar em álcool a 96%."},
	"b#0": {ID: "b#0", DocID: "b", Text: "Desparafinar e hidratar os cortes."},
	"b#1": {ID: "b#1", DocID: "b", Text: "Montar em meio sintético."},
	"c#0": {ID: "c#0", DocID: "c", Text: "Azul de Toluidina é um corante."}, // shares only 4 tokens
	"c#1": {ID: "c#1", DocID: "c", Text: "Lavar em água corrente."},
}

func evLookup(id string) (data.Chunk, bool) { c, ok := evChunks[id]; return c, ok }

var evQuery = data.Query{ID: "q1", Text: "Tempo de coloração?", Answer: "1 minuto", Context: "Corar com Azul de Toluidina 1 min."}

func evRetriever() fixedRetriever {
	return fixedRetriever{evQuery.Text: {{ID: "c#0", Score: 9}, {ID: "a#0", Score: 8}, {ID: "a#1", Score: 7}, {ID: "b#0", Score: 6}, {ID: "b#1", Score: 5}, {ID: "c#1", Score: 4}}}
}

func chunkIDs(ls []labelstore.Label) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.ChunkID+"="+strings.Trim(l.Label, "[]"))
	}
	return out
}

func TestEvidenceLabeler(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    EvidenceLabeler
		want []string
	}{
		{"contains rule, all negatives", EvidenceLabeler{},
			[]string{"c#0=NOT_HELPFUL", "a#0=HELPFUL", "a#1=NOT_HELPFUL", "b#0=NOT_HELPFUL", "b#1=NOT_HELPFUL", "c#1=NOT_HELPFUL"}},
		{"top 3", EvidenceLabeler{TopN: 3}, []string{"c#0=NOT_HELPFUL", "a#0=HELPFUL", "a#1=NOT_HELPFUL"}},
		{"qrels by doc id", EvidenceLabeler{Qrels: data.Qrels{"q1": {"b": 1, "c#1": 2, "a": 0}}},
			[]string{"c#0=NOT_HELPFUL", "a#0=NOT_HELPFUL", "a#1=NOT_HELPFUL", "b#0=HELPFUL", "b#1=HELPFUL", "c#1=HELPFUL"}},
		{"custom relevance", EvidenceLabeler{Relevant: func(q data.Query, c data.Chunk) bool { return c.DocID == "c" }},
			[]string{"c#0=HELPFUL", "a#0=NOT_HELPFUL", "a#1=NOT_HELPFUL", "b#0=NOT_HELPFUL", "b#1=NOT_HELPFUL", "c#1=HELPFUL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.l
			l.Retriever, l.Lookup, l.DatasetName = evRetriever(), evLookup, "ap_qa"
			got, err := l.Label(context.Background(), []data.Query{evQuery})
			if err != nil {
				t.Fatal(err)
			}
			if ids := chunkIDs(got); !reflect.DeepEqual(ids, tc.want) {
				t.Fatalf("got %v\nwant %v", ids, tc.want)
			}
			g := got[1]
			if g.Method != labelstore.MethodEvidence || g.Score != 8 || g.ExampleID != "q1#a#0" || g.Target != "1 minuto" || g.DatasetName != "ap_qa" ||
				g.Example().Question != filter.Instruction(evChunks["a#0"].Text, evQuery.Text) {
				t.Errorf("label %+v", g)
			}
		})
	}
}

func TestEvidenceLabelerNegativeSampling(t *testing.T) {
	// One positive (a#0) and five negatives.
	for _, tc := range []struct {
		name     string
		perQ     int
		balanced bool
		seed     uint64
		wantNeg  int
	}{
		{"all", 0, false, 1, 5},
		{"two per question", 2, false, 1, 2},
		{"balanced", 0, true, 1, 1},
		{"balanced under cap", 3, true, 7, 1},
		{"cap above count", 9, false, 1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(seed uint64) []string {
				l := &EvidenceLabeler{Retriever: evRetriever(), Lookup: evLookup, NegativesPerQuestion: tc.perQ, Balanced: tc.balanced, Seed: seed}
				got, err := l.Label(context.Background(), []data.Query{evQuery})
				if err != nil {
					t.Fatal(err)
				}
				return chunkIDs(got)
			}
			a := run(tc.seed)
			if len(a) != 1+tc.wantNeg || !strings.Contains(strings.Join(a, " "), "a#0=HELPFUL") {
				t.Fatalf("kept %v, want the positive and %d negatives", a, tc.wantNeg)
			}
			if b := run(tc.seed); !reflect.DeepEqual(a, b) {
				t.Fatalf("same seed, different samples: %v vs %v", a, b)
			}
		})
	}
	// Different seeds give different samples for some seed (2 of 5 negatives: 10 subsets).
	base := ""
	differs := false
	for seed := range uint64(8) {
		l := &EvidenceLabeler{Retriever: evRetriever(), Lookup: evLookup, NegativesPerQuestion: 2, Seed: seed}
		got, _ := l.Label(context.Background(), []data.Query{evQuery})
		s := strings.Join(chunkIDs(got), " ")
		if seed == 0 {
			base = s
		} else if s != base {
			differs = true
		}
	}
	if !differs {
		t.Error("eight seeds drew the same negatives")
	}
}

func TestEvidenceLabelerErrorsAndSkips(t *testing.T) {
	noCtx := data.Query{ID: "q2", Text: "Sem contexto?"}
	l := &EvidenceLabeler{Retriever: evRetriever(), Lookup: evLookup}
	got, err := l.Label(context.Background(), []data.Query{noCtx, evQuery})
	if err != nil || len(got) != 6 {
		t.Fatalf("query without evidence not skipped: %d labels, %v", len(got), err)
	}
	bad := fixedRetriever{evQuery.Text: {{ID: "zz#9", Score: 1}}}
	_, err = (&EvidenceLabeler{Retriever: bad, Lookup: evLookup}).Label(context.Background(), []data.Query{evQuery})
	if err == nil || !strings.Contains(err.Error(), `query 1 (id "q1"): hit "zz#9" not found`) {
		t.Fatalf("unknown hit: %v", err)
	}
	if _, err := (&EvidenceLabeler{}).Label(context.Background(), nil); err == nil {
		t.Fatal("labeler without retriever accepted")
	}
}

// Evidence labels over a real BM25 index, stored in a data/tracker database
// next to a perplexity run, then compared.
func TestEvidenceLabelerBM25InRunStore(t *testing.T) {
	var chunks []data.Chunk
	for _, id := range []string{"a#0", "a#1", "b#0", "b#1", "c#0", "c#1"} {
		chunks = append(chunks, evChunks[id])
	}
	ix, err := bm25.NewMemory(chunks, bm25.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	rs, err := tracker.Open(filepath.Join(t.TempDir(), "ragforge.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	store, err := labelstore.NewStore(rs.DB())
	if err != nil {
		t.Fatal(err)
	}
	run, err := rs.Start("label", map[string]any{"method": "evidence"}, "test", "go")
	if err != nil {
		t.Fatal(err)
	}
	var progress []int
	l := &EvidenceLabeler{Retriever: ix, Lookup: ix.Doc, TopN: 3, Rule: eval.ContainsEvidence, Store: store, RunID: run.ID,
		Progress: func(done, total int) { progress = append(progress, done, total) }}
	q := evQuery
	q.Text = "Corar com Azul de Toluidina"
	got, err := l.Label(context.Background(), []data.Query{q})
	if err != nil {
		t.Fatal(err)
	}
	// BM25 ranks a#0 (all four query terms) first; c#0 shares "azul de toluidina" but not the 5-gram.
	if len(got) != 2 || got[0].ChunkID != "a#0" || got[0].Label != filter.Helpful || got[1].ChunkID != "c#0" || got[1].Label != filter.NotHelpful {
		t.Fatalf("got %v", chunkIDs(got))
	}
	if !reflect.DeepEqual(progress, []int{1, 1}) {
		t.Errorf("progress %v", progress)
	}
	c, _ := store.Counts(run.ID)
	if !reflect.DeepEqual(c, map[string]int{filter.Helpful: 1, filter.NotHelpful: 1}) {
		t.Errorf("counts %v", c)
	}
	// A perplexity label that disagrees on a#0 shows up as a disagreement.
	must(t, store.Put([]labelstore.Label{{RunID: "ppl", Key: labelstore.Key(q.Text, "a#0", ""), ExampleID: "q1#a#0", Question: q.Text, Snippet: evChunks["a#0"].Text,
		ChunkID: "a#0", Label: filter.NotHelpful, Method: labelstore.MethodPerplexity, PPLWithout: 2, PPLWith: 2.5}}))
	dis, err := store.List(labelstore.Filter{Disagreement: true, RunID: run.ID})
	if err != nil || len(dis) != 1 || dis[0].ChunkID != "a#0" {
		t.Fatalf("disagreements %+v, %v", dis, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
