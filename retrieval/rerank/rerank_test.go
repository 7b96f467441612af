package rerank

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/retrieval"
)

// Hand values, query (1,0,0,0): same (5,0,0,0) cos 1; diag (1,1,0,0) cos
// 1/√2; edge (2,4,2,1) has norm 5, cos 2/5 = 0.40 exactly (kept: >=);
// below (1,2,2,0) norm 3, cos 1/3; orth (0,0,3,0) cos 0; opposite (-1,0,0,0)
// cos -1. The golden order is by cosine, not by the input (BM25) scores.
func TestThresholdGolden(t *testing.T) {
	vecs := map[string][]float32{
		"below": {1, 2, 2, 0}, "edge": {2, 4, 2, 1}, "orth": {0, 0, 3, 0},
		"diag": {1, 1, 0, 0}, "opposite": {-1, 0, 0, 0}, "same": {5, 0, 0, 0},
	}
	hits := []retrieval.Hit{{ID: "below", Score: 9}, {ID: "edge", Score: 8}, {ID: "orth", Score: 7}, {ID: "diag", Score: 6}, {ID: "opposite", Score: 5}, {ID: "same", Score: 4}}
	vecOf := func(id string) ([]float32, bool) { v, ok := vecs[id]; return v, ok }
	got, err := Threshold([]float32{1, 0, 0, 0}, hits, vecOf, DefaultThreshold)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "threshold.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var want []retrieval.Hit
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-12 {
			t.Errorf("hit %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	// A threshold above every similarity returns nothing, not an error.
	if none, err := Threshold([]float32{1, 0, 0, 0}, hits, vecOf, 1.01); err != nil || len(none) != 0 {
		t.Errorf("threshold 1.01: %v, %v", none, err)
	}
}

func TestThresholdErrors(t *testing.T) {
	hits := []retrieval.Hit{{ID: "a", Score: 1}, {ID: "b", Score: 1}}
	vecOf := func(id string) ([]float32, bool) {
		if id == "a" {
			return []float32{1, 0}, true
		}
		return nil, false
	}
	if _, err := Threshold([]float32{1, 0}, hits, vecOf, 0.4); err == nil || !strings.Contains(err.Error(), `hit 1 "b": no vector`) {
		t.Errorf("missing vector: %v", err)
	}
	if _, err := Threshold([]float32{1, 0, 0}, hits[:1], vecOf, 0.4); err == nil || !strings.Contains(err.Error(), "dims 3 and 2") {
		t.Errorf("dim mismatch: %v", err)
	}
	if _, err := Threshold([]float32{1, 0}, hits[:1], vecOf, math.NaN()); err == nil {
		t.Error("NaN threshold accepted")
	}
}

// charTok is a toy tokenizer: [CLS]=1, one id per rune (rune value + 10),
// [SEP]=2.
type charTok struct{}

func (charTok) Encode(text string, addSpecial bool) []int {
	var ids []int
	if addSpecial {
		ids = append(ids, 1)
	}
	for _, r := range text {
		ids = append(ids, int(r)+10)
	}
	if addSpecial {
		ids = append(ids, 2)
	}
	return ids
}

func TestPairLongestFirst(t *testing.T) {
	cases := []struct {
		a, b   string
		maxLen int
		want   string // a-part | b-part after truncation
	}{
		{"ab", "cde", 10, "ab|cde"},
		{"abcdef", "xy", 7, "ab|xy"}, // budget 4: cut a (longer) to 2
		{"abc", "xyz", 7, "ab|xy"},   // budget 4: ties cut b first: abc|xy, then a: ab|xy
		{"abc", "wxyz", 6, "a|wx"},   // budget 3: the first keeps floor(3/2) = 1
		{"abc", "xyz", 2, "|"},       // below the specials: both emptied
		{"", "xyz", 5, "|xy"},
	}
	for _, c := range cases {
		ids, types := Pair(charTok{}, c.a, c.b, c.maxLen)
		parts := strings.Split(c.want, "|")
		want := charTok{}.Encode(parts[0], true)
		want = append(want, charTok{}.Encode(parts[1], false)...)
		want = append(want, 2)
		if !reflect.DeepEqual(ids, want) {
			t.Errorf("Pair(%q,%q,%d) ids %v, want %v", c.a, c.b, c.maxLen, ids, want)
		}
		for i, ty := range types {
			if wantTy := map[bool]int{true: 0, false: 1}[i < len(parts[0])+2]; ty != wantTy {
				t.Errorf("Pair(%q,%q): type[%d] = %d", c.a, c.b, i, ty)
			}
		}
	}
}

// overlapScorer scores a pair by how many b-part ids also occur in the
// a-part, minus a tenth of the b length, and records the batch sizes.
type overlapScorer struct{ batches []int }

func (s *overlapScorer) Score(ids, mask, types [][]int) ([]float32, error) {
	s.batches = append(s.batches, len(ids))
	out := make([]float32, len(ids))
	for r, row := range ids {
		inA := map[int]bool{}
		var nb int
		for i, id := range row {
			if mask[r][i] != 1 || id <= 2 {
				continue
			}
			if types[r][i] == 0 {
				inA[id] = true
			} else {
				nb++
				if inA[id] {
					out[r]++
				}
			}
		}
		out[r] -= float32(nb) / 10
	}
	return out, nil
}

func TestCrossEncoderRerank(t *testing.T) {
	texts := map[string]string{"d0": "zzz", "d1": "abc", "d2": "ab", "d3": "abcd", "d4": "a", "d5": "abc"}
	textOf := func(id string) (string, bool) { s, ok := texts[id]; return s, ok }
	hits := []retrieval.Hit{{ID: "d0", Score: 6}, {ID: "d1", Score: 5}, {ID: "d2", Score: 4}, {ID: "d3", Score: 3}, {ID: "d4", Score: 2}, {ID: "d5", Score: 1}}
	sc := &overlapScorer{}
	ce := &CrossEncoder{Model: sc, Tokenizer: charTok{}, TopN: 5, K: 3, BatchSize: 2}
	got, err := ce.Rerank("abc", hits, textOf)
	if err != nil {
		t.Fatal(err)
	}
	// Scores: d0 -0.3, d1 3-0.3=2.7, d2 1.8, d3 3-0.4=2.6, d4 0.9; d5 is
	// beyond TopN. Top 3: d1, d3, d2.
	want := []retrieval.Hit{{ID: "d1", Score: 2.7}, {ID: "d3", Score: 2.6}, {ID: "d2", Score: 1.8}}
	if len(got) != 3 {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-6 {
			t.Errorf("hit %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if !reflect.DeepEqual(sc.batches, []int{2, 2, 1}) {
		t.Errorf("batches %v, want [2 2 1]", sc.batches)
	}
	if _, err := ce.Rerank("abc", []retrieval.Hit{{ID: "missing", Score: 1}}, textOf); err == nil || !strings.Contains(err.Error(), `"missing": no text`) {
		t.Errorf("missing text: %v", err)
	}
}
