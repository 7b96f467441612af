package label

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
)

// ictQueryChunks: a#0 and a#1 overlap by one sentence, b#0 repeats a#0's
// first sentence in another document, and short#0 has one sentence only.
var ictQueryChunks = []data.Chunk{
	{ID: "a#0", DocID: "a", Text: "Alpha beta gamma delta.  Epsilon zeta eta theta. Iota kappa lambda mu."},
	{ID: "a#1", DocID: "a", Index: 1, Text: "Iota kappa lambda mu. Nu xi omicron pi. Rho sigma tau upsilon."},
	{ID: "b#0", DocID: "b", Text: "Phi chi psi omega. Alpha beta gamma delta."},
	{ID: "short#0", DocID: "short", Text: "Only one sentence here."},
}

func TestICTQueries(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  ICTOptions
		n    int  // queries
		cut  bool // sentences removed from the index text
	}{
		{"removed, one per chunk", ICTOptions{PerChunk: 1, Seed: 42}, 3, true},
		{"removed, three per chunk", ICTOptions{PerChunk: 3, Seed: 7}, 3*2 + 2, true},
		{"kept", ICTOptions{PerChunk: 2, Keep: 1, Seed: 42}, 3 * 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			set, err := ICTQueries(context.Background(), ictQueryChunks, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(set.Queries) != c.n || len(set.Qrels) != c.n || len(set.Chunks) != len(ictQueryChunks) {
				t.Fatalf("%d queries, %d judged, %d chunks; want %d, %d, %d", len(set.Queries), len(set.Qrels), len(set.Chunks), c.n, c.n, len(ictQueryChunks))
			}
			for i, ch := range set.Chunks {
				if ch.ID != ictQueryChunks[i].ID || ch.DocID != ictQueryChunks[i].DocID {
					t.Errorf("chunk %d: %s of %s, want the input's %s", i, ch.ID, ch.DocID, ictQueryChunks[i].ID)
				}
			}
			for _, q := range set.Queries {
				own := strings.Split(strings.TrimPrefix(q.ID, "ict:"), ":")[0]
				rel := set.Qrels[q.ID]
				if rel[own] != 1 {
					t.Errorf("%s: own chunk %s not relevant (%v)", q.ID, own, rel)
				}
				var want []string
				for i, ch := range ictQueryChunks {
					holds := strings.Contains(normSpace(ch.Text), q.Text)
					if holds {
						want = append(want, ch.ID)
					}
					if holds != (rel[ch.ID] == 1) {
						t.Errorf("%s %q: chunk %s holds it %v, judged %d", q.ID, q.Text, ch.ID, holds, rel[ch.ID])
					}
					if in := strings.Contains(set.Chunks[i].Text, q.Text); holds && in == c.cut {
						t.Errorf("%s %q: in index chunk %s = %v, want %v", q.ID, q.Text, ch.ID, in, !c.cut)
					}
				}
				if len(rel) != len(want) {
					t.Errorf("%s: judged %v, want %v", q.ID, rel, want)
				}
			}
			again, err := ICTQueries(context.Background(), ictQueryChunks, c.opt)
			if err != nil || fmt.Sprint(again) != fmt.Sprint(set) {
				t.Errorf("not reproducible from the seed (%v)", err)
			}
		})
	}
}

// TestICTQueriesOverlap: a sentence an overlapping neighbour or another
// document holds whole is judged relevant there and removed there too.
func TestICTQueriesOverlap(t *testing.T) {
	set, err := ICTQueries(context.Background(), ictQueryChunks, ICTOptions{PerChunk: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	judged := map[string][]string{} // the same for a sentence drawn from both chunks holding it
	for _, q := range set.Queries {
		var ids []string
		for id := range set.Qrels[q.ID] {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if prev, ok := judged[q.Text]; ok && !slices.Equal(prev, ids) {
			t.Errorf("%q judged in %v and in %v", q.Text, prev, ids)
		}
		judged[q.Text] = ids
	}
	for sent, want := range map[string][]string{
		"Iota kappa lambda mu.":   {"a#0", "a#1"},
		"Alpha beta gamma delta.": {"a#0", "b#0"},
		"Nu xi omicron pi.":       {"a#1"},
	} {
		if !slices.Equal(judged[sent], want) {
			t.Errorf("%q judged in %v, want %v", sent, judged[sent], want)
		}
	}
	// Every sentence of a#0 was drawn and removed; the ones of b#0 too.
	if got := set.Chunks[0].Text; got != "" {
		t.Errorf("a#0 index text %q, want empty (all its sentences were queries)", got)
	}
	if set.Chunks[3].Text != ictQueryChunks[3].Text {
		t.Errorf("short#0 changed: %q", set.Chunks[3].Text)
	}
}

func TestICTQueriesErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		chunks []data.Chunk
		opt    ICTOptions
		want   string
	}{
		{"no usable chunk", ictQueryChunks[3:], ICTOptions{}, "no chunk"},
		{"bad option", ictQueryChunks, ICTOptions{Keep: 2}, "Keep"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ICTQueries(context.Background(), c.chunks, c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want one naming %q", err, c.want)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ICTQueries(ctx, ictQueryChunks, ICTOptions{}); err == nil {
		t.Error("cancelled context: no error")
	}
}
