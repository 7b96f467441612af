// Package sentencepiece implements a SentencePiece Unigram tokenizer that reads
// a serialized sentencepiece.ModelProto (spiece.model) without generated code,
// applies its precompiled-charsmap normalizer, segments with the Unigram
// Viterbi algorithm (sentencepiece v0.1.9x unigram_model.cc), and maps pieces
// back to byte spans of the original text. T5 wraps a Model with the HF
// T5Tokenizer conventions (eos, sentinels, added tokens, save/load).
package sentencepiece

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// unkPenalty is subtracted from the minimum piece score to score an unknown
// character (sentencepiece kUnkPenalty).
const unkPenalty = 10.0

// Model is a SentencePiece Unigram model. It is safe for concurrent use.
type Model struct {
	pieces     []Piece
	trainer    TrainerSpec
	normalizer NormalizerSpec
	raw        []byte // serialized ModelProto, as read or as marshalled

	charsmap    *charsmap
	pieceToID   map[string]int // every piece, any type
	trie        []trieNode     // NORMAL, USER_DEFINED, UNUSED pieces: lattice candidates
	userDefined map[string]int
	maxPieceLen int // bytes
	maxUserLen  int
	byteIDs     [256]int // id of <0xXX>, -1 if absent
	unkID       int
	minScore    float32
	maxScore    float32
}

// Parse decodes a serialized ModelProto. Only unigram models are supported.
func Parse(buf []byte) (*Model, error) {
	pieces, ts, ns, err := parseModelProto(buf)
	if err != nil {
		return nil, fmt.Errorf("sentencepiece: parse ModelProto: %w", err)
	}
	m, err := New(pieces, ts, ns)
	if err != nil {
		return nil, err
	}
	m.raw = append([]byte(nil), buf...)
	return m, nil
}

// Load reads and parses a spiece.model file.
func Load(path string) (*Model, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sentencepiece: %w", err)
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("load %s: file is empty (0 bytes), want a SentencePiece model (ModelProto)", path)
	}
	m, err := Parse(buf)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return m, nil
}

// New builds a Model from its parts (for example read from an HF
// tokenizer.json). trainer.UnkID must name a piece of type Unknown.
func New(pieces []Piece, trainer TrainerSpec, norm NormalizerSpec) (*Model, error) {
	if trainer.ModelType != 1 {
		return nil, fmt.Errorf("sentencepiece: model_type %d not supported (only 1 = UNIGRAM)", trainer.ModelType)
	}
	m := &Model{
		pieces:      pieces,
		trainer:     trainer,
		normalizer:  norm,
		pieceToID:   make(map[string]int, len(pieces)),
		trie:        []trieNode{{id: -1}},
		userDefined: map[string]int{},
		unkID:       int(trainer.UnkID),
		minScore:    float32(math.MaxFloat32),
		maxScore:    -float32(math.MaxFloat32),
	}
	for i := range m.byteIDs {
		m.byteIDs[i] = -1
	}
	cm, err := parseCharsmap(norm.PrecompiledCharsmap)
	if err != nil {
		return nil, fmt.Errorf("sentencepiece: normalizer_spec: %w", err)
	}
	m.charsmap = cm
	for id, p := range pieces {
		if p.Piece == "" {
			return nil, fmt.Errorf("sentencepiece: piece %d: field %q: empty", id, "piece")
		}
		if _, dup := m.pieceToID[p.Piece]; dup {
			return nil, fmt.Errorf("sentencepiece: piece %d: field %q: duplicate %q", id, "piece", p.Piece)
		}
		m.pieceToID[p.Piece] = id
		switch p.Type {
		case Normal, UserDefined, Unused:
			m.insert(p.Piece, id)
			m.maxPieceLen = max(m.maxPieceLen, len(p.Piece))
			if p.Type == UserDefined {
				m.userDefined[p.Piece] = id
				m.maxUserLen = max(m.maxUserLen, len(p.Piece))
			}
		case Byte:
			if len(p.Piece) == 6 && strings.HasPrefix(p.Piece, "<0x") {
				if v, err := strconv.ParseUint(p.Piece[3:5], 16, 8); err == nil {
					m.byteIDs[v] = id
				}
			}
		}
		if p.Type == Normal {
			m.minScore = min(m.minScore, p.Score)
			m.maxScore = max(m.maxScore, p.Score)
		}
	}
	if m.unkID < 0 || m.unkID >= len(pieces) || pieces[m.unkID].Type != Unknown {
		return nil, fmt.Errorf("sentencepiece: trainer_spec: field %q: id %d is not an UNKNOWN piece", "unk_id", m.unkID)
	}
	return m, nil
}

