package retriever

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/models/backend"
)

// The 2×3 example: q1=(1,0), q2=(0,1), positives p1=q1, p2=q2, one hard
// negative n1=(0.6,0.8) of query 1 (query 2's slot is padding), τ = 0.5.
// Logits ⟨q,c⟩/τ: query 1 → (p1 2, p2 0, n1 1.2); query 2 → (0, 2, 1.6).
var (
	exQ    = [][]float32{{1, 0}, {0, 1}}
	exP    = [][]float32{{1, 0}, {0, 1}}
	exNegs = [][][]float32{{{0.6, 0.8}}, nil}
)

func TestInfoNCEHandComputed(t *testing.T) {
	e := math.Exp
	for _, c := range []struct {
		name   string
		posIDs []string
		want   float64
	}{
		// L = ½[−(2 − ln(e²+e⁰+e^1.2)) − (2 − ln(e⁰+e²+e^1.6))]
		{"distinct positives", []string{"a", "b"}, 0.5 * ((math.Log(e(2)+e(0)+e(1.2)) - 2) + (math.Log(e(0)+e(2)+e(1.6)) - 2))},
		// Shared positive "a": each query's column of the other positive is masked.
		// L = ½[−(2 − ln(e²+e^1.2)) − (2 − ln(e²+e^1.6))]
		{"duplicate positive masked", []string{"a", "a"}, 0.5 * ((math.Log(e(2)+e(1.2)) - 2) + (math.Log(e(2)+e(1.6)) - 2))},
	} {
		got := InfoNCE(exQ, exP, exNegs, 0.5, c.posIDs)
		if math.Abs(got-c.want) > 1e-7 { // 0.6, 0.8 are float32 inputs
			t.Errorf("%s: InfoNCE = %.12f, want %.12f", c.name, got, c.want)
		}
	}
	// The literal values, as a check on the formulas above.
	if got := InfoNCE(exQ, exP, exNegs, 0.5, []string{"a", "b"}); math.Abs(got-0.525648071385) > 1e-7 {
		t.Errorf("InfoNCE = %.12f, want 0.525648071385", got)
	}
	if got := InfoNCE(exQ, exP, exNegs, 0.5, []string{"a", "a"}); math.Abs(got-0.442057959174) > 1e-7 {
		t.Errorf("masked InfoNCE = %.12f, want 0.442057959174", got)
	}
}

func TestCandidateMask(t *testing.T) {
	got := CandidateMask([]string{"a", "b", "a"}, [][]string{{"x", ""}, {"a", "y"}, {"b", "z"}})
	// Columns: pos a, pos b, pos a, then negs x, "", a, y, b, z.
	want := [][]bool{
		{true, true, false, true, false, false, true, true, true},
		{true, true, true, true, false, true, true, false, true},
		{false, true, true, true, false, false, true, true, true},
	}
	for i := range want {
		for c := range want[i] {
			if got[i][c] != want[i][c] {
				t.Errorf("valid[%d][%d] = %v, want %v", i, c, got[i][c], want[i][c])
			}
		}
	}
}

// InfoNCEGraph equals the reference on the 2×3 example and on random
// batches with duplicate positives and padded negative slots.
func TestInfoNCEGraphMatchesReference(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	const temp = 0.05
	exec := graph.MustNewExec(be, func(q, c, v *graph.Node) *graph.Node { return InfoNCEGraph(q, c, v, temp) })
	check := func(name string, q, p [][]float32, negs [][][]float32, posIDs []string) {
		t.Helper()
		b, d := len(q), len(q[0])
		n := 0
		for _, r := range negs {
			n = max(n, len(r))
		}
		var flatQ, flatC []float32
		for _, v := range q {
			flatQ = append(flatQ, v...)
		}
		for _, v := range p {
			flatC = append(flatC, v...)
		}
		negIDs := make([][]string, b)
		for j := 0; j < b; j++ {
			negIDs[j] = make([]string, n)
			for k := 0; k < n; k++ {
				if j < len(negs) && k < len(negs[j]) {
					flatC = append(flatC, negs[j][k]...)
					negIDs[j][k] = string(rune('A'+j)) + string(rune('0'+k))
				} else {
					flatC = append(flatC, make([]float32, d)...)
				}
			}
		}
		var fv []float32
		for _, row := range CandidateMask(posIDs, negIDs) {
			for _, ok := range row {
				fv = append(fv, b2f(ok))
			}
		}
		out := exec.MustExec(tensors.FromFlatDataAndDimensions(flatQ, b, d),
			tensors.FromFlatDataAndDimensions(flatC, b+b*n, d), tensors.FromFlatDataAndDimensions(fv, b, b+b*n))
		got := float64(tensors.ToScalar[float32](out[0]))
		want := InfoNCE(q, p, negs, temp, posIDs)
		if math.Abs(got-want) > 1e-4*math.Max(1, math.Abs(want)) {
			t.Errorf("%s: graph %.6f, reference %.6f", name, got, want)
		}
	}
	check("2x3 distinct", exQ, exP, exNegs, []string{"a", "b"})
	check("2x3 duplicate", exQ, exP, exNegs, []string{"a", "a"})
	rng := rand.New(rand.NewPCG(1, 2))
	unit := func(d int) []float32 {
		v := make([]float32, d)
		var s float64
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			s += float64(v[i]) * float64(v[i])
		}
		for i := range v {
			v[i] /= float32(math.Sqrt(s))
		}
		return v
	}
	for trial := 0; trial < 5; trial++ {
		b, d, n := 2+rng.IntN(4), 8, rng.IntN(3)
		q, p := make([][]float32, b), make([][]float32, b)
		negs := make([][][]float32, b)
		ids := make([]string, b)
		for i := range q {
			q[i], p[i] = unit(d), unit(d)
			ids[i] = string(rune('a' + rng.IntN(2))) // duplicates likely
			for k := 0; k < rng.IntN(n+1); k++ {
				negs[i] = append(negs[i], unit(d))
			}
		}
		check("random", q, p, negs, ids)
	}
}

// InfoNCE masks duplicates of a positive by normalized text: another
// query's positive, or a hard negative, that differs from query i's
// positive only in Unicode form, case or white space is masked for i.
func TestMaskKeysNormalizedDuplicates(t *testing.T) {
	ts := []Triplet{
		{Query: "q0", Pos: "Fixação em formol.", Negs: []string{"  FIXAC\u0327A\u0303O em\nformol. ", "Outro texto"}},
		{Query: "q1", Pos: "fixação EM formol.", Negs: []string{"Mais um"}},
		{Query: "q2", Pos: "Coloração HE", Negs: nil},
	}
	valid := CandidateMask(maskKeys(ts, []int{0, 1, 2}, 2))
	// Columns: positives 0..2, then negatives of query j at 3+2j, 4+2j;
	// columns 6..8 are padding. Queries 0 and 1 share a positive (col 0, 1)
	// and col 3 is a copy of it.
	want := [][]bool{
		{true, false, true, false, true, true, false, false, false},
		{false, true, true, false, true, true, false, false, false},
		{true, true, true, true, true, true, false, false, false},
	}
	if !reflect.DeepEqual(valid, want) {
		t.Errorf("mask\n got %v\nwant %v", valid, want)
	}
}
