package decoder

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/nn"
)

// promptsOf strips the left padding of inputs.generate.*.
func promptsOf(t *testing.T, fx *fixture) [][]int {
	ids, mask := fx.ints(t, "inputs.generate.input_ids"), fx.ints(t, "inputs.generate.attention_mask")
	var out [][]int
	for r := range ids {
		var p []int
		for c := range ids[r] {
			if mask[r][c] == 1 {
				p = append(p, ids[r][c])
			}
		}
		out = append(out, p)
	}
	return out
}

func TestGenerateGreedy(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			fx, m := loadFixture(t, name)
			opt := m.GenerateOptions()
			opt.MaxNewTokens, opt.OutputLogits = 10, true
			gen, err := m.Generate(promptsOf(t, fx), opt)
			if err != nil {
				t.Fatal(err)
			}
			if want := fx.ints(t, "outputs.generate.new_tokens"); !equalRows(gen.NewTokens, want) {
				t.Fatalf("new_tokens %v, want %v", gen.NewTokens, want)
			}
			if want := fx.ints(t, "outputs.generate.sequences"); !equalRows(gen.Sequences, want) {
				t.Fatalf("sequences %v, want %v", gen.Sequences, want)
			}
			var steps []float32
			for _, s := range gen.StepLogits {
				for _, row := range s {
					steps = append(steps, row...)
				}
			}
			allClose(t, "generate.step_logits (KV cache)", steps, fx.floats(t, "outputs.generate.step_logits"), logitsAtol, logitsRtol, nil)
			if !slices.Equal(gen.FinishReasons, []string{"length", "length"}) {
				t.Fatalf("finish reasons %v", gen.FinishReasons)
			}
		})
	}
}

// recompute is greedy decoding without a cache: the whole left-padded
// sequence through Forward at every step, position ids cumsum(mask)-1.
func recompute(t *testing.T, m *Model, prompts [][]int, steps int) ([][]int, [][][]float32) {
	L := 0
	for _, p := range prompts {
		L = max(L, len(p))
	}
	ids := make([][]int, len(prompts))
	mask := make([][]int, len(prompts))
	for r, p := range prompts {
		for range L - len(p) {
			ids[r] = append(ids[r], 0)
			mask[r] = append(mask[r], 0)
		}
		ids[r] = append(ids[r], p...)
		for range p {
			mask[r] = append(mask[r], 1)
		}
	}
	var logits [][][]float32
	for range steps {
		out, err := m.Logits(ids, mask, PositionIDs(mask))
		if err != nil {
			t.Fatal(err)
		}
		v := flat(t, out)
		n, V := len(ids[0]), m.Config.VocabSize
		var step [][]float32
		for r := range ids {
			row := v[(r*n+n-1)*V : (r*n+n)*V]
			step = append(step, row)
			ids[r] = append(ids[r], nn.Argmax(row))
			mask[r] = append(mask[r], 1)
		}
		logits = append(logits, step)
	}
	return ids, logits
}

func TestGenerateKVCacheEqualsRecompute(t *testing.T) {
	for _, name := range fixtureNames {
		t.Run(name, func(t *testing.T) {
			_, m := loadFixture(t, name)
			// Prompts of 3 lengths, one longer than a PadLen bucket, 21 steps.
			prompts := [][]int{{5, 17, 300}, {9, 8, 7, 6, 5, 4, 3, 11, 12, 13, 14}, {400}}
			opt := GenerateOptions{MaxNewTokens: 21, OutputLogits: true}
			gen, err := m.Generate(prompts, opt)
			if err != nil {
				t.Fatal(err)
			}
			ids, logits := recompute(t, m, prompts, 21)
			if !equalRows(gen.Sequences, ids) {
				t.Fatalf("KV cache %v\nrecompute %v", gen.Sequences, ids)
			}
			for s := range logits {
				for r := range logits[s] {
					allClose(t, fmt.Sprintf("step %d row %d", s, r), gen.StepLogits[s][r], logits[s][r], 1e-5, 1e-5, nil)
				}
			}
		})
	}
}

