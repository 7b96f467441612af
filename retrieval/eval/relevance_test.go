package eval

import (
	"encoding/csv"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/internal/testutil"
)

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  \n\t ", ""},
		{"  Ácido  PÍCRICO\n\tção ", "acido picrico cao"},
		{"Coloração de Hematoxilina-Eosina", "coloracao de hematoxilina-eosina"},
		{"naïve Œuvre", "naive œuvre"},                 // Œ lower-cases, has no decomposition
		{"e\u0301 x", "e x"},                           // already decomposed combining mark dropped
		{"a \u0301b", "a b"},                           // lone mark after a space keeps one space
		{"“Azular” os núcleos", "“azular” os nucleos"}, // punctuation kept
	}
	for _, tt := range tests {
		if got := Normalize(tt.in); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestContainsEvidence(t *testing.T) {
	chunk := "O tempo máximo de fixação com esta solução deve ser de 24 horas (ver Bouin).\nLavar em água."
	tests := []struct {
		name, context string
		want          bool
	}{
		{"exact substring", "deve ser de 24 horas", true},
		{"substring after normalization", "FIXACAO com esta   SOLUCAO", true},
		{"substring not token aligned", "po maximo de fix", true},
		{"5-token run, rest differs", "Sabe-se que o tempo máximo de fixação é outro", true}, // "o tempo maximo de fixacao"
		{"only 4-token run", "Diz que tempo máximo de fixação nunca", false},                 // "tempo maximo de fixacao"
		{"run across the newline", "24 horas (ver Bouin). Lavar em outra", true},             // "24 horas (ver bouin). lavar" = 5 tokens
		{"unrelated", "Adicionar o formol ao ácido pícrico", false},
		{"empty context", "   ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ContainsEvidence(tt.context, chunk); got != tt.want {
				t.Errorf("ContainsEvidence(%q) = %v, want %v", tt.context, got, tt.want)
			}
		})
	}
}

func TestEvidenceSpans(t *testing.T) {
	// Byte layout: "Fixar em Bouin.\n" is 16 bytes, so "Adicionar" starts at 16;
	// "Adicionar o  formol ao ácido pícrico" is 9+1+1+2+6+1+2+1+6+1+8 = 38 bytes
	// (á, í take 2 bytes), ending at 54. "formol" starts at 16+9+1+1+2 = 29.
	doc := "Fixar em Bouin.\nAdicionar o  formol ao ácido pícrico, seguido. Adicionar o formol."
	tests := []struct {
		name, context string
		want          [][2]int
	}{
		{"collapsed spaces and accents", "adicionar o formol ao acido picrico", [][2]int{{16, 54}}},
		// "formol ao á": 6+1+2+1+2 = 12 bytes; the end includes the whole 2-byte á.
		{"ends inside a decomposed rune", "FORMOL ao a", [][2]int{{29, 41}}},
		// second occurrence: "seguido. " ends at 54+2+9 = 65; "Adicionar o formol" = 18 bytes.
		{"two occurrences", "adicionar o formol", [][2]int{{16, 35}, {65, 83}}},
		{"across the newline", "bouin. adicionar", [][2]int{{9, 25}}},
		{"absent", "adicionar o formol ao acido acetico", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EvidenceSpans(doc, tt.context)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("EvidenceSpans(%q) = %v, want %v", tt.context, got, tt.want)
			}
			for _, s := range got {
				if Normalize(doc[s[0]:s[1]]) != Normalize(tt.context) {
					t.Errorf("span %v = %q does not normalize to the context", s, doc[s[0]:s[1]])
				}
			}
		})
	}
}

