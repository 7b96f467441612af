package learn

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/sample"
	"github.com/ragforge/ragforge/models/tokenizer"
	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// demoTexts returns the title and text of every demo passage (the texts the
// demo trains its tokenizers on); with n > 0, only the first n passages.
func demoTexts(t testing.TB, n int) []string {
	t.Helper()
	b, err := sample.Bytes(sample.CorpusFile)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if n > 0 && i >= n {
			break
		}
		var d struct{ Title, Text string }
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("corpus.jsonl: record %d: %v", i, err)
		}
		texts = append(texts, d.Title, d.Text)
	}
	return texts
}

// lines splits texts into their non-blank lines (spm_train's sentences).
func lines(texts []string) []string {
	var out []string
	for _, t := range texts {
		for _, l := range strings.Split(t, "\n") {
			if strings.TrimSpace(l) != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

func TestDigamma(t *testing.T) {
	const euler = 0.5772156649015329
	for _, tc := range []struct{ x, want float64 }{
		{1, -euler},
		{2, 1 - euler},
		{3, 1.5 - euler},
		{0.5, -euler - 2*math.Ln2},
		{10, 2.251752589066721},
	} {
		if got := digamma(tc.x); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("digamma(%g) = %.12f, want %.12f", tc.x, got, tc.want)
		}
	}
}

func TestSeedPieces(t *testing.T) {
	// "▁ab▁ab" and "▁abc": ▁a is always followed by b (not a suffix-tree
	// node); ▁ab (3×, then ▁ / end / c) and ab (3×) branch; ▁abc, abc and
	// bc occur once.
	c := newCorpus()
	c.add("▁ab▁ab")
	c.add("▁abc")
	chars := sortedCounts(c.chars)
	got := seedPieces(chars, c, UnigramOptions{}.withDefaults())
	want := []count{{"a", 3}, {"b", 3}, {"▁", 3}, {"c", 1}, {"▁ab", 9}, {"ab", 6}}
	if len(got) != len(want) {
		t.Fatalf("seeds = %v, want pieces %v", got, want)
	}
	for i, w := range want {
		ws := math.Log(float64(w.n) / 25)
		if got[i].piece != w.s || math.Abs(got[i].score-ws) > 1e-12 {
			t.Errorf("seed %d = %q %g, want %q log(%d/25) = %g", i, got[i].piece, got[i].score, w.s, w.n, ws)
		}
	}
}

func TestSeedPiecesScriptsAndSpaces(t *testing.T) {
	// "HER2" mixes Latin and Common: no seed crosses R|2; "2▁x" would put ▁
	// inside a piece.
	c := newCorpus()
	for range 2 {
		c.add("▁HER2▁HERA")
	}
	got := seedPieces(sortedCounts(c.chars), c, UnigramOptions{}.withDefaults())
	for _, p := range got {
		if strings.Contains(p.piece, "R2") || strings.Contains(strings.TrimPrefix(p.piece, "▁"), "▁") {
			t.Errorf("invalid seed %q", p.piece)
		}
	}
	if !slices.ContainsFunc(got, func(s scored) bool { return s.piece == "▁HER" }) {
		t.Errorf("seeds %v lack ▁HER", got)
	}
}

func TestLattice(t *testing.T) {
	m := newLatticeModel([]scored{{"a", math.Log(0.2)}, {"b", math.Log(0.3)}, {"ab", math.Log(0.1)}})
	// Paths of "ab": a·b (0.06) and ab (0.1); Z = 0.16.
	exp := make([]float64, 3)
	z, _ := m.marginal("ab", 2, exp, nil)
	if want := 2 * math.Log(0.16); math.Abs(z-want) > 1e-12 {
		t.Errorf("freq·logZ = %g, want %g", z, want)
	}
	for i, want := range []float64{2 * 0.375, 2 * 0.375, 2 * 0.625} {
		if math.Abs(exp[i]-want) > 1e-12 {
			t.Errorf("expected[%q] = %g, want %g", m.pieces[i].piece, exp[i], want)
		}
	}
	ids, s, _ := m.viterbi("ab", -1, nil)
	if !slices.Equal(ids, []int{2}) || math.Abs(s-math.Log(0.1)) > 1e-12 {
		t.Errorf("viterbi = %v %g, want [2] log 0.1", ids, s)
	}
	ids, s, _ = m.viterbi("ab", 2, nil)
	if !slices.Equal(ids, []int{0, 1}) || math.Abs(s-math.Log(0.06)) > 1e-12 {
		t.Errorf("viterbi without ab = %v %g, want [0 1] log 0.06", ids, s)
	}
	// "c" has no piece: an unknown node scored min − 10, credited to piece 0.
	ids, s, _ = m.viterbi("ac", -1, nil)
	if want := math.Log(0.1) + math.Log(0.2) - unkPenalty; !slices.Equal(ids, []int{0, trainerUnkID}) || math.Abs(s-want) > 1e-12 {
		t.Errorf("viterbi(ac) = %v %g, want [0 %d] %g", ids, s, trainerUnkID, want)
	}
}

func TestMStep(t *testing.T) {
	got := mStep([]scored{{"a", 0}, {"b", 0}, {"c", 0}}, []float64{2, 0.4, 1})
	// Σ kept = 3; ψ(2)−ψ(3) = −1/2, ψ(1)−ψ(3) = −3/2.
	want := []scored{{"a", -0.5}, {"c", -1.5}}
	if len(got) != 2 || got[0].piece != "a" || got[1].piece != "c" ||
		math.Abs(got[0].score-want[0].score) > 1e-9 || math.Abs(got[1].score-want[1].score) > 1e-9 {
		t.Errorf("mStep = %v, want %v", got, want)
	}
}

// readSPMVocab reads an spm_train .vocab file: piece TAB score per line.
func readSPMVocab(t *testing.T, path string) []scored {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []scored
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		piece, score, ok := strings.Cut(sc.Text(), "\t")
		s, err := strconv.ParseFloat(score, 64)
		if !ok || err != nil {
			t.Fatalf("%s: line %d: want piece<TAB>score, got %q", path, n, sc.Text())
		}
		out = append(out, scored{piece, s})
	}
	return out
}

// TestTrainUnigramMatchesSPM compares with spm_train 0.1.97 (testdata/README.md):
// position by position the same score to 1e-4 (spm prints 6 significant
// digits), and the same pieces except between tied scores.
func TestTrainUnigramMatchesSPM(t *testing.T) {
	tiny, err := os.ReadFile("testdata/tiny_corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		texts  []string
		vocab  int
		golden string
	}{
		{"tiny", lines([]string{string(tiny)}), 20, "testdata/tiny_spm0197_v20.vocab"},
		{"demo3", lines(demoTexts(t, 3)), 120, "testdata/demo3_spm0197_v120.vocab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := readSPMVocab(t, tc.golden)
			m, err := TrainUnigram(tc.texts, UnigramOptions{VocabSize: tc.vocab, legacyPruneSum: true})
			if err != nil {
				t.Fatal(err)
			}
			got := m.Pieces()
			gotScore, wantScore := map[string]float64{}, map[string]float64{}
			for _, p := range got {
				gotScore[p.Piece] = float64(p.Score)
			}
			for _, p := range want {
				wantScore[p.piece] = p.score
			}
			// Pieces with equal expected counts have equal scores up to
			// rounding; which of them make the vocabulary cut-off is decided
			// by spm's float32 noise, by ragforge's piece order. A piece in
			// one vocabulary only must tie (1e-4) with one in the other only.
			var onlyGot, onlyWant []float64
			for p, s := range wantScore {
				if _, ok := gotScore[p]; !ok {
					onlyWant = append(onlyWant, s)
				}
			}
			for p, s := range gotScore {
				if _, ok := wantScore[p]; !ok {
					onlyGot = append(onlyGot, s)
				}
			}
			slices.Sort(onlyGot)
			slices.Sort(onlyWant)
			if len(onlyGot) != len(onlyWant) {
				t.Errorf("%d pieces only in ragforge's, %d only in spm's", len(onlyGot), len(onlyWant))
			}
			for i := range min(len(onlyGot), len(onlyWant)) {
				if math.Abs(onlyGot[i]-onlyWant[i]) > 1e-4 {
					t.Errorf("a piece scored %g is only in ragforge's vocabulary, one scored %g only in spm's: not a tie", onlyGot[i], onlyWant[i])
				}
			}
			if len(onlyGot) > 0 {
				t.Logf("%d tied pieces at the cut-off differ from spm's", len(onlyGot))
			}
			if len(got) != len(want) {
				t.Fatalf("%d pieces, spm has %d", len(got), len(want))
			}
			for i := range want {
				if d := math.Abs(float64(got[i].Score) - want[i].score); d > 1e-4 {
					t.Errorf("id %d: %q %g, spm %q %g", i, got[i].Piece, got[i].Score, want[i].piece, want[i].score)
				}
			}
		})
	}
}

