package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/npy"
	"github.com/ragforge/ragforge/retrieval"
	"github.com/ragforge/ragforge/retrieval/bm25"
	"github.com/ragforge/ragforge/retrieval/dense"
	"github.com/ragforge/ragforge/retrieval/encode"
	"github.com/ragforge/ragforge/retrieval/fusion"
	"github.com/ragforge/ragforge/retrieval/search"
)

type probeReport struct {
	Nprobe     int     `json:"nprobe"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	RecallAt10 float64 `json:"recall_at_10_vs_flat"`
}

// searchStage compares a saved index (-index, from the faiss stage) with a Flat
// index over the same vectors (built streaming, as the faiss stage builds):
// single-query latency, k=10, and recall@10 against Flat, per nprobe.
// Queries are corpus rows drawn uniformly (seeded) plus Gaussian noise
// (σ 0.05 per dimension), renormalized.
func searchStage(args []string) error {
	fs := flag.NewFlagSet("search", flag.ExitOnError)
	encoded := fs.String("encoded", "", "RAG² root written by encode (required)")
	name := fs.String("name", "corpus", "corpus name under -encoded")
	indexDir := fs.String("index", "", "index saved by the faiss stage (required)")
	probes := fs.String("nprobe", "8,16,32,64", "comma-separated nprobe values")
	nq := fs.Int("queries", 1000, "query vectors")
	seed := fs.Uint64("seed", 1, "PRNG seed of the queries")
	fs.Parse(args)
	if *encoded == "" || *indexDir == "" || *nq < 1 {
		return fmt.Errorf("search: -encoded and -index are required, -queries must be ≥ 1")
	}
	var nprobes []int
	for _, f := range strings.Split(*probes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("search: -nprobe %q: want positive integers", *probes)
		}
		nprobes = append(nprobes, n)
	}
	t0 := time.Now()
	flat, err := dense.BuildRAG2(*encoded, *name, "Flat", dense.StreamOptions{})
	if err != nil {
		return err
	}
	defer flat.Close()
	flatBuild := time.Since(t0).Seconds()
	ix, err := dense.Load(*indexDir)
	if err != nil {
		return err
	}
	defer ix.Close()
	queries, err := noisyRows(*encoded, *name, *nq, *seed)
	if err != nil {
		return err
	}
	exact := make([][]retrieval.Hit, len(queries))
	var flatLat []float64
	for i, q := range queries {
		t := time.Now()
		h, err := flat.Search(q, 10)
		if err != nil {
			return err
		}
		flatLat = append(flatLat, ms(time.Since(t)))
		exact[i] = h[0]
	}
	rep := map[string]any{"rows": flat.Len(), "queries": len(queries), "flat_build_s": flatBuild,
		"flat_p50_ms": pct(flatLat, 0.5), "flat_p99_ms": pct(flatLat, 0.99)}
	var rows []probeReport
	for _, np := range nprobes {
		if err := ix.SetSearch(dense.SearchParams{Nprobe: np}); err != nil {
			return err
		}
		var lat []float64
		var recall float64
		for i, q := range queries {
			t := time.Now()
			h, err := ix.Search(q, 10)
			if err != nil {
				return err
			}
			lat = append(lat, ms(time.Since(t)))
			want := map[string]bool{}
			for _, x := range exact[i] {
				want[x.ID] = true
			}
			hit := 0
			for _, x := range h[0] {
				if want[x.ID] {
					hit++
				}
			}
			recall += float64(hit) / float64(max(len(exact[i]), 1))
		}
		rows = append(rows, probeReport{Nprobe: np, P50Ms: pct(lat, 0.5), P99Ms: pct(lat, 0.99), RecallAt10: recall / float64(len(queries))})
	}
	rep["index"] = rows
	return report(rep)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// noisyRows draws n corpus rows uniformly (seeded), reading one .npy shard
// at a time, and returns each plus N(0, 0.05²) noise, L2-normalized.
func noisyRows(root, name string, n int, seed uint64) ([][]float32, error) {
	shards, dim, err := data.RAG2Shards(root, name)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, s := range shards {
		total += s.Rows
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
	rows := make([]int, n)
	for i := range rows {
		rows[i] = rng.IntN(total)
	}
	slices.Sort(rows)
	var out [][]float32
	base := 0
	for _, s := range shards {
		if len(rows) > 0 && rows[0] < base+s.Rows {
			x, _, _, err := npy.Read(s.Embeds)
			if err != nil {
				return nil, err
			}
			for len(rows) > 0 && rows[0] < base+s.Rows {
				r := rows[0] - base
				q := make([]float32, dim)
				var norm float64
				for j := range q {
					q[j] = x[r*dim+j] + float32(rng.NormFloat64()*0.05)
					norm += float64(q[j]) * float64(q[j])
				}
				for j := range q {
					q[j] /= float32(math.Sqrt(norm))
				}
				out = append(out, q)
				rows = rows[1:]
			}
		}
		base += s.Rows
	}
	return out, nil
}

// balanced runs RAG²'s balanced hybrid retrieval over several corpora, each
// a workdir of scripts/scale-bench.sh (bm25/: sharded BM25, ivf/: the
// IVF-PQ index): per query, the query is encoded once, every corpus
// answers with the AP hybrid (search.DefaultConfig: dense + BM25 top 100 by
// weighted RRF), and fusion.Balanced keeps ⌊k/n⌋ hits per corpus. Queries
// are the questions of an AP QA CSV. It reports the latency of the whole
// per query (p50/p99) and how many hits each corpus gave.
func balanced(args []string) error {
	fs := flag.NewFlagSet("balanced", flag.ExitOnError)
	dirs := fs.String("corpora", "", "comma-separated scale-bench workdirs (required)")
	encDir := fs.String("encoder", "", "the query encoder (the corpus encoder) (required)")
	qa := fs.String("qa", "", "AP QA CSV whose questions are the queries (required)")
	nprobe := fs.Int("nprobe", 32, "IVF lists visited per query")
	k := fs.Int("k", 10, "hits after balancing")
	maxLen := fs.Int("max-length", 128, "query tokens")
	fs.Parse(args)
	if *dirs == "" || *encDir == "" || *qa == "" || *k < 1 {
		return fmt.Errorf("balanced: -corpora, -encoder and -qa are required, -k ≥ 1")
	}
	enc, err := encode.LoadBERT(*encDir, os.Getenv("GOMLX_BACKEND"), "")
	if err != nil {
		return err
	}
	enc.MaxLength = *maxLen
	qs, _, err := data.OpenQueries(*qa, "")
	if err != nil {
		return err
	}
	t0 := time.Now()
	pipes := map[string]*search.Pipeline{}
	rows := map[string]int{}
	for _, d := range strings.Split(*dirs, ",") {
		name := filepath.Base(d)
		bm, err := bm25.Open(filepath.Join(d, "bm25"))
		if err != nil {
			return err
		}
		defer bm.Close()
		ix, err := dense.Load(filepath.Join(d, "ivf"))
		if err != nil {
			return err
		}
		defer ix.Close()
		if err := ix.SetSearch(dense.SearchParams{Nprobe: *nprobe}); err != nil {
			return err
		}
		p := &search.Pipeline{Config: search.DefaultConfig(), BM25: bm, Encoder: enc, Index: ix}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("corpus %s: %w", d, err)
		}
		pipes[name], rows[name] = p, bm.Count()
	}
	openS := time.Since(t0).Seconds()
	var lat []float64
	perCorpus := map[string]int{}
	for _, q := range qs {
		t := time.Now()
		sq := []search.Query{{Text: q.Text}}
		var vecs [][]float32
		per := map[string][]retrieval.Hit{}
		for name, p := range pipes {
			if vecs == nil {
				if vecs, err = p.Encode(sq); err != nil {
					return err
				}
			}
			hits, err := p.SearchVectors(sq, vecs, *k)
			if err != nil {
				return fmt.Errorf("corpus %s: %w", name, err)
			}
			per[name] = hits[0]
		}
		fused := fusion.Balanced(per, *k)
		lat = append(lat, ms(time.Since(t)))
		for _, h := range fused {
			for name, hs := range per {
				if slices.ContainsFunc(hs, func(x retrieval.Hit) bool { return x.ID == h.ID }) {
					perCorpus[name]++
				}
			}
		}
	}
	return report(map[string]any{"corpora": rows, "queries": len(qs), "k": *k, "nprobe": *nprobe, "open_s": openS,
		"p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99), "hits_per_corpus": perCorpus})
}