// trieNode is a node of the byte trie over matchable pieces; children are
// kept sorted by label.
type trieNode struct {
	labels []byte
	kids   []int32
	id     int32 // piece id ending here, -1 if none
}

func (n *trieNode) child(b byte) int32 {
	for i, l := range n.labels {
		if l == b {
			return n.kids[i]
		}
	}
	return -1
}

func (m *Model) insert(piece string, id int) {
	node := int32(0)
	for i := 0; i < len(piece); i++ {
		next := m.trie[node].child(piece[i])
		if next < 0 {
			next = int32(len(m.trie))
			m.trie = append(m.trie, trieNode{id: -1})
			m.trie[node].labels = append(m.trie[node].labels, piece[i])
			m.trie[node].kids = append(m.trie[node].kids, next)
		}
		node = next
	}
	m.trie[node].id = int32(id)
}

// Bytes returns the serialized ModelProto (the original file when parsed).
func (m *Model) Bytes() []byte {
	if m.raw == nil {
		m.raw = marshalModelProto(m.pieces, m.trainer, m.normalizer)
	}
	return m.raw
}

// Size is the number of pieces (the SentencePiece vocabulary size).
func (m *Model) Size() int { return len(m.pieces) }

// Pieces returns the vocabulary (not a copy; do not modify).
func (m *Model) Pieces() []Piece { return m.pieces }

// Trainer returns the trainer spec; Normalizer the normalizer spec.
func (m *Model) Trainer() TrainerSpec       { return m.trainer }
func (m *Model) Normalizer() NormalizerSpec { return m.normalizer }

// PieceToID returns the id of a piece (any type).
func (m *Model) PieceToID(p string) (int, bool) { id, ok := m.pieceToID[p]; return id, ok }

// IDToPiece returns the piece of id, or "" when out of range.
func (m *Model) IDToPiece(id int) string {
	if id < 0 || id >= len(m.pieces) {
		return ""
	}
	return m.pieces[id].Piece
}

// UnkID, EOSID, PadID, BOSID return the trainer-spec special ids (-1 = none).
func (m *Model) UnkID() int { return m.unkID }
func (m *Model) EOSID() int { return int(m.trainer.EOSID) }
func (m *Model) PadID() int { return int(m.trainer.PadID) }
func (m *Model) BOSID() int { return int(m.trainer.BOSID) }

// IsControl reports whether id is a CONTROL piece (pad, eos, bos).
func (m *Model) IsControl(id int) bool {
	return id >= 0 && id < len(m.pieces) && m.pieces[id].Type == Control
}

func (m *Model) userDefinedPrefix(s string) int {
	if len(m.userDefined) == 0 {
		return 0
	}
	for l := min(len(s), m.maxUserLen); l > 0; l-- {
		if _, ok := m.userDefined[s[:l]]; ok {
			return l
		}
	}
	return 0
}

// Token is one piece of an encoding.
type Token struct {
	ID int
	// Piece is the normalized text the token covers (with ▁ for spaces); for
	// an unknown token it is the normalized unknown text, not "<unk>".
	Piece string
	// Begin, End are [begin, end) UTF-8 byte offsets in the original text
	// (sentencepiece SentencePieceText begin/end). A ▁ added by
	// add_dummy_prefix covers an empty span.
	Begin, End int
}

