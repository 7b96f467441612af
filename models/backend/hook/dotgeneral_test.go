package hook

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

func newBackend(t testing.TB) *simplego.Backend {
	t.Helper()
	b, err := simplego.New("ops_sequential")
	if err != nil {
		t.Fatal(err)
	}
	return b.(*simplego.Backend)
}

func randFlat(rng *rand.Rand, dims []int) []float64 {
	n := 1
	for _, d := range dims {
		n *= d
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

func asDType(v []float64, dt dtypes.DType, dims []int) *tensors.Tensor {
	if dt == dtypes.Float64 {
		return tensors.FromFlatDataAndDimensions(slices.Clone(v), dims...)
	}
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	return tensors.FromFlatDataAndDimensions(f, dims...)
}

// Every DotGeneral layout the models produce (and odd ones: permuted
// contracting and batch axes, no free axis, vector·vector) gives the same
// result on OpenBLAS as simplego's own matmul and as a naive triple loop.
func TestDotGeneralMatchesSimplego(t *testing.T) {
	if !Enabled() {
		t.Fatalf("OpenBLAS DotGeneral not active: %s", Status())
	}
	be := newBackend(t)
	cases := []struct {
		name           string
		a, b           []int
		lc, lb, rc, rb []int
	}{
		{"x·Wᵀ", []int{5, 3}, []int{4, 3}, []int{1}, nil, []int{1}, nil},
		{"x·W", []int{5, 3}, []int{3, 4}, []int{1}, nil, []int{0}, nil},
		{"xᵀ·y", []int{3, 5}, []int{3, 4}, []int{0}, nil, []int{0}, nil},
		{"xᵀ·yᵀ", []int{3, 5}, []int{4, 3}, []int{0}, nil, []int{1}, nil},
		{"rank-3 linear", []int{2, 5, 3}, []int{4, 3}, []int{2}, nil, []int{1}, nil},
		{"attention q·kᵀ", []int{2, 3, 4, 5}, []int{2, 3, 6, 5}, []int{3}, []int{0, 1}, []int{3}, []int{0, 1}},
		{"attention w·v", []int{2, 3, 4, 6}, []int{2, 3, 6, 5}, []int{3}, []int{0, 1}, []int{2}, []int{0, 1}},
		{"batch axis not leading", []int{4, 2, 5}, []int{2, 5, 3}, []int{2}, []int{1}, []int{1}, []int{0}},
		{"head-batched weight", []int{2, 3, 4, 5}, []int{3, 5, 6}, []int{3}, []int{1}, []int{1}, []int{0}},
		{"permuted contracting and batch", []int{3, 2, 4, 5}, []int{5, 6, 4, 2}, []int{3, 2}, []int{1}, []int{0, 2}, []int{3}},
		{"two batch axes swapped", []int{2, 3, 4}, []int{3, 2, 4}, []int{2}, []int{0, 1}, []int{2}, []int{1, 0}},
		{"no free axis", []int{3, 4}, []int{3, 4}, []int{1}, []int{0}, []int{1}, []int{0}},
		{"vector·vector", []int{7}, []int{7}, []int{0}, nil, []int{0}, nil},
		{"outer product", []int{3}, []int{4}, nil, nil, nil, nil},
		{"large", []int{64, 96}, []int{96, 80}, []int{1}, nil, []int{0}, nil},
		// Above minParallelFlops: split across goroutines by rows (A used
		// transposed, so a row block is a column offset) or by batches.
		{"split rows, Aᵀ", []int{300, 257}, []int{300, 129}, []int{0}, nil, []int{0}, nil},
		{"split rows, A", []int{257, 300}, []int{129, 300}, []int{1}, nil, []int{1}, nil},
		{"split batches", []int{5, 130, 70}, []int{5, 70, 120}, []int{2}, []int{0}, []int{1}, []int{0}},
	}
	cases = append(cases, stridedCases...)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.Float64} {
		for _, c := range cases {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				av, bv := randFlat(rng, c.a), randFlat(rng, c.b)
				run := func(useBLAS bool) *tensors.Tensor {
					prev := SetEnabled(useBLAS)
					defer SetEnabled(prev)
					e := graph.MustNewExec(be, func(a, b *graph.Node) *graph.Node {
						return graph.DotGeneral(a, c.lc, c.lb, b, c.rc, c.rb)
					})
					defer e.Finalize()
					return e.MustExec(asDType(av, dt, c.a), asDType(bv, dt, c.b))[0]
				}
				got, ref := run(true), run(false)
				if !got.Shape().Equal(ref.Shape()) {
					t.Fatalf("shape %s, simplego %s", got.Shape(), ref.Shape())
				}
				naive := naiveDotGeneral(av, c.a, bv, c.b, c.lc, c.lb, c.rc, c.rb)
				g, r := values(got), values(ref)
				if len(g) != len(naive) {
					t.Fatalf("%d values, naive loop %d", len(g), len(naive))
				}
				tol := 1e-4
				if dt == dtypes.Float64 {
					tol = 1e-10
				}
				for i := range g {
					if math.Abs(g[i]-naive[i]) > tol*(1+math.Abs(naive[i])) || math.Abs(g[i]-r[i]) > tol*(1+math.Abs(r[i])) {
						t.Fatalf("value %d: OpenBLAS %g, simplego %g, naive %g", i, g[i], r[i], naive[i])
					}
				}
			})
		}
	}
}

