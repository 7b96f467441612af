package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/labelstore"
	"github.com/ragforge/ragforge/models/testutil/tinyqwen"
)

// label perplexity --scorer hf:DIR scores with a local decoder chosen by
// config.json model_type (qwen2-tiny with its 512-id BPE tokenizer): every
// pair gets two perplexities and a label, recorded under the scorer name
// "hf:DIR". With the default 512-character chunks the prompts pass the
// model's 128 positions, and the run stops with vLLM's message instead of
// truncating.
func TestLabelPerplexityDecoder(t *testing.T) {
	qdir := tinyqwen.Dir(t)
	dir, corpus, qa := sampleFiles(t)
	db := filepath.Join(dir, "runs.db")
	var res labelResult
	out := run(t, "label", "perplexity", "--db", db, "--corpus", corpus, "--qa", qa, "--scorer", "hf:"+qdir,
		"--chunk-size", "60", "--chunk-overlap", "0", "--top-n", "2", "--limit", "2", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Labels != 4 {
		t.Fatalf("report %+v, want 4 labels", res)
	}
	st, err := labelstore.OpenStore(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.List(labelstore.Filter{RunID: res.RunID})
	if err != nil || len(recs) != 4 {
		t.Fatalf("%d stored labels, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.Scorer != "hf:"+qdir || r.PPLWith <= 1 || r.PPLWithout <= 1 || r.Method != labelstore.MethodPerplexity {
			t.Errorf("label %+v", r.Label)
		}
	}
	code, stderr := runErr("label", "perplexity", "--db", db, "--corpus", corpus, "--qa", qa, "--scorer", "hf:"+qdir, "--top-n", "1", "--limit", "1")
	if code == 0 || !strings.Contains(stderr, "maximum context length is 128 tokens") {
		t.Errorf("long prompts: exit %d, stderr %s", code, stderr)
	}
}