func TestGenerateStops(t *testing.T) {
	fx, m := loadFixture(t, "qwen2-tiny")
	prompts := promptsOf(t, fx)
	want := fx.ints(t, "outputs.generate.new_tokens") // row 0: 311 46 18 323 185 18 ...; row 1: 52 109 185 ...
	decode := func(ids []int) string {
		parts := make([]string, len(ids))
		for i, id := range ids {
			parts[i] = fmt.Sprintf("<%d>", id)
		}
		return strings.Join(parts, "")
	}
	cases := []struct {
		name    string
		opt     GenerateOptions
		lens    []int
		reasons []string
	}{
		{"eos id", GenerateOptions{MaxNewTokens: 10, EOSTokenIDs: []int{18}}, []int{3, 10}, []string{"eos", "length"}},
		{"stop id", GenerateOptions{MaxNewTokens: 10, StopTokenIDs: []int{185}}, []int{5, 3}, []string{"stop", "stop"}},
		{"stop string", GenerateOptions{MaxNewTokens: 10, StopStrings: []string{"<323><185>"}, Decode: decode}, []int{5, 10}, []string{"stop", "length"}},
		{"length", GenerateOptions{MaxNewTokens: 4}, []int{4, 4}, []string{"length", "length"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gen, err := m.Generate(prompts, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			for r := range prompts {
				if !slices.Equal(gen.NewTokens[r], want[r][:tc.lens[r]]) {
					t.Fatalf("row %d: new tokens %v, want %v", r, gen.NewTokens[r], want[r][:tc.lens[r]])
				}
				if n := len(gen.Sequences[r]); n != len(gen.Sequences[0]) {
					t.Fatalf("row %d: sequence length %d, row 0 %d", r, n, len(gen.Sequences[0]))
				}
				for _, x := range gen.Sequences[r][9+len(gen.NewTokens[r]):] {
					if x != 0 {
						t.Fatalf("row %d: %v continues after it finished with %d (want pad)", r, gen.Sequences[r], x)
					}
				}
			}
			if !slices.Equal(gen.FinishReasons, tc.reasons) {
				t.Fatalf("finish reasons %v, want %v", gen.FinishReasons, tc.reasons)
			}
		})
	}
}

func TestGenerateSampling(t *testing.T) {
	fx, m := loadFixture(t, "qwen3-tiny")
	prompts := promptsOf(t, fx)
	run := func(opt GenerateOptions) [][]int {
		gen, err := m.Generate(prompts, opt)
		if err != nil {
			t.Fatal(err)
		}
		return gen.NewTokens
	}
	base := GenerateOptions{MaxNewTokens: 8, DoSample: true, Temperature: 1.5, Seed: 7}
	a, b := run(base), run(base)
	if !equalRows(a, b) {
		t.Fatalf("same seed, different samples: %v vs %v", a, b)
	}
	other := base
	other.Seed = 8
	if equalRows(a, run(other)) {
		t.Fatalf("seeds 7 and 8 sampled the same %v (random model, temperature 1.5: expected to differ)", a)
	}
	// top_k 1 is greedy whatever the temperature and seed.
	k1 := base
	k1.TopK = 1
	if got, want := run(k1), fx.ints(t, "outputs.generate.new_tokens"); !equalRows(got, [][]int{want[0][:8], want[1][:8]}) {
		t.Fatalf("top_k 1: %v, want greedy %v", got, want)
	}
	// a tiny top_p keeps only the most likely token.
	p := base
	p.TopP = 1e-6
	if got, want := run(p), fx.ints(t, "outputs.generate.new_tokens"); !equalRows(got, [][]int{want[0][:8], want[1][:8]}) {
		t.Fatalf("top_p 1e-6: %v, want greedy %v", got, want)
	}
}

func TestGenerateRefusals(t *testing.T) {
	_, m := loadFixture(t, "llama-tiny")
	long := make([]int, 120)
	cases := []struct {
		name    string
		prompts [][]int
		opt     GenerateOptions
		want    string
	}{
		{"context", [][]int{long}, GenerateOptions{MaxNewTokens: 9}, "exceeds max_position_embeddings 128"},
		{"no max", [][]int{{1}}, GenerateOptions{}, "max_new_tokens 0"},
		{"stop without decode", [][]int{{1}}, GenerateOptions{MaxNewTokens: 1, StopStrings: []string{"x"}}, "Decode"},
		{"id", [][]int{{512}}, GenerateOptions{MaxNewTokens: 1}, "outside [0,512)"},
		{"empty", [][]int{{}}, GenerateOptions{MaxNewTokens: 1}, "prompt 0 is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Generate(tc.prompts, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// Llama has no pad_token_id: like HF, a finished row continues with the
// first eos id.
func TestGeneratePadFallsBackToEOS(t *testing.T) {
	dir := fixtureCopy(t, "llama-tiny", func(c map[string]any) { delete(c, "pad_token_id") }, nil)
	m, err := Load(testBackend(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := m.Generate([][]int{{346, 200, 362, 202, 345}, {7}}, GenerateOptions{MaxNewTokens: 3, EOSTokenIDs: []int{345, 9}})
	if err != nil {
		t.Fatal(err)
	}
	// llama-tiny repeats 345 after this prompt (fixture new_tokens), so row 0 ends at once.
	if gen.FinishReasons[0] != "eos" || !slices.Equal(gen.Sequences[0][5:], []int{345, 345, 345}) || !slices.Equal(gen.Sequences[1][:4], []int{345, 345, 345, 345}) {
		t.Fatalf("sequences %v, reasons %v", gen.Sequences, gen.FinishReasons)
	}
}