// Encode segments text (normalize, then Unigram Viterbi) and returns the
// pieces with their byte spans in text. Consecutive unknown characters merge
// into one unknown token; with byte_fallback they become <0xXX> byte pieces.
// Literal "</s>", "<pad>" or "<extra_id_0>" in text are plain text here.
func (m *Model) Encode(text string) []Token {
	norm, n2o := m.Normalize(text)
	if norm == "" {
		return nil
	}
	type node struct {
		score float32
		start int
		id    int
		set   bool
	}
	best := make([]node, len(norm)+1)
	best[0].set = true
	unkScore := m.minScore - unkPenalty
	for start := 0; start < len(norm); start++ {
		if !best[start].set {
			continue
		}
		base := best[start].score
		_, mblen := utf8.DecodeRuneInString(norm[start:])
		hasSingle := false
		for end, tn := start+1, int32(0); end <= len(norm); end++ {
			tn = m.trie[tn].child(norm[end-1])
			if tn < 0 {
				break
			}
			id := int(m.trie[tn].id)
			if id < 0 {
				continue
			}
			p := m.pieces[id]
			if p.Type == Unused {
				continue
			}
			// As in sentencepiece's EncodeOptimized, the candidate is
			// computed in double precision (the user-defined branch makes the
			// score a double) and compared with the stored float: this
			// decides exact float32 ties.
			score := float64(p.Score)
			if p.Type == UserDefined {
				score = float64(end-start)*float64(m.maxScore) - 0.1
			}
			cand := score + float64(base)
			if t := &best[end]; !t.set || cand > float64(t.score) {
				*t = node{score: float32(cand), start: start, id: id, set: true}
			}
			if end-start == mblen {
				hasSingle = true
			}
		}
		if !hasSingle {
			cand := base + unkScore
			if t := &best[start+mblen]; !t.set || cand > t.score {
				*t = node{score: cand, start: start, id: m.unkID, set: true}
			}
		}
	}
	var rev []Token
	for end := len(norm); end > 0; {
		nd := best[end]
		rev = append(rev, Token{ID: nd.id, Begin: nd.start, End: end})
		end = nd.start
	}
	out := make([]Token, 0, len(rev))
	for i := len(rev) - 1; i >= 0; i-- {
		t := rev[i]
		if k := len(out) - 1; k >= 0 && t.ID == m.unkID && out[k].ID == m.unkID {
			out[k].End = t.End
			continue
		}
		out = append(out, t)
	}
	// Begin/End are normalized offsets so far: map them to the original text.
	final := make([]Token, 0, len(out))
	for _, t := range out {
		piece := norm[t.Begin:t.End]
		if t.ID == m.unkID && m.trainer.ByteFallback {
			for i := 0; i < len(piece); i++ {
				ob, oe := n2o[t.Begin+i], n2o[t.Begin+i+1]
				final = append(final, Token{ID: m.byteIDs[piece[i]], Piece: m.IDToPiece(m.byteIDs[piece[i]]), Begin: ob, End: oe})
			}
			continue
		}
		final = append(final, Token{ID: t.ID, Piece: piece, Begin: n2o[t.Begin], End: n2o[t.End]})
	}
	return final
}

// EncodeIDs returns only the ids of Encode(text).
func (m *Model) EncodeIDs(text string) []int {
	toks := m.Encode(text)
	ids := make([]int, len(toks))
	for i, t := range toks {
		ids[i] = t.ID
	}
	return ids
}

// unkSurface is what an unknown id decodes to (sentencepiece kDefaultUnknownSymbol).
const unkSurface = " \u2047 "

// Decode follows sentencepiece DecodeIds: control ids vanish, unknown ids
// become " ⁇ ", byte pieces are reassembled into UTF-8, ▁ becomes a space and
// the ▁ of the first piece (the dummy prefix) is dropped. Ids out of range
// are skipped.
func (m *Model) Decode(ids []int) string {
	var sb strings.Builder
	var bytes []byte
	flush := func() {
		for len(bytes) > 0 {
			r, n := utf8.DecodeRune(bytes)
			if r == utf8.RuneError && n <= 1 {
				sb.WriteString("\uFFFD")
			} else {
				sb.Write(bytes[:n])
			}
			bytes = bytes[n:]
		}
	}
	bos := true
	for _, id := range ids {
		if id < 0 || id >= len(m.pieces) {
			continue
		}
		p := m.pieces[id]
		switch p.Type {
		case Control:
			continue
		case Byte:
			if v, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(p.Piece, "<0x"), ">"), 16, 8); err == nil {
				bytes = append(bytes, byte(v))
				bos = false
				continue
			}
		}
		flush()
		if p.Type == Unknown {
			sb.WriteString(unkSurface)
			bos = false
			continue
		}
		s := p.Piece
		if bos && m.normalizer.AddDummyPrefix {
			s = strings.TrimPrefix(s, spaceSymbol)
		}
		bos = false
		sb.WriteString(strings.ReplaceAll(s, spaceSymbol, " "))
	}
	flush()
	return sb.String()
}
