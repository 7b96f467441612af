package learn

import (
	"errors"
	"fmt"
	"io"

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