// TestTrainUnigramTinyPieces pins what the default (current sentencepiece)
// trainer learns on the hand-made corpus: no pruning round runs there, so
// it equals the spm 0.1.97 golden, and the four characters EM dropped come
// back last with scores min, min+1e-4, … by decreasing frequency.
func TestTrainUnigramTinyPieces(t *testing.T) {
	tiny, err := os.ReadFile("testdata/tiny_corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	m, err := TrainUnigram(lines([]string{string(tiny)}), UnigramOptions{VocabSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range m.Pieces() {
		got = append(got, p.Piece)
	}
	var want []string
	for _, p := range readSPMVocab(t, "testdata/tiny_spm0197_v20.vocab") {
		want = append(want, p.piece)
	}
	if !slices.Equal(got, want) {
		t.Errorf("pieces\n got %q\nwant %q", got, want)
	}
	// EM dropped m, r, h, a and t (they only occur inside kept pieces);
	// finalization re-adds them at min score + k·1e-4, k = 0 for the most
	// frequent (t), so they come last, 1e-4 apart, rarest first.
	p := m.Pieces()
	if last := got[len(got)-5:]; !slices.Equal(last, []string{"m", "r", "h", "a", "t"}) {
		t.Errorf("last pieces %q, want the re-added m r h a t", last)
	}
	for i := len(p) - 4; i < len(p); i++ {
		if d := float64(p[i-1].Score - p[i].Score); math.Abs(d-1e-4) > 2e-6 {
			t.Errorf("score gap %q→%q = %g, want 1e-4", p[i-1].Piece, p[i].Piece, d)
		}
	}
}

