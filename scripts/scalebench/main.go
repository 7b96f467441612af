// Command scalebench makes the synthetic corpora of docs/scaling.md and
// measures dense search on them.
//
//	scalebench synth -n N -o corpus.jsonl [-seed 1] [-ap DIR]
//	scalebench search -encoded DIR -factory IVF1024,PQ16 [-nprobe 16] [-queries 1000] [-seed 1]
//
// synth writes N documents to a JSON Lines file ({"_id", "title", "text"}):
// document i is made of sentences drawn, by a PRNG seeded with -seed, from
// the AP protocols (../shared/data/ap_protocols), about 450 characters each,
// so with ragforge's default 512-character chunks every document is one
// chunk. The same N and seed give the same bytes.
//
// search loads a corpus encoded by `ragforge encode`, builds a Flat index
// (exact) and one of -factory (trained on every vector, as
// retrieval/dense.Build does), then searches -queries query vectors (corpus
// vectors with Gaussian noise, normalized; seeded) one at a time, k=10, and
// prints build times, search latency p50/p99 of both, and the mean
// recall@10 of the factory index against Flat, as one JSON object.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/dense"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: scalebench synth|search [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "synth":
		err = synth(os.Args[2:])
	case "search":
		err = search(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want synth or search", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

func synth(args []string) error {
	fs := flag.NewFlagSet("synth", flag.ExitOnError)
	n := fs.Int("n", 10000, "documents to write")
	out := fs.String("o", "", "output .jsonl (required)")
	seed := fs.Uint64("seed", 1, "PRNG seed")
	ap := fs.String("ap", "../shared/data/ap_protocols", "the AP protocols corpus (HF save_to_disk directory)")
	target := fs.Int("chars", 450, "characters per document, about")
	fs.Parse(args)
	if *out == "" || *n < 1 || *target < 1 {
		return fmt.Errorf("synth: -o is required, -n and -chars must be ≥ 1")
	}
	docs, err := data.LoadCorpus(*ap, data.FieldOptions{})
	if err != nil {
		return err
	}
	var sents, titles []string
	for _, d := range docs {
		titles = append(titles, d.Title)
		for _, s := range strings.SplitAfter(d.Text, ". ") {
			if s = strings.TrimSpace(s); len(s) >= 20 {
				sents = append(sents, s)
			}
		}
	}
	if len(sents) == 0 {
		return fmt.Errorf("synth: no sentences in %s", *ap)
	}
	rng := rand.New(rand.NewPCG(*seed, 0x5ca1e))
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range *n {
		var b strings.Builder
		for b.Len() < *target {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(sents[rng.IntN(len(sents))])
		}
		text := b.String()
		if len(text) > *target+60 { // keep one chunk: cut at a word boundary
			text = text[:*target+60]
			if j := strings.LastIndexByte(text, ' '); j > 0 {
				text = text[:j]
			}
		}
		if err := enc.Encode(map[string]string{"_id": fmt.Sprintf("syn%07d", i), "title": titles[rng.IntN(len(titles))], "text": text}); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

type searchReport struct {
	Rows          int     `json:"rows"`
	Dim           int     `json:"dim"`
	Factory       string  `json:"factory"`
	Nprobe        int     `json:"nprobe"`
	Queries       int     `json:"queries"`
	LoadS         float64 `json:"load_s"`
	FlatBuildS    float64 `json:"flat_build_s"`
	FactoryBuildS float64 `json:"factory_build_s"`
	FlatP50Ms     float64 `json:"flat_p50_ms"`
	FlatP99Ms     float64 `json:"flat_p99_ms"`
	FactoryP50Ms  float64 `json:"factory_p50_ms"`
	FactoryP99Ms  float64 `json:"factory_p99_ms"`
	RecallAt10    float64 `json:"recall_at_10_vs_flat"`
}

func search(args []string) error {
	fs := flag.NewFlagSet("search", flag.ExitOnError)
	encDir := fs.String("encoded", "", "root of a ragforge encode output (rag2 layout) (required)")
	factory := fs.String("factory", "IVF1024,PQ16", "faiss index_factory string to compare with Flat")
	nprobe := fs.Int("nprobe", 16, "IVF lists visited per query (0: faiss default)")
	nq := fs.Int("queries", 1000, "query vectors")
	seed := fs.Uint64("seed", 1, "PRNG seed of the queries")
	fs.Parse(args)
	if *encDir == "" || *nq < 1 {
		return fmt.Errorf("search: -encoded is required, -queries must be ≥ 1")
	}
	t0 := time.Now()
	e, err := data.OpenEncoded(data.EncodedScheme + *encDir)
	if err != nil {
		return err
	}
	rep := searchReport{Rows: len(e.Docs), Dim: e.Dim, Factory: *factory, Nprobe: *nprobe, Queries: *nq, LoadS: time.Since(t0).Seconds()}
	ids := make([]string, len(e.Docs))
	for i, d := range e.Docs {
		ids[i] = d.ID
	}
	t0 = time.Now()
	flat, err := dense.Build(ids, e.Vectors, e.Dim, "Flat")
	if err != nil {
		return err
	}
	rep.FlatBuildS = time.Since(t0).Seconds()
	t0 = time.Now()
	ivf, err := dense.Build(ids, e.Vectors, e.Dim, *factory)
	if err != nil {
		return err
	}
	rep.FactoryBuildS = time.Since(t0).Seconds()
	if *nprobe > 0 {
		if err := ivf.SetSearch(dense.SearchParams{Nprobe: *nprobe}); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(*seed, 0x9e3779b9))
	d := e.Dim
	queries := make([][]float32, *nq)
	for i := range queries {
		row := rng.IntN(len(e.Docs))
		q := make([]float32, d)
		var norm float64
		for j := range q {
			q[j] = e.Vectors[row*d+j] + float32(rng.NormFloat64()*0.05)
			norm += float64(q[j]) * float64(q[j])
		}
		for j := range q {
			q[j] /= float32(math.Sqrt(norm))
		}
		queries[i] = q
	}
	var flatLat, ivfLat []float64
	var recall float64
	for _, q := range queries {
		t := time.Now()
		fh, err := flat.Search(q, 10)
		if err != nil {
			return err
		}
		flatLat = append(flatLat, float64(time.Since(t).Microseconds())/1000)
		t = time.Now()
		ih, err := ivf.Search(q, 10)
		if err != nil {
			return err
		}
		ivfLat = append(ivfLat, float64(time.Since(t).Microseconds())/1000)
		exact := map[string]bool{}
		for _, h := range fh[0] {
			exact[h.ID] = true
		}
		hit := 0
		for _, h := range ih[0] {
			if exact[h.ID] {
				hit++
			}
		}
		recall += float64(hit) / float64(max(len(fh[0]), 1))
	}
	rep.FlatP50Ms, rep.FlatP99Ms = pct(flatLat, 0.5), pct(flatLat, 0.99)
	rep.FactoryP50Ms, rep.FactoryP99Ms = pct(ivfLat, 0.5), pct(ivfLat, 0.99)
	rep.RecallAt10 = recall / float64(len(queries))
	return json.NewEncoder(os.Stdout).Encode(rep)
}

func pct(v []float64, p float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}
