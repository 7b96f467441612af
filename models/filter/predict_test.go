package filter

import (
	"cmp"
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/internal/testutil"
	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/t5"
	"github.com/ragforge/ragforge/models/tokenizer"
)

// testBackend runs ops one at a time (see train/filtertrain's tests), or
// $RAGFORGE_TEST_BACKEND.
var testBackend = cmp.Or(os.Getenv(backend.TestEnvVar), "go:ops_sequential")

// tinyPredictor is a random 1-layer T5 over the t5-flan-tiny tokenizer with
// the two label tokens added.
func tinyPredictor(t *testing.T, cfg Config) *Predictor {
	t.Helper()
	tok, err := tokenizer.Load(testutil.SharedPath(t, "fixtures/t5-flan-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	tok.AddTokens([]string{Helpful, NotHelpful})
	be, err := backend.New(testBackend)
	if err != nil {
		t.Fatal(err)
	}
	c := t5.TinyConfig(tok.Len())
	c.DModel, c.DKV, c.DFF, c.NumLayers, c.NumDecoderLayers, c.NumHeads = 32, 16, 64, 1, 1, 2
	m, err := t5.NewRandom(be, c, 5)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPredictor(m, tok, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// forwardP is P(helpful) from the full first-step logits of t5.Forward: the
// reference the two-row scoring graph must match.
func forwardP(t *testing.T, p *Predictor, rows [][]int) []float64 {
	t.Helper()
	dec := make([][]int, len(rows))
	for i := range dec {
		dec[i] = []int{p.Model.Config.DecoderStartTokenID}
	}
	_, _, logits, err := p.Model.Forward(rows, nil, dec)
	if err != nil {
		t.Fatal(err)
	}
	lg := tensors.MustCopyFlatData[float32](logits) // [B, 1, V]
	V := len(lg) / len(rows)
	out := make([]float64, len(rows))
	for b := range rows {
		out[b] = 1 / (1 + math.Exp(float64(lg[b*V+p.NotHelpful])-float64(lg[b*V+p.Helpful])))
	}
	return out
}

func TestPredictorScoresAgree(t *testing.T) {
	p := tinyPredictor(t, Config{Windowing: Windowing{MaxSeqLength: 24, DocStride: 4, Aggregate: AggregateMean}, BatchSize: 3})
	instr := []string{
		Instruction("Stain sections with hematoxylin for 5 minutes.", "How long is the hematoxylin step?"),
		Instruction(strings.Repeat("Rinse in running tap water. ", 8), "How long is the hematoxylin step?"),
		Instruction("", "?"),
	}
	wins, err := p.Windows(instr)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]int, len(wins))
	for i, w := range wins {
		rows[i] = w.IDs
	}
	if len(rows) < 4 {
		t.Fatalf("%d windows; the long instruction should span several", len(rows))
	}
	want := make([]float64, len(rows))
	for i, r := range rows {
		want[i] = forwardP(t, p, [][]int{r})[0]
	}
	var calls []int
	byRows, err := p.ScoreRows(context.Background(), rows, func(done, total int) { calls = append(calls, done) })
	if err != nil {
		t.Fatal(err)
	}
	byWindows, err := p.ScoreWindows(rows)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		for name, got := range map[string]float64{"ScoreRows": byRows[i], "ScoreWindows": byWindows[i]} {
			if math.Abs(got-want[i]) > 1e-5 || got <= 0 || got >= 1 {
				t.Errorf("%s row %d: %v, full-logit forward %v", name, i, got, want[i])
			}
		}
	}
	if n := (len(rows) + 2) / 3; len(calls) != n || calls[n-1] != len(rows) {
		t.Errorf("progress %v, want %d calls of 3 rows ending at %d", calls, n, len(rows))
	}
	probs, count, err := p.Predict(context.Background(), instr, nil)
	if err != nil {
		t.Fatal(err)
	}
	agg, wantCount, _ := Aggregate(wins, byRows, len(instr), AggregateMean)
	for i := range instr {
		if math.Abs(probs[i]-agg[i]) > 1e-12 || count[i] != wantCount[i] {
			t.Errorf("instruction %d: p %v over %d windows, want %v over %d", i, probs[i], count[i], agg[i], wantCount[i])
		}
	}
	pairs, err := p.PredictPairs(context.Background(), "How long is the hematoxylin step?",
		[]string{"Stain sections with hematoxylin for 5 minutes."}, nil)
	if err != nil || len(pairs) != 1 || pairs[0] != probs[0] {
		t.Errorf("PredictPairs = %v, %v; want [%v] as Predict of its instruction", pairs, err, probs[0])
	}
}

func TestPredictorErrors(t *testing.T) {
	p := tinyPredictor(t, Config{Windowing: Windowing{MaxSeqLength: 24, DocStride: 4}, BatchSize: 2})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.ScoreRows(ctx, [][]int{{5, 1}}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("ScoreRows on a cancelled context: %v", err)
	}
	sentinel := errors.New("over the limit")
	if _, _, err := p.Predict(context.Background(), []string{"x"}, func(context.Context, [][]int) ([]float64, error) { return nil, sentinel }); err != sentinel {
		t.Errorf("Predict returned %v, want the score function's error as it is", err)
	}
	bare, err := tokenizer.Load(testutil.SharedPath(t, "fixtures/t5-flan-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPredictor(p.Model, bare, p.Config); !errors.Is(err, ErrNotFilter) || !strings.Contains(err.Error(), Helpful) {
		t.Errorf("NewPredictor without label tokens: %v, want ErrNotFilter naming %s", err, Helpful)
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // "" = valid
	}{
		{Config{Windowing: Windowing{MaxSeqLength: 512, DocStride: 128}, BatchSize: 16}, ""},
		{Config{Windowing: Windowing{MaxSeqLength: 512, DocStride: 128, Aggregate: AggregateFirst}, BatchSize: 1}, ""},
		{Config{Windowing: Windowing{MaxSeqLength: 512, DocStride: 128}, BatchSize: 0}, "batch size 0"},
		{Config{Windowing: Windowing{MaxSeqLength: 1}, BatchSize: 4}, "max_seq_length 1"},
		{Config{Windowing: Windowing{MaxSeqLength: 8, DocStride: 7}, BatchSize: 4}, "doc_stride"},
		{Config{Windowing: Windowing{MaxSeqLength: 8, DocStride: -1}, BatchSize: 4}, "doc_stride"},
		{Config{Windowing: Windowing{MaxSeqLength: 8, Aggregate: "median"}, BatchSize: 4}, "median"},
	} {
		err := tc.cfg.Check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
