package sentencepiece

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// PieceType is sentencepiece.ModelProto.SentencePiece.Type.
type PieceType int32

// Piece types, numbered as in sentencepiece_model.proto.
const (
	Normal      PieceType = 1
	Unknown     PieceType = 2
	Control     PieceType = 3
	UserDefined PieceType = 4
	Unused      PieceType = 5
	Byte        PieceType = 6
)

// Piece is one vocabulary entry: its surface text (with ▁ for spaces), its
// unigram log-probability score, and its type.
type Piece struct {
	Piece string
	Score float32
	Type  PieceType
}

// TrainerSpec holds the trainer_spec fields the encoder needs. Defaults (see
// DefaultTrainerSpec) are the proto defaults of sentencepiece_model.proto.
type TrainerSpec struct {
	ModelType    int32 // 1 = UNIGRAM, 2 = BPE, 3 = WORD, 4 = CHAR
	VocabSize    int32
	UnkID        int32
	BOSID        int32
	EOSID        int32
	PadID        int32
	ByteFallback bool
}

// DefaultTrainerSpec returns the proto defaults: unigram, unk 0, bos 1, eos 2, pad -1.
func DefaultTrainerSpec() TrainerSpec {
	return TrainerSpec{ModelType: 1, VocabSize: 8000, UnkID: 0, BOSID: 1, EOSID: 2, PadID: -1}
}

// NormalizerSpec holds normalizer_spec. Defaults (DefaultNormalizerSpec) are the
// proto defaults: add_dummy_prefix, remove_extra_whitespaces and
// escape_whitespaces all true.
type NormalizerSpec struct {
	Name                   string
	PrecompiledCharsmap    []byte
	AddDummyPrefix         bool
	RemoveExtraWhitespaces bool
	EscapeWhitespaces      bool
}

// DefaultNormalizerSpec returns the proto defaults.
func DefaultNormalizerSpec() NormalizerSpec {
	return NormalizerSpec{AddDummyPrefix: true, RemoveExtraWhitespaces: true, EscapeWhitespaces: true}
}

// field walks the fields of one serialized message, calling fn for each with its
// number, wire type and raw value (varint/fixed values are in v, bytes in b).
func fields(msg []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("bad tag: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		var v uint64
		var b []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(msg)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(msg)
			v = uint64(x)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(msg)
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(msg)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		msg = msg[n:]
		if err := fn(num, typ, v, b); err != nil {
			return err
		}
	}
	return nil
}

func wantType(name string, got, want protowire.Type) error {
	if got != want {
		return fmt.Errorf("field %q: wire type %d, want %d", name, got, want)
	}
	return nil
}

// parseModelProto decodes a serialized sentencepiece.ModelProto by hand.
func parseModelProto(buf []byte) ([]Piece, TrainerSpec, NormalizerSpec, error) {
	var pieces []Piece
	ts := DefaultTrainerSpec()
	ns := DefaultNormalizerSpec()
	err := fields(buf, func(num protowire.Number, typ protowire.Type, _ uint64, b []byte) error {
		switch num {
		case 1: // pieces
			if err := wantType("pieces", typ, protowire.BytesType); err != nil {
				return err
			}
			p := Piece{Type: Normal}
			err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
				switch num {
				case 1:
					if err := wantType("piece", typ, protowire.BytesType); err != nil {
						return err
					}
					p.Piece = string(b)
				case 2:
					if err := wantType("score", typ, protowire.Fixed32Type); err != nil {
						return err
					}
					p.Score = math.Float32frombits(uint32(v))
				case 3:
					if err := wantType("type", typ, protowire.VarintType); err != nil {
						return err
					}
					p.Type = PieceType(int32(v))
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("piece %d: %w", len(pieces), err)
			}
			pieces = append(pieces, p)
		case 2: // trainer_spec
			if err := wantType("trainer_spec", typ, protowire.BytesType); err != nil {
				return err
			}
			err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
				if typ != protowire.VarintType {
					return nil
				}
				switch num {
				case 3:
					ts.ModelType = int32(v)
				case 4:
					ts.VocabSize = int32(v)
				case 35:
					ts.ByteFallback = v != 0
				case 40:
					ts.UnkID = int32(v)
				case 41:
					ts.BOSID = int32(v)
				case 42:
					ts.EOSID = int32(v)
				case 43:
					ts.PadID = int32(v)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("trainer_spec: %w", err)
			}
		case 3: // normalizer_spec
			if err := wantType("normalizer_spec", typ, protowire.BytesType); err != nil {
				return err
			}
			err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
				switch num {
				case 1:
					ns.Name = string(b)
				case 2:
					ns.PrecompiledCharsmap = append([]byte(nil), b...)
				case 3:
					ns.AddDummyPrefix = v != 0
				case 4:
					ns.RemoveExtraWhitespaces = v != 0
				case 5:
					ns.EscapeWhitespaces = v != 0
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("normalizer_spec: %w", err)
			}
		}
		return nil
	})
	return pieces, ts, ns, err
}

// marshalModelProto writes the subset of ModelProto this package understands
// (pieces, the trainer_spec fields above, normalizer_spec). It is used when a
// model was built from a tokenizer.json and must be saved as spiece.model.
func marshalModelProto(pieces []Piece, ts TrainerSpec, ns NormalizerSpec) []byte {
	var out []byte
	for _, p := range pieces {
		var m []byte
		m = protowire.AppendTag(m, 1, protowire.BytesType)
		m = protowire.AppendString(m, p.Piece)
		m = protowire.AppendTag(m, 2, protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, math.Float32bits(p.Score))
		if p.Type != Normal {
			m = protowire.AppendTag(m, 3, protowire.VarintType)
			m = protowire.AppendVarint(m, uint64(p.Type))
		}
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, m)
	}
	var t []byte
	varint := func(num protowire.Number, v int64) {
		t = protowire.AppendTag(t, num, protowire.VarintType)
		t = protowire.AppendVarint(t, uint64(v))
	}
	varint(3, int64(ts.ModelType))
	varint(4, int64(ts.VocabSize))
	varint(35, b2i(ts.ByteFallback))
	varint(40, int64(ts.UnkID))
	varint(41, int64(ts.BOSID))
	varint(42, int64(ts.EOSID))
	varint(43, int64(ts.PadID))
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendBytes(out, t)
	var n []byte
	n = protowire.AppendTag(n, 1, protowire.BytesType)
	n = protowire.AppendString(n, ns.Name)
	if len(ns.PrecompiledCharsmap) > 0 {
		n = protowire.AppendTag(n, 2, protowire.BytesType)
		n = protowire.AppendBytes(n, ns.PrecompiledCharsmap)
	}
	for i, b := range []bool{ns.AddDummyPrefix, ns.RemoveExtraWhitespaces, ns.EscapeWhitespaces} {
		n = protowire.AppendTag(n, protowire.Number(3+i), protowire.VarintType)
		n = protowire.AppendVarint(n, uint64(b2i(b)))
	}
	out = protowire.AppendTag(out, 3, protowire.BytesType)
	out = protowire.AppendBytes(out, n)
	return out
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
