package train

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ragforge/ragforge/models/tokenizer/sentencepiece"
)

// T5 special pieces and their ids (HF t5-base / Flan-T5 spiece.model).
const (
	PadPiece = "<pad>" // id 0, CONTROL
	EOSPiece = "</s>"  // id 1, CONTROL
	UnkPiece = "<unk>" // id 2, UNKNOWN
	numMeta  = 3
)

// spaceSymbol is U+2581, sentencepiece's escaped space (kSpaceSymbol).
const spaceSymbol = '\u2581'

// Normalization names accepted by UnigramOptions.Normalization.
const (
	// NormIdentity keeps the text as is (sentencepiece "identity": empty
	// precompiled charsmap). Only the space character ' ' is treated as
	// whitespace, so tabs and newlines become ordinary characters.
	NormIdentity = "identity"
	// NormNMTNFKC is ragforge's rebuild of sentencepiece's "nmt_nfkc" rule
	// (see NMTNFKCCharsmap): NFKC per code point, control characters
	// dropped, tabs/newlines and other spaces mapped to ' '.
	NormNMTNFKC = "nmt_nfkc"
)

// UnigramOptions configures TrainUnigram. The zero value of a field selects
// its default, which is spm_train's default unless noted.
type UnigramOptions struct {
	// VocabSize is the size of the whole SentencePiece vocabulary, the three
	// T5 specials included (spm --vocab_size). Default 2000.
	VocabSize int
	// MaxPieceLen is the longest piece in runes (spm
	// --max_sentencepiece_length). Default 16.
	MaxPieceLen int
	// MinFreq is the number of occurrences a substring needs to be a seed
	// piece. Default, and minimum, 2: spm seeds from the internal nodes of a
	// suffix tree, which occur at least twice.
	MinFreq int
	// SeedSize caps the seed substrings (spm --seed_sentencepiece_size).
	// Default 1,000,000.
	SeedSize int
	// ShrinkingFactor is the share of pieces kept by each pruning round (spm
	// --shrinking_factor). Default 0.75.
	ShrinkingFactor float64
	// SubIterations is the number of EM iterations between prunings (spm
	// --num_sub_iterations). Default 2.
	SubIterations int
	// Normalization is NormNMTNFKC (default, the rule T5's spiece.model was
	// trained with) or NormIdentity.
	Normalization string
	// Log receives one line per EM iteration; nil discards them.
	Log io.Writer

	// legacyPruneSum reproduces sentencepiece <= 0.1.99's pruning loss, which
	// used the number of pieces instead of the number of alternatives in
	// log(sum + freq·(|alternatives|−1)). Tests set it to compare with the
	// spm_train 0.1.97 golden files.
	legacyPruneSum bool
}

