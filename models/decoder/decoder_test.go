package decoder

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/safetensors"
	"github.com/ragforge/ragforge/models/testutil/xlatest"
)

// fixtureNames are the decoder fixtures of ../shared/fixtures (README §10).
var fixtureNames = []string{"qwen2-tiny", "llama-tiny", "qwen3-tiny"}

// Tolerances of README §10 (|got - want| <= atol + rtol·|want|).
const (
	logitsAtol, logitsRtol = 1e-4, 1e-4
	lpAtol, lpRtol         = 1e-4, 1e-5
	nllAtol, nllRtol       = 1e-5, 1e-5
)

func testBackend(t testing.TB) backends.Backend {
	t.Helper()
	b, err := backend.New(os.Getenv(backend.TestEnvVar)) // "" = pure Go
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type fixture struct {
	dir      string
	expected map[string]*safetensors.Tensor
}

var (
	modelCacheMu sync.Mutex
	modelCache   = map[string]*Model{}
)

// loadFixture loads a fixture's expected tensors and its model (shared by
// tests that only read it).
func loadFixture(t *testing.T, name string) (*fixture, *Model) {
	t.Helper()
	dir := testutil.SharedPath(t, filepath.Join("fixtures", name))
	f, err := safetensors.ReadFile(filepath.Join(dir, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	modelCacheMu.Lock()
	defer modelCacheMu.Unlock()
	m, ok := modelCache[name]
	if !ok {
		if m, err = Load(testBackend(t), dir); err != nil {
			t.Fatalf("Load(%s): %v", dir, err)
		}
		modelCache[name] = m
	}
	return &fixture{dir: dir, expected: f.Tensors}, m
}

func (fx *fixture) floats(t *testing.T, name string) []float32 {
	t.Helper()
	x, ok := fx.expected[name]
	if !ok {
		t.Fatalf("%s: tensor %q missing", fx.dir, name)
	}
	v, err := x.Float32()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (fx *fixture) ints(t *testing.T, name string) [][]int {
	t.Helper()
	x, ok := fx.expected[name]
	if !ok {
		t.Fatalf("%s: tensor %q missing", fx.dir, name)
	}
	v, err := x.Int64()
	if err != nil {
		t.Fatal(err)
	}
	cols := x.Shape[len(x.Shape)-1]
	var out [][]int
	for r := 0; r < len(v)/cols; r++ {
		row := make([]int, cols)
		for c := range cols {
			row[c] = int(v[r*cols+c])
		}
		out = append(out, row)
	}
	return out
}

func flat(t *testing.T, x *tensors.Tensor) []float32 {
	t.Helper()
	v, err := tensors.CopyFlatData[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// allClose checks |got-want| <= atol + rtol*|want| element-wise where keep(i)
// (nil keep = everywhere) and reports the worst element.
func allClose(t *testing.T, what string, got, want []float32, atol, rtol float64, keep func(i int) bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at, n := 0.0, -1, 0
	for i := range got {
		if keep != nil && !keep(i) {
			continue
		}
		n++
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.IsNaN(d) || d > atol+rtol*math.Abs(float64(want[i])) {
			t.Fatalf("%s: element %d = %g, want %g (|diff| %g > %g + %g·|want|)", what, i, got[i], want[i], d, atol, rtol)
		}
		if d > worst {
			worst, at = d, i
		}
	}
	if n == 0 {
		t.Fatalf("%s: nothing compared", what)
	}
	t.Logf("%s: max |diff| %.3g at %d over %d values", what, worst, at, n)
}

func TestForwardRightPadding(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, m := loadFixture(t, name)
			out, err := m.Forward(fx.ints(t, "inputs.input_ids"), fx.ints(t, "inputs.attention_mask"), fx.ints(t, "inputs.position_ids"))
			if err != nil {
				t.Fatal(err)
			}
			allClose(t, "logits", flat(t, out.Logits), fx.floats(t, "outputs.logits"), logitsAtol, logitsRtol, nil)
			allClose(t, "last_hidden_state", flat(t, out.LastHiddenState), fx.floats(t, "outputs.last_hidden_state"), logitsAtol, logitsRtol, nil)
			allClose(t, "embeddings", flat(t, out.HiddenStates[0]), fx.floats(t, "intermediates.embeddings"), logitsAtol, logitsRtol, nil)
			allClose(t, "layer.0.output", flat(t, out.HiddenStates[1]), fx.floats(t, "intermediates.layer.0.output"), logitsAtol, logitsRtol, nil)
		})
	}
}

func TestForwardLeftPadding(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, m := loadFixture(t, name)
			mask := fx.ints(t, "inputs.left.attention_mask")
			pos := fx.ints(t, "inputs.left.position_ids")
			if got := PositionIDs(mask); !equalRows(got, pos) {
				t.Fatalf("PositionIDs(mask) = %v, fixture has %v", got, pos)
			}
			logits, err := m.Logits(fx.ints(t, "inputs.left.input_ids"), mask, pos)
			if err != nil {
				t.Fatal(err)
			}
			L, V := len(mask[0]), m.Config.VocabSize
			real := func(i int) bool { return mask[i/(L*V)][(i/V)%L] == 1 }
			allClose(t, "left.logits (mask == 1)", flat(t, logits), fx.floats(t, "outputs.left.logits"), logitsAtol, logitsRtol, real)
		})
	}
}