// stridedCases are products whose operands are used in place with strides
// (heads kept inside [B, L, H, d]) rather than transposed first.
var stridedCases = []struct {
	name           string
	a, b           []int
	lc, lb, rc, rb []int
}{
	{"bqhd,bkhd->bhqk", []int{2, 5, 3, 4}, []int{2, 6, 3, 4}, []int{3}, []int{0, 2}, []int{3}, []int{0, 2}},
	{"bhqk,bkhd->bhqd", []int{2, 3, 5, 6}, []int{2, 6, 3, 4}, []int{3}, []int{0, 1}, []int{1}, []int{0, 2}},
	{"∂q: bhqk,bkhd->bhqd", []int{2, 3, 5, 6}, []int{2, 6, 3, 4}, []int{3}, []int{0, 1}, []int{1}, []int{0, 2}},
	{"∂k: bhqk,bqhd->bhkd", []int{2, 3, 5, 6}, []int{2, 5, 3, 4}, []int{2}, []int{0, 1}, []int{1}, []int{0, 2}},
	{"∂v: bqhd,bhqk->bhdk", []int{2, 5, 3, 4}, []int{2, 3, 5, 6}, []int{1}, []int{0, 2}, []int{2}, []int{0, 1}},
	{"size-1 axes", []int{1, 5, 1, 4}, []int{1, 6, 1, 4}, []int{3}, []int{0, 2}, []int{3}, []int{0, 2}},
	{"split batches, strided", []int{4, 130, 2, 70}, []int{4, 120, 2, 70}, []int{3}, []int{0, 2}, []int{3}, []int{0, 2}},
	{"split rows, strided", []int{1, 300, 2, 64}, []int{1, 200, 2, 64}, []int{3}, []int{0, 2}, []int{3}, []int{0, 2}},
}

// The in-place strided products give exactly the results of transposing
// the operands first (same gemm, only the packing reads differ).
func TestStridedMatchesTransposed(t *testing.T) {
	be := newBackend(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range stridedCases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, _, _, ok := stridedPlan(c.a, c.lb, c.lc, c.b, c.rb, c.rc); !ok {
				t.Fatalf("not used in place")
			}
			av, bv := randFlat(rng, c.a), randFlat(rng, c.b)
			run := func(strided bool) []float64 {
				prev := stridedOn
				stridedOn = strided
				defer func() { stridedOn = prev }()
				e := graph.MustNewExec(be, func(a, b *graph.Node) *graph.Node {
					return graph.DotGeneral(a, c.lc, c.lb, b, c.rc, c.rb)
				})
				defer e.Finalize()
				return values(e.MustExec(asDType(av, dtypes.Float32, c.a), asDType(bv, dtypes.Float32, c.b))[0])
			}
			got, want := run(true), run(false)
			if !slices.Equal(got, want) {
				t.Fatalf("strided and transposed products differ")
			}
		})
	}
}

