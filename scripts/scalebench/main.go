// Command scalebench makes the synthetic corpora of docs/scaling.md and
// runs each scale stage on them with the streaming library functions, one
// stage per process so that GNU time reports each stage's wall time and
// peak RSS:
//
//	scalebench synth -n N -o corpus.jsonl [-seed 1] [-ap DIR]
//	scalebench chunk -corpus corpus.jsonl
//	scalebench bm25 -corpus corpus.jsonl -out DIR [-shard-size 100000]
//	scalebench encode -corpus corpus.jsonl -encoder DIR -out DIR [-shard-rows 50000] [-max-length 128] [-batch-size 64]
//	scalebench faiss -encoded DIR -factory IVF1024,PQ32np -out DIR [-train-rows 100000]
//	scalebench search -encoded DIR -index DIR [-nprobe 8,16,32,64] [-queries 1000] [-seed 1]
//	scalebench balanced -corpora W1,W2,… -encoder DIR -qa dev.csv [-nprobe 32] [-k 10]
//	scalebench inflate -from DIR -to DIR [-factor 10] [-sigma 0.05]
//
// synth writes N documents to a JSON Lines file ({"_id", "title", "text"}):
// document i is made of sentences drawn, by a PRNG seeded with -seed, from
// the AP protocols (../shared/data/ap_protocols), about 450 characters each,
// so with ragforge's default 512-character chunks every document is one
// chunk. The same N, seed and -id-prefix give the same bytes.
//
// chunk streams the corpus through chunk.Walk (AP paper defaults, 512/128)
// and counts the chunks; bm25 indexes them as they come into bleve shards
// (bm25.BuildStream); encode embeds them as they come into RAG² .npy/.json
// shards (encode.EncodeToRAG2, pure-Go backend unless $GOMLX_BACKEND says
// otherwise); faiss trains -factory on a sample of the encoded vectors and
// adds them shard by shard (dense.BuildRAG2), then saves it; search builds
// a Flat index the same way and compares: latency p50/p99 of single-query
// search (k=10) and recall@10 against Flat, for each nprobe; balanced runs
// RAG²'s balanced hybrid retrieval over several scale-bench workdirs as
// corpora; inflate makes a larger vector corpus from an encoded one (each
// row repeated with noise) where encoding would take too long. Each prints
// one JSON object.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sort"
	"strings"

	"github.com/ragforge/ragforge/data"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: scalebench synth|chunk|bm25|encode|faiss|search|balanced [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"synth": synth, "chunk": chunkStage, "bm25": bm25Stage, "encode": encodeStage,
		"faiss": faissStage, "search": searchStage, "balanced": balanced, "inflate": inflate,
	}
	cmd, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "scalebench: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	if p := os.Getenv("SCALEBENCH_CPUPROFILE"); p != "" { // where a stage spends its time
		f, err := os.Create(p)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scalebench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := cmd(os.Args[2:]); err != nil {
		pprof.StopCPUProfile()
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
	prefix := fs.String("id-prefix", "syn", "document id prefix (ids are <prefix><7 digits>)")
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
		if err := enc.Encode(map[string]string{"_id": fmt.Sprintf("%s%07d", *prefix, i), "title": titles[rng.IntN(len(titles))], "text": text}); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func pct(v []float64, p float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}
