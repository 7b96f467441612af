package decoder

import "testing"

func TestQwen25HalfBShape(t *testing.T) {
	c := Qwen25HalfBConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// 494,032,768 parameters: HF's count for Qwen2.5-0.5B (tied embeddings).
	if got := c.Parameters(); got != 494032768 {
		t.Fatalf("parameters %d, want 494032768", got)
	}
}

func TestBenchSmall(t *testing.T) {
	c := Qwen25HalfBConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 300, 32, 64, 2, 4, 2, 8
	c.BOSTokenID, c.EOSTokenIDs = 1, []int{2}
	r, err := Bench("", c, 3, 5, 4, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.PerplexityMsMedian <= 0 || r.TokensPerSec <= 0 || r.MsPerStep <= 0 || r.Parameters != c.Parameters() {
		t.Fatalf("bench result %+v", r)
	}
}
