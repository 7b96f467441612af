package pretrain

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestNoiseMask(t *testing.T) {
	for _, tc := range []struct {
		length               int
		density, mean        float64
		wantNoise, wantSpans int
	}{
		{2, 0.15, 3, 1, 1},     // at least one noise token
		{10, 0.15, 3, 2, 1},    // round(1.5) = 2 (half to even), spans round(2/3) = 1
		{20, 0.15, 3, 3, 1},    // round(3/3)
		{100, 0.15, 3, 15, 5},  // the paper's setting: 15 noise tokens in 5 spans
		{128, 0.15, 3, 19, 6},  // round(19.2) = 19, round(6.33) = 6
		{512, 0.15, 3, 77, 26}, // round(76.8) = 77, round(25.67) = 26
		{10, 0.9, 1, 9, 1},     // at most length−1; spans limited by the 1 non-noise token
		{40, 0.5, 1, 20, 20},   // every other token
	} {
		for seed := range uint64(5) {
			m := NoiseMask(tc.length, tc.density, tc.mean, rand.New(rand.NewPCG(seed, 0)))
			if len(m) != tc.length {
				t.Fatalf("length %d seed %d: mask of %d", tc.length, seed, len(m))
			}
			noise, spans := 0, 0
			for i, x := range m {
				if x {
					noise++
					if i == 0 || !m[i-1] {
						spans++
					}
				}
			}
			if noise != tc.wantNoise || spans != tc.wantSpans {
				t.Errorf("length %d density %v mean %v seed %d: %d noise in %d spans, want %d in %d (mask %v)",
					tc.length, tc.density, tc.mean, seed, noise, spans, tc.wantNoise, tc.wantSpans, m)
			}
			if m[0] {
				t.Errorf("length %d seed %d: starts with noise (non-noise spans come first)", tc.length, seed)
			}
			if !m[len(m)-1] {
				t.Errorf("length %d seed %d: ends with non-noise (the last span is noise)", tc.length, seed)
			}
		}
	}
}

// The span lengths are random: over many draws the mean noise span length
// is near the requested one and the masks differ.
func TestNoiseMaskRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	var spans, noise int
	for range 200 {
		m := NoiseMask(100, DefaultNoiseDensity, DefaultMeanSpanLength, rng)
		key := ""
		for i, x := range m {
			if x {
				key += "1"
				noise++
				if !m[i-1] {
					spans++
				}
			} else {
				key += "0"
			}
		}
		seen[key] = true
	}
	if got := float64(noise) / float64(spans); math.Abs(got-3) > 1e-9 {
		t.Errorf("mean span length %v, want 3 (15 noise tokens in 5 spans)", got)
	}
	if len(seen) < 190 {
		t.Errorf("%d distinct masks in 200 draws", len(seen))
	}
}

func TestSpanCorrupt(t *testing.T) {
	const eos = 1
	sent := []int{99, 98, 97} // <extra_id_0>, <extra_id_1>, <extra_id_2>
	for _, tc := range []struct {
		name      string
		ids       []int
		noise     string
		in, tgt   []int
		wantError bool
	}{
		{"paper example", []int{10, 11, 12, 13, 14, 15, 16, 17}, "01100100",
			[]int{10, 99, 13, 14, 98, 16, 17, eos}, []int{99, 11, 12, 98, 15, eos}, false},
		{"span at the end", []int{10, 11, 12, 13}, "0011", []int{10, 11, 99, eos}, []int{99, 12, 13, eos}, false},
		{"three spans", []int{10, 11, 12, 13, 14, 15}, "010101",
			[]int{10, 99, 12, 98, 14, 97, eos}, []int{99, 11, 98, 13, 97, 15, eos}, false},
		{"no noise", []int{10, 11}, "00", []int{10, 11, eos}, []int{eos}, false},
		{"more spans than sentinels", []int{10, 11, 12, 13, 14, 15, 16, 17}, "01010101", nil, nil, true},
		{"length mismatch", []int{10, 11}, "0", nil, nil, true},
	} {
		noise := make([]bool, len(tc.noise))
		for i, c := range tc.noise {
			noise[i] = c == '1'
		}
		in, tgt, err := SpanCorrupt(tc.ids, noise, sent, eos)
		if tc.wantError {
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(in, tc.in) || !slices.Equal(tgt, tc.tgt) {
			t.Errorf("%s: input %v target %v, want %v %v", tc.name, in, tgt, tc.in, tc.tgt)
		}
	}
}

// With NoiseMask's masks: sentinels count down from <extra_id_0>, one per
// span, in the same order in input and target, and every original token is
// in exactly one of them, in order.
func TestSpanCorruptRoundTrip(t *testing.T) {
	const eos = 1
	sent := make([]int, 100)
	for k := range sent {
		sent[k] = 1099 - k
	}
	isSent := func(x int) bool { return x >= 1000 }
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{2, 5, 17, 64, 128, 512} {
		ids := make([]int, n)
		for i := range ids {
			ids[i] = 10 + i
		}
		noise := NoiseMask(n, DefaultNoiseDensity, DefaultMeanSpanLength, rng)
		in, tgt, err := SpanCorrupt(ids, noise, sent, eos)
		if err != nil {
			t.Fatal(err)
		}
		if in[len(in)-1] != eos || tgt[len(tgt)-1] != eos {
			t.Fatalf("n %d: input or target does not end with eos", n)
		}
		var inS, tgS []int
		for _, x := range in[:len(in)-1] {
			if isSent(x) {
				inS = append(inS, x)
			}
		}
		for _, x := range tgt[:len(tgt)-1] {
			if isSent(x) {
				tgS = append(tgS, x)
			}
		}
		if !slices.Equal(inS, tgS) || len(inS) == 0 {
			t.Fatalf("n %d: sentinels %v in input, %v in target", n, inS, tgS)
		}
		for k, s := range inS {
			if s != sent[k] {
				t.Fatalf("n %d: span %d has sentinel %d, want %d (<extra_id_%d>)", n, k, s, sent[k], k)
			}
		}
		// Rebuild the original: each input sentinel is replaced by the target's span after it.
		spans := map[int][]int{}
		cur := -1
		for _, x := range tgt[:len(tgt)-1] {
			if isSent(x) {
				cur = x
				continue
			}
			spans[cur] = append(spans[cur], x)
		}
		var back []int
		for _, x := range in[:len(in)-1] {
			if isSent(x) {
				back = append(back, spans[x]...)
				continue
			}
			back = append(back, x)
		}
		if !slices.Equal(back, ids) {
			t.Fatalf("n %d: input+target rebuild %v, want %v", n, back, ids)
		}
	}
}