func equalRows(a, b [][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// pairsOf rebuilds the (prompt, continuation) pairs of inputs.ppl.*.
func pairsOf(t *testing.T, fx *fixture) []Pair {
	ids, mask, cont := fx.ints(t, "inputs.ppl.input_ids"), fx.ints(t, "inputs.ppl.attention_mask"), fx.ints(t, "inputs.ppl.continuation_mask")
	var pairs []Pair
	for r := range ids {
		var p Pair
		for c := range ids[r] {
			switch {
			case cont[r][c] == 1:
				p.Continuation = append(p.Continuation, ids[r][c])
			case mask[r][c] == 1:
				p.Prompt = append(p.Prompt, ids[r][c])
			}
		}
		pairs = append(pairs, p)
	}
	return pairs
}

func TestContinuationLogProbs(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, m := loadFixture(t, name)
			pairs := pairsOf(t, fx)
			scores, err := m.ContinuationLogProbs(pairs)
			if err != nil {
				t.Fatal(err)
			}
			cont := fx.ints(t, "inputs.ppl.continuation_mask")
			L := len(cont[0])
			got := make([]float32, len(cont)*L)
			var nll, ppl []float32
			for r, s := range scores {
				if len(s.LogProbs) != len(pairs[r].Continuation) {
					t.Fatalf("pair %d: %d log-probs, want %d", r, len(s.LogProbs), len(pairs[r].Continuation))
				}
				copy(got[r*L+len(pairs[r].Prompt):], s.LogProbs)
				nll = append(nll, float32(s.MeanNLL))
				ppl = append(ppl, float32(s.Perplexity))
			}
			allClose(t, "ppl.token_logprobs", got, fx.floats(t, "outputs.ppl.token_logprobs"), lpAtol, lpRtol, nil)
			allClose(t, "ppl.mean_nll", nll, fx.floats(t, "outputs.ppl.mean_nll"), nllAtol, nllRtol, nil)
			allClose(t, "ppl.perplexity", ppl, fx.floats(t, "outputs.ppl.perplexity"), nllAtol, nllRtol, nil)
		})
	}
}

// TestXLAFixtureParity runs the fixture checks through XLA when a PJRT
// plugin is installed (skipped otherwise).
func TestXLAFixtureParity(t *testing.T) {
	xlatest.RunXLAParity(t, "^(TestForwardRightPadding|TestForwardLeftPadding|TestContinuationLogProbs|TestGenerateGreedy|TestGenerateKVCacheEqualsRecompute|TestLoRAForwardLoss)$")
}

func TestInputRefusals(t *testing.T) {
	_, m := loadFixture(t, "qwen2-tiny")
	long := make([]int, 129)
	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"ragged ids", func() error { _, err := m.Logits([][]int{{1, 2}, {3}}, nil, nil); return err }, "input_ids row 1 has length 1, row 0 has 2"},
		{"id outside vocab", func() error { _, err := m.Logits([][]int{{1, 512}}, nil, nil); return err }, "id 512 outside [0,512)"},
		{"mask rows", func() error { _, err := m.Logits([][]int{{1, 2}}, [][]int{{1, 1}, {1, 1}}, nil); return err }, "attention_mask has 2 rows"},
		{"position beyond context", func() error { _, err := m.Logits([][]int{{1, 2}}, nil, [][]int{{0, 128}}); return err }, "max_position_embeddings 128"},
		{"empty prompt", func() error {
			_, err := m.ContinuationLogProbs([]Pair{{Prompt: nil, Continuation: []int{1}}})
			return err
		}, "pair 0: empty prompt"},
		{"empty continuation", func() error {
			_, err := m.ContinuationLogProbs([]Pair{{Prompt: []int{1}}})
			return err
		}, "pair 0: empty continuation"},
		{"pair beyond context", func() error {
			_, err := m.ContinuationLogProbs([]Pair{{Prompt: long, Continuation: []int{1}}})
			return err
		}, "130 tokens exceed max_position_embeddings 128"},
		{"loss label", func() error { _, err := m.Loss([][]int{{1, 2}}, nil, [][]int{{-100, 600}}); return err }, "600 outside [0,512) and not -100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// Many pairs are scored in batches of at most ScoreBatchTokens tokens, each
// pair as it scores alone.
func TestContinuationLogProbsBatches(t *testing.T) {
	fx, _ := loadFixture(t, "qwen2-tiny")
	m, err := Load(testBackend(t), fx.dir) // own model: the test counts its compiled batches
	if err != nil {
		t.Fatal(err)
	}
	pairs := pairsOf(t, fx)
	alone, err := m.ContinuationLogProbs(pairs)
	if err != nil {
		t.Fatal(err)
	}
	var many []Pair
	for range 300 { // 900 pairs of ≤ 12 tokens (PadLen 16): 256 per batch
		many = append(many, pairs...)
	}
	got, err := m.ContinuationLogProbs(many)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(many) {
		t.Fatalf("%d scores for %d pairs", len(got), len(many))
	}
	for i, s := range got {
		allCloseQuiet(t, fmt.Sprintf("pair %d", i), s.LogProbs, alone[i%3].LogProbs, 1e-6, 1e-6)
	}
	batches := 0
	for k := range m.execs {
		if strings.HasPrefix(k, "logprobs/") {
			batches++
		}
	}
	if batches != 3 { // 3×… (first call), 256×… and 132×…
		t.Fatalf("%d compiled batch shapes, want 3 (keys %v)", batches, m.execs)
	}
}

func allCloseQuiet(t *testing.T, what string, got, want []float32, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= atol+rtol*math.Abs(float64(want[i]))) {
			t.Fatalf("%s: element %d = %g, want %g", what, i, got[i], want[i])
		}
	}
}