// smallCorpus: doc A is split into three chunks with overlaps; doc B holds
// one chunk. Offsets are byte offsets in the document text.
func smallCorpus() ([]data.Document, []data.Chunk, []data.Query) {
	a := "Fixador de Bouin. Adicionar o formol ao ácido pícrico, seguido do ácido acético. Guardar à temperatura ambiente."
	b := "Solução de Bouin Hollande: o tempo máximo de fixação deve ser de 24 horas."
	docs := []data.Document{{ID: "A", Text: a}, {ID: "B", Text: b}}
	mk := func(doc string, i, s, e int, text string) data.Chunk {
		return data.Chunk{ID: fmt.Sprintf("%s#%d", doc, i), DocID: doc, Index: i, Start: s, End: e, Text: text}
	}
	chunks := []data.Chunk{
		mk("A", 0, 0, 40, a[0:40]),   // "Fixador de Bouin. Adicionar o formol ao "
		mk("A", 1, 30, 70, a[30:70]), // "formol ao ácido pícrico, seguido do á"
		mk("A", 2, 84, len(a), a[84:]),
		mk("B", 0, 0, len(b), b),
	}
	queries := []data.Query{
		{ID: "q-formol", Context: "Adicionar o formol ao ácido pícrico"},
		{ID: "q-24h", Context: "O tempo máximo de fixação deve ser de 24 horas."},
		{ID: "q-none", Context: "Nada disto aparece"},
		{ID: "q-short", Context: "ÍDO PÍC"}, // 2 tokens, not token aligned: substring path only
		{ID: "q-empty"},
	}
	return docs, chunks, queries
}

func TestBuildQrelsSmall(t *testing.T) {
	docs, chunks, queries := smallCorpus()
	tests := []struct {
		name string
		rule Rule
		want data.Qrels
	}{
		// AP rule: the normalized context "adicionar o formol ao acido picrico"
		// (6 tokens) is in no chunk; A#0 ends with "adicionar o formol ao" and
		// A#1 starts with "formol ao acido picrico," -- runs of 4 tokens only,
		// so q-formol has no relevant chunk. q-24h is a substring of B#0.
		{"contains", Rule{}, data.Qrels{
			"q-formol": {}, "q-24h": {"B#0": 1}, "q-none": {}, "q-empty": {},
			"q-short": {"A#1": 1}, // "...acido picrico, ..." in A#1 only
		}},
		// Span rule: the context occurs in A at [18,55) ("Fixador de Bouin. " is
		// 18 bytes, the context 37); A#0 [0,40) and A#1
		// [30,70) overlap it, A#2 [84,..) does not.
		{"spans", SpanRule(docs), data.Qrels{
			"q-formol": {"A#0": 1, "A#1": 1}, "q-24h": {"B#0": 1}, "q-none": {}, "q-empty": {},
			// "ido pic" is at [43,51) ("ác" of ácido starts at 40): A#1 only.
			"q-short": {"A#1": 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BuildQrels(queries, chunks, tt.rule)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("BuildQrels = %v, want %v", got, tt.want)
			}
			if brute := bruteQrels(queries, chunks, tt.rule); !reflect.DeepEqual(got, brute) {
				t.Errorf("BuildQrels = %v, Rule.Func gives %v", got, brute)
			}
		})
	}
}