// stridedPlan reports whether both operands of a product are used in place.
func stridedPlan(ad, lb, lc, bd, rb, rc []int) (operand, operand, int, int, bool) {
	lf, rf := freeAxes(len(ad), lc, lb), freeAxes(len(bd), rc, rb)
	size := func(d, axes []int) int {
		n := 1
		for _, a := range axes {
			n *= d[a]
		}
		return n
	}
	m, n, k := size(ad, lf), size(bd, rf), size(ad, lc)
	oa, okA := stridedOperand(ad, lb, lf, lc, m, k)
	ob, okB := stridedOperand(bd, rb, rf, rc, n, k)
	return oa, ob, m, n, okA && okB
}

func values(t *tensors.Tensor) []float64 {
	var out []float64
	switch t.DType() {
	case dtypes.Float32:
		tensors.ConstFlatData(t, func(f []float32) {
			for _, x := range f {
				out = append(out, float64(x))
			}
		})
	case dtypes.Float64:
		tensors.ConstFlatData(t, func(f []float64) { out = slices.Clone(f) })
	}
	return out
}

// naiveDotGeneral is the XLA DotGeneral definition as loops: output axes are
// the batch axes (lhs order), then lhs free axes, then rhs free axes.
func naiveDotGeneral(a []float64, ad []int, b []float64, bd []int, lc, lb, rc, rb []int) []float64 {
	lf, rf := freeAxes(len(ad), lc, lb), freeAxes(len(bd), rc, rb)
	var outDims []int
	for _, x := range lb {
		outDims = append(outDims, ad[x])
	}
	for _, x := range lf {
		outDims = append(outDims, ad[x])
	}
	for _, x := range rf {
		outDims = append(outDims, bd[x])
	}
	var cDims []int
	for _, x := range lc {
		cDims = append(cDims, ad[x])
	}
	offset := func(dims, idx []int) int {
		o := 0
		for i, d := range dims {
			o = o*d + idx[i]
		}
		return o
	}
	var out []float64
	oi := make([]int, len(outDims))
	for {
		ai, bi := make([]int, len(ad)), make([]int, len(bd))
		p := 0
		for i := range lb {
			ai[lb[i]], bi[rb[i]] = oi[p], oi[p]
			p++
		}
		for _, x := range lf {
			ai[x] = oi[p]
			p++
		}
		for _, x := range rf {
			bi[x] = oi[p]
			p++
		}
		sum := 0.0
		ci := make([]int, len(cDims))
		for {
			for i := range lc {
				ai[lc[i]], bi[rc[i]] = ci[i], ci[i]
			}
			sum += a[offset(ad, ai)] * b[offset(bd, bi)]
			if !next(ci, cDims) {
				break
			}
		}
		out = append(out, sum)
		if !next(oi, outDims) {
			break
		}
	}
	return out
}

// next advances a row-major multi-index; false after the last one.
func next(idx, dims []int) bool {
	for i := len(idx) - 1; i >= 0; i-- {
		idx[i]++
		if idx[i] < dims[i] {
			return true
		}
		idx[i] = 0
	}
	return false
}

func TestSplitCoversEveryRowOnce(t *testing.T) {
	for _, c := range []struct{ batch, m, n, k int }{
		{1, 1, 1, 1}, {1, 1000, 500, 300}, {3, 1000, 500, 300}, {64, 128, 128, 64}, {1, 9, 4096, 4096},
	} {
		seen := make([]int, c.batch*c.m)
		for _, p := range split(c.batch, c.m, c.n, c.k) {
			for b := p.b0; b < p.b1; b++ {
				for r := p.r0; r < p.r1; r++ {
					seen[b*c.m+r]++
				}
			}
		}
		for i, v := range seen {
			if v != 1 {
				t.Fatalf("%+v: row %d of batch %d covered %d times", c, i%c.m, i/c.m, v)
			}
		}
	}
}

func TestTranspose(t *testing.T) {
	// [2,3] → [3,2]
	src := []int{0, 1, 2, 3, 4, 5}
	if got, want := transpose(src, []int{2, 3}, []int{1, 0}), []int{0, 3, 1, 4, 2, 5}; !slices.Equal(got, want) {
		t.Errorf("2-D transpose = %v, want %v", got, want)
	}
	// [2,2,2] with axes (2,0,1): dst[i][j][k] = src[j][k][i].
	src = []int{0, 1, 2, 3, 4, 5, 6, 7}
	if got, want := transpose(src, []int{2, 2, 2}, []int{2, 0, 1}), []int{0, 2, 4, 6, 1, 3, 5, 7}; !slices.Equal(got, want) {
		t.Errorf("3-D transpose = %v, want %v", got, want)
	}
	if got := transpose(src, []int{2, 2, 2}, []int{0, 1, 2}); !slices.Equal(got, src) {
		t.Errorf("identity permutation = %v", got)
	}
}

