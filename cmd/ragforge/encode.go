package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/internal/progress"
	"github.com/ragforge/ragforge/retrieval/encode"
)

type encodeOptions struct {
	Corpus    corpusFlags
	Encoder   string
	Enc       encoderOptions
	Out       string
	Name      string
	ShardSize int
	DType     dtypeFlag `json:"dtype"` // the job's: workers holding other dtypes would write other vectors
	Work      workFlags `json:"-"`     // per process: a --job's workers may differ in it
}

// encodeResult is what --json prints.
type encodeResult = encode.RAG2Result

func newEncodeCmd(g *globals) *cobra.Command {
	var o encodeOptions
	cmd := &cobra.Command{
		Use:   "encode",
		Short: "Chunk a corpus and write its dense vectors as .npy files in RAG²'s retriever layout",
		Long: `Chunks --corpus as eval retrieval does, encodes every chunk with the --encoder
BERT bi-encoder and writes, under --out, RAG²'s retriever layout
(dmis-lab/RAG2 retriever/README.md):
  embeddings/<name>/<name>_Embeds_<k>.npy     float32 [N_k, D] (numpy.load reads them)
  articles/<name>/<name>_Articles_<k>.json    JSON list of the N_k chunks, row i of the .npy is record i:
                                              {"id", "doc_id", "index", "start", "end", "text", "meta"}
  embeddings/<name>/ragforge_encode.json      encoder, pooling, normalization, max length, prefixes,
                                              and where each came from ("model" or "flag")
The encoder settings default to the encoder directory's own
(sentence-transformers files: 1_Pooling, 2_Normalize, max_seq_length, the
"query" and "document"/"passage"/"corpus" prompts); a flag overrides one and
says so on stderr.
eval retrieval and pipeline build read it back with
--corpus rag2:DIR (or rag2:DIR#<name> when DIR holds several corpora) and
encode only the queries, with the recorded settings.`,
		Example: `  ragforge encode --corpus ../shared/data/ap_protocols --encoder work/bert-tiny --out work/ap-encoded
  ragforge eval retrieval --corpus rag2:work/ap-encoded --retriever dense --encoder work/bert-tiny \
    --qa ../shared/data/ap_protocols_qa/dev.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runEncode(cmd.Context(), g, o)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.Out, res)
			}
			if res.Pending {
				fmt.Fprintf(g.Out, "run %s: this process's batches are encoded; another process writes corpus %q under %s\n", res.RunID, res.Name, res.Dir)
				return nil
			}
			fmt.Fprintf(g.Out, "run %s: %d chunks encoded as float32 [%d, %d] into %s (%d .npy files, corpus %q; read it with --corpus %s%s)\n",
				res.RunID, res.Rows, res.Rows, res.Dim, filepath.Join(res.Dir, "embeddings", res.Name), len(res.Embeddings), res.Name, data.EncodedScheme, res.Dir)
			return nil
		},
	}
	o.Corpus.add(cmd)
	o.Enc.add(cmd)
	f := cmd.Flags()
	f.StringVar(&o.Encoder, "encoder", "", "BERT bi-encoder directory in HF layout (required)")
	f.StringVar(&o.Out, "out", "", "root directory of the RAG² layout (embeddings/, articles/); other corpora in it are kept (required)")
	f.StringVar(&o.Name, "name", "", "corpus name: the embeddings/<name> and articles/<name> directories (default: the corpus file or directory name)")
	f.IntVar(&o.ShardSize, "shard-size", 0, "rows per .npy/.json file pair (0: one file pair)")
	addDTypeFlag(cmd, &o.DType)
	o.Work.addFor(cmd, "queue-batch", "chunks", encode.DefaultSplitRows, encode.CorpusBlock) // the encoder block: vectors equal one process's
	return cmd
}

// runEncode records an encode run: the corpus chunked and encoded into
// RAG²'s layout (encode.WriteRAG2), in this process or split over workers
// (--workers, --job, --shard), its files as artifacts.
func runEncode(ctx context.Context, g *globals, o encodeOptions) (res *encodeResult, err error) {
	if o.Encoder == "" || o.Out == "" {
		return nil, fmt.Errorf("--encoder and --out are required")
	}
	if o.ShardSize < 0 {
		return nil, fmt.Errorf("--shard-size %d: want >= 0", o.ShardSize)
	}
	if err := o.Enc.validate(); err != nil {
		return nil, err
	}
	if err := o.Enc.resolve(o.Encoder); err != nil {
		return nil, err
	}
	st, run, finish, err := o.Work.start(g, "encode", o)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	defer finish(&err)
	if !o.Work.split() && !data.IsEncodedSpec(o.Corpus.Path) {
		return o.stream(g, run)
	}
	_, chunks, err := o.Corpus.load(g)
	if err != nil {
		return nil, err
	}
	enc, err := encode.LoadBERTAs(o.Encoder, g.Backend, o.Enc.Pooling, o.DType.get())
	if err != nil {
		return nil, err
	}
	o.Enc.apply(enc, g.Err)
	c := o.rag2Corpus()
	written, err := o.Work.encode(ctx, g, st, run, enc, chunks, o.Out, c.Name, func(vecs []float32, dim int) (err error) {
		res, err = encode.WriteRAG2(enc, o.Encoder, chunks, vecs, dim, c)
		return err
	})
	if err != nil || !written {
		return &encodeResult{RunID: run.ID, Dir: o.Out, Name: c.Name, Dim: enc.Dim(), Pending: true}, err
	}
	res.RunID = run.ID
	return res, recordEncoded(run, res)
}

// stream encodes the corpus as it is read (encode.StreamRAG2 over
// evalrun.Corpus.Walk): memory holds one encoder block and one
// --shard-size shard, never the corpus.
func (o *encodeOptions) stream(g *globals, run *tracker.Run) (*encodeResult, error) {
	enc, err := encode.LoadBERTAs(o.Encoder, g.Backend, o.Enc.Pooling, o.DType.get())
	if err != nil {
		return nil, err
	}
	o.Enc.apply(enc, g.Err)
	bar := progress.New(g.Err, -1, "encode")
	res, err := encode.StreamRAG2(enc, o.Encoder, o.Corpus.Walk, o.rag2Corpus(), func(done int) { bar.Set(done, -1) })
	bar.Finish()
	if err != nil {
		return nil, err
	}
	res.RunID = run.ID
	return res, recordEncoded(run, res)
}

// rag2Corpus is where the flags put the encoded corpus: --name, else the
// pre-encoded corpus's name, else the corpus path's.
func (o *encodeOptions) rag2Corpus() encode.RAG2Corpus {
	name := o.Name
	if name == "" {
		name = data.CorpusName(o.Corpus.Path)
		if pre := o.Corpus.encoded; pre != nil {
			name = pre.Name
		}
	}
	return encode.RAG2Corpus{Out: o.Out, Name: name, ShardSize: o.ShardSize, Source: o.Corpus.Path,
		ChunkSize: o.Corpus.ChunkSize, Overlap: o.Corpus.Overlap, Sources: o.Enc.Sources}
}

// recordEncoded records the encoded files as artifacts and rows/dim as metrics.
func recordEncoded(run *tracker.Run, res *encodeResult) error {
	for _, f := range res.Embeddings {
		if err := run.Artifact("embeddings/"+filepath.Base(f), f); err != nil {
			return err
		}
	}
	for _, f := range res.Articles {
		if err := run.Artifact("articles/"+filepath.Base(f), f); err != nil {
			return err
		}
	}
	return run.LogMetrics(map[string]float64{"rows": float64(res.Rows), "dim": float64(res.Dim)}, 0)
}