// decodeNorm is what Decode(Encode(x)) must give: the normalized text with
// ▁ back to spaces and the dummy prefix dropped.
func decodeNorm(m *sentencepiece.Model, x string) string {
	n, _ := m.Normalize(x)
	return strings.TrimPrefix(strings.ReplaceAll(n, "▁", " "), " ")
}

func TestTrainUnigramDemo(t *testing.T) {
	texts := demoTexts(t, 0)
	for _, tc := range []struct {
		name  string
		opt   UnigramOptions
		exact bool // the corpus has enough pieces for exactly VocabSize
	}{
		{"default", UnigramOptions{}, false},
		{"v500", UnigramOptions{VocabSize: 500}, true},
		{"identity", UnigramOptions{VocabSize: 500, Normalization: NormIdentity}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := TrainUnigram(texts, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			size := tc.opt.withDefaults().VocabSize
			if tc.exact && m.Size() != size || m.Size() > size {
				t.Errorf("size %d, want %s %d", m.Size(), map[bool]string{true: "=", false: "<="}[tc.exact], size)
			}
			if int(m.Trainer().VocabSize) != m.Size() {
				t.Errorf("trainer_spec vocab_size %d, model size %d", m.Trainer().VocabSize, m.Size())
			}
			for id, want := range []sentencepiece.Piece{{Piece: "<pad>", Type: sentencepiece.Control}, {Piece: "</s>", Type: sentencepiece.Control}, {Piece: "<unk>", Type: sentencepiece.Unknown}} {
				if p := m.Pieces()[id]; p.Piece != want.Piece || p.Type != want.Type {
					t.Errorf("id %d = %+v, want %+v", id, p, want)
				}
			}
			if m.PadID() != 0 || m.EOSID() != 1 || m.UnkID() != 2 || m.BOSID() != -1 {
				t.Errorf("pad/eos/unk/bos = %d/%d/%d/%d, want 0/1/2/-1", m.PadID(), m.EOSID(), m.UnkID(), m.BOSID())
			}
			for i, x := range texts {
				ids := m.EncodeIDs(x)
				if slices.Contains(ids, m.UnkID()) {
					t.Errorf("text %d encodes to <unk>: %v", i, ids)
				}
				if got, want := m.Decode(ids), decodeNorm(m, x); got != want {
					t.Errorf("text %d: decode(encode(x))\n got %q\nwant %q", i, got, want)
				}
			}
			// A character never seen is the one <unk>.
			if ids := m.EncodeIDs("stain ☃"); ids[len(ids)-1] != m.UnkID() {
				t.Errorf("unseen character: ids %v, want last <unk>", ids)
			}
			again, err := TrainUnigram(texts, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Bytes(), again.Bytes()) {
				t.Error("two trainings on the same texts differ")
			}
		})
	}
}

func TestTrainUnigramNormalization(t *testing.T) {
	texts := []string{"µm ﬁxed\tin\nformalin", "µm fixed"}
	m, err := TrainUnigram(texts, UnigramOptions{VocabSize: 40})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.PieceToID("µ"); ok {
		t.Error("µ (U+00B5) is a piece; NFKC maps it to μ (U+03BC)")
	}
	for _, p := range m.Pieces() {
		if strings.ContainsAny(p.Piece, "\t\nﬁ") {
			t.Errorf("piece %q holds a character nmt_nfkc rewrites", p.Piece)
		}
	}
	if got, want := m.Decode(m.EncodeIDs(texts[0])), "μm fixed in formalin"; got != want {
		t.Errorf("decode(encode(%q)) = %q, want %q", texts[0], got, want)
	}
	if m.Normalizer().Name != NormNMTNFKC || len(m.Normalizer().PrecompiledCharsmap) == 0 {
		t.Errorf("normalizer %q with %d-byte charsmap, want nmt_nfkc with a charsmap", m.Normalizer().Name, len(m.Normalizer().PrecompiledCharsmap))
	}
	id, err := TrainUnigram(texts, UnigramOptions{VocabSize: 40, Normalization: NormIdentity})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := id.PieceToID("µ"); !ok || id.Normalizer().Name != NormIdentity || len(id.Normalizer().PrecompiledCharsmap) != 0 {
		t.Errorf("identity: want µ kept and no charsmap (name %q)", id.Normalizer().Name)
	}
}

func TestTrainUnigramErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		texts []string
		opt   UnigramOptions
		want  string
	}{
		{"no text", []string{"", "   "}, UnigramOptions{}, "no text"},
		{"vocab below specials", []string{"abc"}, UnigramOptions{VocabSize: 3}, `"VocabSize"`},
		{"vocab below chars", []string{"abcdef"}, UnigramOptions{VocabSize: 8}, "7 characters"},
		{"normalization", []string{"abc"}, UnigramOptions{Normalization: "nfkc"}, `"Normalization"`},
		{"shrinking", []string{"abc"}, UnigramOptions{ShrinkingFactor: 1.5}, `"ShrinkingFactor"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := TrainUnigram(tc.texts, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %s", err, tc.want)
			}
		})
	}
}

func TestWriteT5Dir(t *testing.T) {
	texts := demoTexts(t, 0)
	m, err := TrainUnigram(texts, UnigramOptions{VocabSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteT5Dir(dir, m); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t5, ok := tok.(*sentencepiece.T5)
	if !ok {
		t.Fatalf("loaded %T, want *sentencepiece.T5", tok)
	}
	if !bytes.Equal(t5.SentencePiece().Bytes(), m.Bytes()) {
		t.Error("spiece.model read back differs from the trained model")
	}
	if tok.Len() != m.Size()+100 || tok.PadID() != 0 || tok.EOSID() != 1 {
		t.Errorf("Len/pad/eos = %d/%d/%d, want %d/0/1", tok.Len(), tok.PadID(), tok.EOSID(), m.Size()+100)
	}
	if id, _ := tok.TokenToID("<extra_id_0>"); id != m.Size()+99 {
		t.Errorf("<extra_id_0> = %d, want %d", id, m.Size()+99)
	}
	for i, x := range texts {
		want := append(m.EncodeIDs(x), 1)
		if got := tok.Encode(x, true); !slices.Equal(got, want) {
			t.Errorf("text %d: loaded tokenizer encodes differently", i)
		}
	}
	if err := WriteT5Dir(dir, nil); err == nil {
		t.Error("nil model: no error")
	}
}

// TestSPMEncodeAgrees runs the reference spm_encode, when installed, on a
// spiece.model written by TrainUnigram: it must read the model (and its
// rebuilt nmt_nfkc charsmap) and segment every demo line as ragforge does.
func TestSPMEncodeAgrees(t *testing.T) {
	bin, err := exec.LookPath("spm_encode")
	if err != nil {
		t.Skip("SKIP: spm_encode not on PATH (apt-get install sentencepiece); reference cross-check not run")
	}
	texts := append(lines(demoTexts(t, 0)), "ＦＵＬＬ－ＷＩＤＴＨ ① ﬁx ｶﾀｶﾅ x²\u00a0y", "tabs\tand\u3000spaces")
	m, err := TrainUnigram(texts, UnigramOptions{VocabSize: 800})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "spiece.model")
	if err := os.WriteFile(model, m.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// spm_encode reads lines: a tab stays inside one.
	cmd := exec.Command(bin, "--model="+model, "--output_format=id")
	cmd.Stdin = strings.NewReader(strings.Join(texts, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("spm_encode: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(texts) {
		t.Fatalf("spm_encode gave %d lines for %d texts", len(got), len(texts))
	}
	for i, x := range texts {
		ids := m.EncodeIDs(x)
		s := make([]string, len(ids))
		for k, id := range ids {
			s[k] = strconv.Itoa(id)
		}
		if want := strings.Join(s, " "); got[i] != want {
			t.Errorf("line %d %q:\nspm_encode %s\n ragforge  %s", i, x, got[i], want)
		}
	}
}

func BenchmarkTrainUnigramDemo(b *testing.B) {
	texts := demoTexts(b, 0)
	NMTNFKCCharsmap() // built once per process; not part of training
	for b.Loop() {
		if _, err := TrainUnigram(texts, UnigramOptions{VocabSize: 800}); err != nil {
			b.Fatal(err)
		}
	}
}