func TestStatus(t *testing.T) {
	if Status() != "OpenBLAS sgemm/dgemm" {
		t.Errorf("Status() = %q: the hook into GoMLX %s's simplego was not installed", Status(), "v0.26")
	}
	if !SetEnabled(false) || Enabled() {
		t.Error("SetEnabled(false) did not switch off")
	}
	if !strings.HasPrefix(Status(), "simplego matmul (OpenBLAS switched off") {
		t.Errorf("Status() after SetEnabled(false) = %q", Status())
	}
	if SetEnabled(true) || !Enabled() {
		t.Error("SetEnabled(true) did not switch back on")
	}
}

// BenchmarkMatmul compares OpenBLAS with simplego's own matmul on the shape
// of a BERT-base feed-forward layer over a batch of 8×128 tokens.
func BenchmarkMatmul(b *testing.B) {
	be := newBackend(b)
	rng := rand.New(rand.NewPCG(3, 4))
	x := asDType(randFlat(rng, []int{1024, 768}), dtypes.Float32, []int{1024, 768})
	w := asDType(randFlat(rng, []int{3072, 768}), dtypes.Float32, []int{3072, 768})
	for _, useBLAS := range []bool{true, false} {
		name := "simplego"
		if useBLAS {
			name = "openblas"
		}
		b.Run(name, func(b *testing.B) {
			prev := SetEnabled(useBLAS)
			defer SetEnabled(prev)
			e := graph.MustNewExec(be, func(x, w *graph.Node) *graph.Node {
				return graph.DotGeneral(x, []int{1}, nil, w, []int{1}, nil)
			})
			defer e.Finalize()
			for b.Loop() {
				e.MustExec(x, w)[0].FinalizeAll()
			}
			flops := 2.0 * 1024 * 768 * 3072
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// The executor patch refuses to install over a layout other than the one it
// was written against: a field of another type, a missing or extra field, a
// renamed field, a non-struct. The real v0.26 types pass.
func TestInstallRefusesWrongLayout(t *testing.T) {
	type wrongFlat struct { // Buffer with flat as a concrete slice
		shape shapes.Shape
		valid bool
		flat  []float32
	}
	type extraField struct { // Buffer with a field added
		shape  shapes.Shape
		valid  bool
		flat   any
		device int
	}
	type renamed struct { // Buffer with flat renamed
		shape shapes.Shape
		valid bool
		data  any
	}
	type shortNode struct { // Node of an older layout
		inputs []*simplego.Node
		shape  shapes.Shape
		data   any
	}
	realNode, realBuf := reflect.TypeFor[simplego.Node](), reflect.TypeFor[simplego.Buffer]()
	for _, c := range []struct {
		name      string
		node, buf reflect.Type
		want      string // substring of the error; "" = installs
	}{
		{"v0.26 types", realNode, realBuf, ""},
		{"flat of another type", realNode, reflect.TypeFor[wrongFlat](), "field 2 is flat []float32, want flat interface {}"},
		{"extra field", realNode, reflect.TypeFor[extraField](), "has 4 fields, want 3"},
		{"renamed field", realNode, reflect.TypeFor[renamed](), "field 2 is data interface {}, want flat"},
		{"older node", reflect.TypeFor[shortNode](), realBuf, "has 3 fields, want 10"},
		{"not a struct", reflect.TypeFor[*simplego.Node](), realBuf, "want a struct"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := install(c.node, c.buf)
			if c.want == "" {
				if err != nil {
					t.Fatalf("install(v0.26 types) = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("install = %v, want an error containing %q", err, c.want)
			}
		})
	}
	// The failed checks above must not have moved the offsets in use.
	if err := install(realNode, realBuf); err != nil {
		t.Fatal(err)
	}
}