func TestBuildQrelsErrors(t *testing.T) {
	docs, chunks, queries := smallCorpus()
	badSpan := append([]data.Chunk{}, chunks...)
	badSpan[3].End = 1000
	tests := []struct {
		name    string
		queries []data.Query
		chunks  []data.Chunk
		rule    Rule
		want    string
	}{
		{"empty query id", []data.Query{{Context: "x"}}, chunks, Rule{}, `query 0: field "ID": empty`},
		{"duplicate query id", append(queries, queries[0]), chunks, Rule{}, `query 5: field "ID": duplicate id "q-formol"`},
		{"duplicate chunk id", queries, append(chunks, chunks[0]), Rule{}, `chunk 4: field "ID": duplicate id "A#0"`},
		{"unknown document", queries, chunks, SpanRule(docs[:1]), `chunk 3 (B#0): field "DocID": document "B" not in Rule.Docs`},
		{"span outside document", queries, badSpan, SpanRule(docs), `chunk 3 (B#0): field "Start/End": span [0,1000) outside document`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BuildQrels(tt.queries, tt.chunks, tt.rule)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func bruteQrels(queries []data.Query, chunks []data.Chunk, rule Rule) data.Qrels {
	f := rule.Func()
	q := data.Qrels{}
	for _, qu := range queries {
		q[qu.ID] = map[string]int{}
		for _, c := range chunks {
			if f(qu, c) {
				q[qu.ID][c.ID] = 1
			}
		}
	}
	return q
}

// loadAPDev reads the AP QA dev split (Question, Ground_Truth, Context) from
// ../shared, skipping the test when it is absent.
func loadAPDev(tb testing.TB) []data.Query {
	tb.Helper()
	path := testutil.SharedPath(tb, "data/ap_protocols_qa/dev.csv")
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		tb.Fatalf("read %s: %v", path, err)
	}
	var qs []data.Query
	for i, r := range recs[1:] {
		qs = append(qs, data.Query{ID: fmt.Sprintf("dev-%03d", i), Text: r[0], Answer: r[1], Context: r[2]})
	}
	return qs
}

// apCorpus builds documents from the real AP contexts: document j holds, in
// order, the answer of query j, the contexts of queries j..j+2 and the
// question of query j, separated by newlines; copies repeats the corpus with
// new ids. Chunks are 160-byte windows with a 40-byte overlap, cut on rune
// boundaries (a stand-in for the recursive splitter).
func apCorpus(qs []data.Query, copies int) ([]data.Document, []data.Chunk) {
	var docs []data.Document
	var chunks []data.Chunk
	for c := 0; c < copies; c++ {
		for j := range qs {
			text := qs[j].Answer + "\n" + qs[j].Context + "\n" + qs[(j+1)%len(qs)].Context + "\n" +
				qs[(j+2)%len(qs)].Context + "\n" + qs[j].Text
			id := fmt.Sprintf("doc-%d-%03d", c, j)
			docs = append(docs, data.Document{ID: id, Text: text})
			for i, s := 0, 0; s < len(text); i++ {
				e := min(s+160, len(text))
				for e < len(text) && !utf8.RuneStart(text[e]) {
					e++
				}
				chunks = append(chunks, data.Chunk{ID: fmt.Sprintf("%s#%d", id, i), DocID: id, Index: i, Start: s, End: e, Text: text[s:e]})
				if e == len(text) {
					break
				}
				s = e - 40
				for !utf8.RuneStart(text[s]) {
					s++
				}
			}
		}
	}
	return docs, chunks
}

func TestBuildQrelsRealData(t *testing.T) {
	qs := loadAPDev(t)
	docs, chunks := apCorpus(qs, 1)
	for _, tt := range []struct {
		name string
		rule Rule
	}{{"contains", Rule{}}, {"spans", SpanRule(docs)}} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BuildQrels(qs, chunks, tt.rule)
			if err != nil {
				t.Fatal(err)
			}
			// The per-pair reference is slow (it renormalizes every pair), so
			// compare on every 8th query against all chunks.
			var sample []data.Query
			for i := 0; i < len(qs); i += 8 {
				sample = append(sample, qs[i])
			}
			{
				brute := bruteQrels(sample, chunks, tt.rule)
				for _, q := range sample {
					if !reflect.DeepEqual(got[q.ID], brute[q.ID]) {
						t.Errorf("%s: index %v, brute force %v", q.ID, got[q.ID], brute[q.ID])
					}
				}
			}
			// Every context is copied verbatim into three documents, so every
			// query with a non-empty context has a relevant chunk.
			for _, q := range qs {
				if Normalize(q.Context) != "" && len(got[q.ID]) == 0 {
					t.Errorf("%s: no relevant chunk for context %q", q.ID, q.Context)
				}
			}
		})
	}
}

// BenchmarkBuildQrels: the 200 AP dev queries against about 1,000 chunks.
func BenchmarkBuildQrels(b *testing.B) {
	qs := loadAPDev(b)
	docs, chunks := apCorpus(qs, 1)
	for len(chunks) < 1000 {
		docs, chunks = apCorpus(qs, len(docs)/len(qs)+1)
	}
	for _, bb := range []struct {
		name string
		rule Rule
	}{{"contains", Rule{}}, {"spans", SpanRule(docs)}} {
		b.Run(fmt.Sprintf("%s/chunks=%d", bb.name, len(chunks)), func(b *testing.B) {
			for b.Loop() {
				if _, err := BuildQrels(qs, chunks, bb.rule); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