func (o UnigramOptions) withDefaults() UnigramOptions {
	if o.VocabSize == 0 {
		o.VocabSize = 2000
	}
	if o.MaxPieceLen == 0 {
		o.MaxPieceLen = 16
	}
	o.MinFreq = max(o.MinFreq, 2)
	if o.SeedSize == 0 {
		o.SeedSize = 1_000_000
	}
	if o.ShrinkingFactor == 0 {
		o.ShrinkingFactor = 0.75
	}
	if o.SubIterations == 0 {
		o.SubIterations = 2
	}
	if o.Normalization == "" {
		o.Normalization = NormNMTNFKC
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// UnigramNormalizer returns the normalizer spec TrainUnigram writes for a
// normalization name: add_dummy_prefix, remove_extra_whitespaces and
// escape_whitespaces on (the spm defaults), and the precompiled charsmap of
// the rule (none for NormIdentity).
func UnigramNormalizer(name string) (sentencepiece.NormalizerSpec, error) {
	ns := sentencepiece.DefaultNormalizerSpec()
	switch name {
	case NormIdentity:
		ns.Name = NormIdentity
	case NormNMTNFKC:
		ns.Name = NormNMTNFKC
		ns.PrecompiledCharsmap = NMTNFKCCharsmap()
	default:
		return ns, fmt.Errorf("normalization %q not supported (%q, %q)", name, NormNMTNFKC, NormIdentity)
	}
	return ns, nil
}

// t5TrainerSpec is the trainer spec of a T5 vocabulary of size n: unigram,
// pad 0, eos 1, unk 2, no bos.
func t5TrainerSpec(n int) sentencepiece.TrainerSpec {
	return sentencepiece.TrainerSpec{ModelType: 1, VocabSize: int32(n), PadID: 0, EOSID: 1, UnkID: 2, BOSID: -1}
}

func metaPieces() []sentencepiece.Piece {
	return []sentencepiece.Piece{
		{Piece: PadPiece, Type: sentencepiece.Control},
		{Piece: EOSPiece, Type: sentencepiece.Control},
		{Piece: UnkPiece, Type: sentencepiece.Unknown},
	}
}

// TrainUnigram learns a SentencePiece Unigram model from texts (one text is
// one spm input sentence) with T5's special pieces: 0 <pad> and 1 </s>
// (CONTROL), 2 <unk> (UNKNOWN), no bos. The normalizer spec is
// UnigramNormalizer(opt.Normalization); texts are normalized with exactly
// that spec before counting, so training and encoding see the same strings.
//
// The algorithm is sentencepiece's unigram_model_trainer.cc (Kudo 2018,
// "Subword Regularization", §3.2):
//
//  1. Seeds: every character of the normalized texts (score: its count),
//     then the substrings of at most MaxPieceLen runes that occur at least
//     MinFreq times and are right-branching (followed by at least two
//     different characters, the sentence end counting as one — the internal
//     nodes of spm's suffix tree), that contain ▁ only as their first rune
//     and do not mix Unicode scripts (spm IsValidSentencePiece with
//     split_by_unicode_script); score count×length; the SeedSize best by
//     score; all scores turned into log probabilities.
//  2. EM on the ▁-prefixed words weighted by their counts: E step =
//     forward-backward expected counts; M step drops pieces expected less
//     than 0.5 times and sets score = ψ(count) − ψ(Σ counts) (ψ the digamma
//     function: spm's Bayesian EM with a sparse prior). SubIterations EM
//     steps, then, while more than 1.1·VocabSize pieces remain, prune: a
//     piece whose own Viterbi segmentation is split, or that no Viterbi path
//     uses, goes; the others are ranked by the loss of likelihood when their
//     Viterbi count moves to their second-best segmentation, and the best
//     max(1.1·VocabSize, ShrinkingFactor·size) survive.
//  3. Final: every character (those dropped by EM get min score + k·0.0001),
//     then the best-scored pieces up to VocabSize−3; sorted by score
//     descending, ties by piece.
//
// On the demo corpus this reproduces spm_train (same pieces, scores within
// 1e-4; see the golden test, run against spm_train 0.1.97 with that
// version's pruning-loss bug emulated), including spm's quirk of crediting
// unknown-character nodes to trainer piece 0 (see trainerUnkID). Differences
// from spm_train: character_coverage is 1.0 (every character seen stays in
// the vocabulary, so no training text encodes to <unk>; spm's default
// 0.9995 maps the rarest to <unk>); sentences longer than spm's
// max_sentence_length are not dropped; arithmetic is float64 (spm uses
// float32), so pieces with near-equal scores can be ordered differently;
// ties are broken by piece text, not suffix-array position; the nmt_nfkc
// charsmap is rebuilt from Go's NFKC tables (see NMTNFKCRules);
// single-threaded; no user_defined_symbols, byte_fallback or split_digits.
//
// When the corpus has fewer useful pieces than VocabSize the model is
// smaller (spm_train fails instead; the returned model's TrainerSpec
// VocabSize is its real size). Errors: no text, an invalid option, or a
// VocabSize below the number of characters + 3.
func TrainUnigram(texts []string, opt UnigramOptions) (*sentencepiece.Model, error) {
	opt = opt.withDefaults()
	switch {
	case opt.VocabSize <= numMeta:
		return nil, fmt.Errorf("train unigram: field %q: %d, want > %d", "VocabSize", opt.VocabSize, numMeta)
	case opt.MaxPieceLen < 1:
		return nil, fmt.Errorf("train unigram: field %q: %d, want >= 1", "MaxPieceLen", opt.MaxPieceLen)
	case opt.SeedSize < 0:
		return nil, fmt.Errorf("train unigram: field %q: %d, want >= 0", "SeedSize", opt.SeedSize)
	case opt.ShrinkingFactor <= 0 || opt.ShrinkingFactor >= 1:
		return nil, fmt.Errorf("train unigram: field %q: %g, want in (0, 1)", "ShrinkingFactor", opt.ShrinkingFactor)
	case opt.SubIterations < 0:
		return nil, fmt.Errorf("train unigram: field %q: %d, want >= 1", "SubIterations", opt.SubIterations)
	}
	ns, err := UnigramNormalizer(opt.Normalization)
	if err != nil {
		return nil, fmt.Errorf("train unigram: field %q: %w", "Normalization", err)
	}
	normer, err := sentencepiece.New(metaPieces(), t5TrainerSpec(numMeta), ns)
	if err != nil {
		return nil, fmt.Errorf("train unigram: %w", err)
	}
	c := newCorpus()
	for _, t := range texts {
		norm, _ := normer.Normalize(t)
		c.add(norm)
	}
	if len(c.chars) == 0 {
		return nil, errors.New("train unigram: no text to train on (all texts empty after normalization)")
	}
	chars := sortedCounts(c.chars)
	if len(chars)+numMeta > opt.VocabSize {
		return nil, fmt.Errorf("train unigram: field %q: %d is too small for the %d characters of the corpus + %d specials", "VocabSize", opt.VocabSize, len(chars), numMeta)
	}
	pieces := seedPieces(chars, c, opt)
	fmt.Fprintf(opt.Log, "unigram: %d words, %d characters, %d seed pieces\n", len(c.words), len(chars), len(pieces))
	words := c.wordList()
	desired := int(float64(opt.VocabSize) * 1.1)
	for {
		for it := 0; it < opt.SubIterations; it++ {
			m := newLatticeModel(pieces)
			expected, obj, ntok := m.eStep(words)
			pieces = mStep(pieces, expected)
			fmt.Fprintf(opt.Log, "unigram: EM sub_iter=%d size=%d obj=%.6g num_tokens=%d\n", it, len(pieces), obj, ntok)
			if len(pieces) == 0 {
				return nil, errors.New("train unigram: EM dropped every piece (corpus too small)")
			}
		}
		if len(pieces) <= desired {
			break
		}
		next := newLatticeModel(pieces).prune(words, desired, opt.ShrinkingFactor, opt.legacyPruneSum)
		fmt.Fprintf(opt.Log, "unigram: pruned %d -> %d pieces\n", len(pieces), len(next))
		if len(next) >= len(pieces) {
			break // nothing left that can be pruned
		}
		pieces = next
	}
	final := finalize(newLatticeModel(pieces), chars, opt.VocabSize-numMeta)
	out := metaPieces()
	for _, p := range final {
		out = append(out, sentencepiece.Piece{Piece: p.piece, Score: float32(p.score), Type: sentencepiece.Normal})
	}
	m, err := sentencepiece.New(out, t5TrainerSpec(len(out)), ns)
	if err != nil {
		return nil, fmt.Errorf("train unigram: %w", err)
	}
	return m, nil
}

// count is a string and its number of occurrences.
type count struct {
	s string
	n int64
}

// sortedCounts orders a count map by count descending, then string.
func sortedCounts(m map[string]int64) []count {
	out := make([]count, 0, len(m))
	for s, n := range m {
		out = append(out, count{s, n})
	}
	slices.SortFunc(out, func(a, b count) int {
		if a.n != b.n {
			return cmp.Compare(b.n, a.n)
		}
		return strings.Compare(a.s, b.s)
	})
	return out
}

// wordKey is one ▁-prefixed word and whether it ended its sentence (then
// the character after it is the sentence boundary, not ▁).
type wordKey struct {
	w     string
	final bool
}

// corpus holds the character and word counts of the normalized texts.
type corpus struct {
	chars map[string]int64
	words map[wordKey]int64
}

func newCorpus() *corpus {
	return &corpus{chars: map[string]int64{}, words: map[wordKey]int64{}}
}

// add counts one normalized sentence: its characters, and its words split
// before every ▁ (sentencepiece SplitIntoWords).
func (c *corpus) add(norm string) {
	if norm == "" {
		return
	}
	for _, r := range norm {
		c.chars[string(r)]++
	}
	start := 0
	for i, r := range norm {
		if r == spaceSymbol && i > start {
			c.words[wordKey{norm[start:i], false}]++
			start = i
		}
	}
	c.words[wordKey{norm[start:], true}]++
}

// wordList merges the sentence-final flag away: EM sees each word once with
// its total count, ordered by count descending, then text.
func (c *corpus) wordList() []count {
	m := map[string]int64{}
	for k, n := range c.words {
		m[k.w] += n
	}
	return sortedCounts(m)
}

// scriptOf returns the Unicode script of r, Hiragana and Katakana folded into
// Han as sentencepiece does; "Common" when no script table has r.
func scriptOf(r rune, cache map[rune]string) string {
	if r < 0x80 {
		if unicode.IsLetter(r) {
			return "Latin"
		}
		return "Common"
	}
	if s, ok := cache[r]; ok {
		return s
	}
	s := "Common"
	for _, name := range scriptNames {
		if unicode.Is(unicode.Scripts[name], r) {
			s = name
			break
		}
	}
	if s == "Hiragana" || s == "Katakana" || r == 0x30FC {
		s = "Han"
	}
	cache[r] = s
	return s
}

var scriptNames = func() []string {
	names := make([]string, 0, len(unicode.Scripts))
	for n := range unicode.Scripts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}()

// seedPieces returns the seed vocabulary (step 1 of TrainUnigram) with log
// probability scores: characters first (count descending), then substrings
// (count×length descending, ties by text).
func seedPieces(chars []count, c *corpus, opt UnigramOptions) []scored {
	type stat struct {
		n         int64
		next      rune
		branching bool
	}
	const boundary = rune(-1)
	subs := map[string]*stat{}
	cache := map[rune]string{}
	for k, f := range c.words {
		r := []rune(k.w)
		for i := range r {
			prev := ""
			for l := 1; l <= opt.MaxPieceLen && i+l <= len(r); l++ {
				ch := r[i+l-1]
				if ch == spaceSymbol {
					if l > 1 {
						break // ▁ only as the first rune
					}
				} else {
					s := scriptOf(ch, cache)
					if prev != "" && s != prev {
						break // one Unicode script per piece
					}
					prev = s
				}
				if l < 2 {
					continue
				}
				next := spaceSymbol
				switch {
				case i+l < len(r):
					next = r[i+l]
				case k.final:
					next = boundary
				}
				sub := string(r[i : i+l])
				if st := subs[sub]; st == nil {
					subs[sub] = &stat{n: f, next: next}
				} else {
					st.n += f
					st.branching = st.branching || st.next != next
				}
			}
		}
	}
	var cands []count
	for s, st := range subs {
		if st.branching && st.n >= int64(opt.MinFreq) {
			cands = append(cands, count{s, st.n * int64(utf8.RuneCountInString(s))})
		}
	}
	cands = sortedCounts(toMap(cands))
	if len(cands) > opt.SeedSize {
		cands = cands[:opt.SeedSize]
	}
	all := append(slices.Clone(chars), cands...)
	var sum float64
	for _, x := range all {
		sum += float64(x.n)
	}
	logSum := math.Log(sum)
	out := make([]scored, len(all))
	for i, x := range all {
		out[i] = scored{x.s, math.Log(float64(x.n)) - logSum}
	}
	return out
}

func toMap(cs []count) map[string]int64 {
	m := make(map[string]int64, len(cs))
	for _, c := range cs {
		m[c.s] = c.n
	}
	return m
}

// eStep returns the expected count of every piece over words (each weighted
// by its count), the objective −Σ count·log Z / Σ count, and the number of
// Viterbi tokens (sentencepiece Trainer::RunEStep).
func (m *latticeModel) eStep(words []count) ([]float64, float64, int64) {
	expected := make([]float64, len(m.pieces))
	var all float64
	for _, w := range words {
		all += float64(w.n)
	}
	var obj float64
	var ntok int64
	var buf []node
	for _, w := range words {
		var z float64
		z, buf = m.marginal(w.s, float64(w.n), expected, buf)
		var ids []int
		ids, _, buf = m.viterbi(w.s, -1, buf)
		ntok += int64(len(ids))
		obj -= z / all
	}
	return expected, obj, ntok
}

// expectedFreqThreshold: pieces expected fewer times are dropped by the M step.
const expectedFreqThreshold = 0.5

// mStep keeps the pieces expected at least 0.5 times and scores them
// ψ(expected) − ψ(Σ expected) (sentencepiece Trainer::RunMStep).
func mStep(pieces []scored, expected []float64) []scored {
	var out []scored
	var sum float64
	for i, p := range pieces {
		if expected[i] < expectedFreqThreshold {
			continue
		}
		out = append(out, scored{p.piece, expected[i]})
		sum += expected[i]
	}
	logSum := digamma(sum)
	for i := range out {
		out[i].score = digamma(out[i].score) - logSum
	}
	return out
}

// digamma is ψ(x), computed as sentencepiece does: the recurrence
// ψ(x) = ψ(x+1) − 1/x up to x ≥ 7, then the asymptotic series at x − 1/2.
func digamma(x float64) float64 {
	var r float64
	for ; x < 7; x++ {
		r -= 1 / x
	}
	x -= 0.5
	xx := 1 / x
	xx2 := xx * xx
	xx4 := xx2 * xx2
	return r + math.Log(x) + xx2/24 - 7.0/960*xx4 + 31.0/8064*xx4*xx2 - 127.0/30720*xx4*xx4
}

// prune is sentencepiece Trainer::PruneSentencePieces (see TrainUnigram,
// step 2).
func (m *latticeModel) prune(words []count, desired int, shrink float64, legacySum bool) []scored {
	n := len(m.pieces)
	keep := make([]bool, n)
	alts := make([][]int, n)
	var buf []node
	for i, p := range m.pieces {
		keep[i] = true
		if utf8.RuneCountInString(p.piece) == 1 {
			continue // a single character has no second-best segmentation
		}
		var alt []int
		var altScore float64
		alt, altScore, buf = m.viterbi(p.piece, i, buf)
		if altScore > p.score {
			keep[i] = false // its own Viterbi path is split: safe to remove
			continue
		}
		alts[i] = alt
	}
	freq := make([]float64, n)
	var vsum float64
	for _, w := range words {
		var ids []int
		ids, _, buf = m.viterbi(w.s, -1, buf)
		vsum += float64(w.n)
		for _, id := range ids {
			freq[id] += float64(w.n)
		}
	}
	var sum float64
	for _, f := range freq {
		sum += f
	}
	logSum := math.Log(sum)
	type cand struct {
		i    int
		loss float64
	}
	var cands []cand
	var out []scored
	for i := range m.pieces {
		switch {
		case freq[i] == 0 || !keep[i]:
		case len(alts[i]) == 0:
			out = append(out, m.pieces[i])
		default:
			// The piece's Viterbi count freq[i] moves to each piece of its
			// alternative; F is the share of words that lose it (spm counts
			// one per occurrence, which equals freq[i]).
			f := freq[i] / vsum
			logProbSp := math.Log(freq[i]) - logSum
			nAlt := len(alts[i])
			if legacySum {
				nAlt = n
			}
			logSumAlt := math.Log(sum + freq[i]*float64(nAlt-1))
			var logProbAlt float64
			for _, a := range alts[i] {
				logProbAlt += math.Log(freq[a]+freq[i]) - logSumAlt
			}
			cands = append(cands, cand{i, f * (logProbSp - logProbAlt)})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if a.loss != b.loss {
			return cmp.Compare(b.loss, a.loss)
		}
		return cmp.Compare(a.i, b.i)
	})
	size := max(desired, int(shrink*float64(n)))
	for _, c := range cands {
		if len(out) >= size {
			break
		}
		out = append(out, m.pieces[c.i])
	}
	return out
}

// minScorePenaltyDelta spaces the scores of characters re-added at the end.
const minScorePenaltyDelta = 0.0001

// finalize is sentencepiece Trainer::FinalizeSentencePieces: every character,
// then the best pieces up to size, sorted by score descending then text.
func finalize(m *latticeModel, chars []count, size int) []scored {
	final := map[string]float64{}
	penalty := 0.0
	for _, c := range chars {
		if id, ok := m.index[c.s]; ok {
			final[c.s] = m.pieces[id].score
		} else {
			final[c.s] = m.minScore + penalty
			penalty += minScorePenaltyDelta
		}
	}
	sorted := slices.Clone(m.pieces)
	sortScored(sorted)
	for _, p := range sorted {
		if _, ok := final[p.piece]; ok {
			continue
		}
		if len(final) >= size {
			break
		}
		final[p.piece] = p.score
	}
	out := make([]scored, 0, len(final))
	for p, s := range final {
		out = append(out, scored{p, s})
	}
	sortScored(out)
	return out
}

// sortScored orders pieces by score descending, then by text. Scores are
// compared as the float32 the model stores, so pieces whose scores differ
// only by float64 rounding noise (equal expected counts) tie and are
// ordered by text.
func sortScored(s []scored) {
	slices.SortFunc(s, func(a, b scored) int {
		if sa, sb := float32(a.score), float32(b.score); sa != sb {
			return cmp.Compare(sb, sa)
		}
		return strings.Compare(a.piece, b.piece)
	})
}
