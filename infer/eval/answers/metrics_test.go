package answers

import (
	"math"
	"reflect"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestTokenizer13a(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"Hello, world.", []string{"Hello", ",", "world", "."}},
		{"It costs $5.50, ok?", []string{"It", "costs", "$", "5.50", ",", "ok", "?"}},
		{"5,5 mL (3-4 h)", []string{"5,5", "mL", "(", "3", "-", "4", "h", ")"}},
		{"e.g. A&amp;B", []string{"e", ".", "g", ".", "A", "&", "B"}},
		{"split-\nword\nnext", []string{"splitword", "next"}},
		{"", []string{}},
	}
	for _, c := range cases {
		if got := Tokenizer13a(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Tokenizer13a(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestBLEUHand(t *testing.T) {
	cases := []struct {
		name      string
		hyp, ref  string
		opt       BLEUOptions
		sentence  bool
		score, bp float64
		sys, rl   int
	}{
		// p = 5/6, 3/5, 2/4, 1/3; product 1/12.
		{"one word differs", "the cat sat on the mat", "the cat sat on a mat", BLEUOptions{}, false, 100 * math.Pow(1.0/12, 0.25), 1, 6, 6},
		// p = 6/7, 5/6, 4/5, 3/4; product 3/7; c > r so BP 1.
		{"hypothesis longer", "the cat sat on the mat today", "the cat sat on the mat", BLEUOptions{}, false, 100 * math.Pow(3.0/7, 0.25), 1, 7, 6},
		{"empty hypothesis", "", "the cat sat", BLEUOptions{}, false, 0, 0, 0, 3},
		{"empty hypothesis exp", "", "the cat sat", BLEUOptions{Smooth: "exp"}, false, 0, 0, 0, 3},
		// No 3-grams: 0 without effective order.
		{"short corpus", "the cat", "the cat sat", BLEUOptions{}, false, 0, math.Exp(-0.5), 2, 3},
		// Effective order 2: p1 = p2 = 100; BP = exp(1 - 3/2).
		{"short sentence", "the cat", "the cat sat", BLEUOptions{}, true, 100 * math.Exp(-0.5), math.Exp(-0.5), 2, 3},
		// p1 4/4, p2 1/3, p3 0/2, p4 0/1.
		{"exp smoothing", "a b c d", "a b d c", BLEUOptions{Smooth: "exp"}, false, math.Pow(100*(100.0/3)*(100.0/4)*(100.0/4), 0.25), 1, 4, 4},
		{"floor smoothing", "a b c d", "a b d c", BLEUOptions{Smooth: "floor"}, false, math.Pow(100*(100.0/3)*(100*0.1/2)*(100*0.1/1), 0.25), 1, 4, 4},
		{"add-k smoothing", "a b c d", "a b d c", BLEUOptions{Smooth: "add-k"}, false, math.Pow(100*(100*2.0/4)*(100*1.0/3)*(100*1.0/2), 0.25), 1, 4, 4},
		{"no smoothing zero", "a b c d", "a b d c", BLEUOptions{}, false, 0, 1, 4, 4},
		{"lowercase", "The Cat", "the cat", BLEUOptions{Lowercase: true}, true, 100, 1, 2, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s BLEUScore
			var err error
			if c.sentence {
				s, err = SentenceBLEU(c.hyp, c.ref, c.opt)
			} else {
				s, err = BLEU([]string{c.hyp}, []string{c.ref}, c.opt)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !near(s.Score, c.score) || !near(s.BP, c.bp) || s.SysLen != c.sys || s.RefLen != c.rl {
				t.Errorf("got %+v, want score %v bp %v sys %d ref %d", s, c.score, c.bp, c.sys, c.rl)
			}
		})
	}
}

// Corpus BLEU pools counts: hyps "a b c d"/"a b d c" (p 4/4,1/3,0/2,0/1)
// and "x y z w"/"x y z w" (4/4,3/3,2/2,1/1) give p = 8/8, 4/6, 2/4, 1/2.
func TestBLEUCorpus(t *testing.T) {
	s, err := BLEU([]string{"a b c d", "x y z w"}, []string{"a b d c", "x y z w"}, BLEUOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := 100 * math.Pow(1*(4.0/6)*(2.0/4)*(1.0/2), 0.25)
	if !near(s.Score, want) || s.Correct != [4]int{8, 4, 2, 1} || s.Total != [4]int{8, 6, 4, 2} {
		t.Errorf("got %+v, want score %v", s, want)
	}
	if _, err := BLEU([]string{"a"}, nil, BLEUOptions{}); err == nil {
		t.Error("length mismatch accepted")
	}
	if _, err := BLEU(nil, nil, BLEUOptions{Smooth: "bogus"}); err == nil {
		t.Error("unknown smoothing accepted")
	}
}

func TestROUGEHand(t *testing.T) {
	cases := []struct {
		name, hyp, ref string
		opt            ROUGEOptions
		want           ROUGEScore
	}{
		// R1 overlap 5 of 6/6; R2 3 of 5/5; LCS "the cat sat on mat" 5.
		{"one word differs", "The cat sat on the mat", "the cat sat on a mat", ROUGEOptions{}, ROUGEScore{5.0 / 6, 3.0 / 5, 5.0 / 6}},
		// R1 P 6/7 R 1 → 12/13; R2 P 5/6 R 1 → 10/11; LCS 6 → 12/13.
		{"hypothesis longer", "the cat sat on the mat today", "the cat sat on the mat", ROUGEOptions{}, ROUGEScore{12.0 / 13, 10.0 / 11, 12.0 / 13}},
		{"empty hypothesis", "", "the cat", ROUGEOptions{}, ROUGEScore{}},
		{"punctuation only", "!!!", "the cat", ROUGEOptions{}, ROUGEScore{}},
		// hyp "b a c", ref "a b c": R1 1; R2 none; LCS 2 ("a c" / "b c").
		{"order", "b a c", "a b c", ROUGEOptions{}, ROUGEScore{1, 0, 2.0 / 3}},
		// Unicode: "coloração rápida" vs "coloração lenta": 1 of 2/2.
		{"unicode", "coloração rápida", "coloração lenta", ROUGEOptions{Unicode: true}, ROUGEScore{0.5, 0, 0.5}},
		// Default (ASCII): colora o r pida / colora o lenta: R1 2/4, 2/3 → 4/7;
		// R2 "colora o" 1/3, 1/2 → 2/5; LCS 2 → 4/7.
		{"ascii default", "coloração rápida", "coloração lenta", ROUGEOptions{}, ROUGEScore{4.0 / 7, 2.0 / 5, 4.0 / 7}},
	}
	for _, c := range cases {
		got := ROUGEWith(c.hyp, c.ref, c.opt)
		if !near(got.R1, c.want.R1) || !near(got.R2, c.want.R2) || !near(got.RL, c.want.RL) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}
