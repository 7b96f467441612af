package retrieve

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval/encode"
)

// letterEncoder embeds a text as its counts of 'a', 'b', 'c' (+1 to avoid zero vectors).
type letterEncoder struct{}

func (letterEncoder) EncodeQueries(ts []string) ([][]float32, error) {
	return letterEncoder{}.EncodeDocs(ts)
}
func (letterEncoder) EncodeDocs(ts []string) ([][]float32, error) {
	out := make([][]float32, len(ts))
	for i, s := range ts {
		out[i] = []float32{1 + float32(strings.Count(s, "a")), 1 + float32(strings.Count(s, "b")), 1 + float32(strings.Count(s, "c"))}
	}
	return out, nil
}
func (letterEncoder) Dim() int     { return 3 }
func (letterEncoder) Name() string { return "letters" }

func TestDenseFromEncodedMatchesBuildDense(t *testing.T) {
	chunks := []data.Chunk{
		{ID: "x#0", DocID: "x", Text: "aaa b"}, {ID: "x#1", DocID: "x", Index: 1, Text: "bbb c"},
		{ID: "y", DocID: "y", Text: "ccc a"}, {ID: "z", DocID: "z", Text: "abc abc"},
	}
	root := t.TempDir()
	vecs, dim, err := encode.EncodeCorpus(letterEncoder{}, chunks, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := data.WriteRAG2(root, "c", chunks, vecs, dim, 3, data.EncodeInfo{}); err != nil {
		t.Fatal(err)
	}
	pre, err := data.OpenEncoded(data.EncodedScheme + root)
	if err != nil {
		t.Fatal(err)
	}
	fly, flyIdx, err := BuildDense(letterEncoder{}, chunks, "Flat", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer flyIdx.Close()
	stored, storedIdx, err := DenseFromEncoded(letterEncoder{}, pre, "Flat")
	if err != nil {
		t.Fatal(err)
	}
	defer storedIdx.Close()
	for _, q := range []string{"aa", "bc", "c"} {
		a, err1 := fly.Search(q, 4)
		b, err2 := stored.Search(q, 4)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) || len(a) != 4 {
			t.Errorf("%q: on the fly %v (%v), stored %v (%v)", q, a, err1, b, err2)
		}
	}
	pre.Dim = 4
	if _, _, err := DenseFromEncoded(letterEncoder{}, pre, "Flat"); err == nil || !strings.Contains(err.Error(), "dim 4") {
		t.Errorf("dimension mismatch: err = %v", err)
	}
}
