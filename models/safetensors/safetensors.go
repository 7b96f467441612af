// Package safetensors reads and writes Hugging Face safetensors checkpoints.
//
// File layout (https://github.com/huggingface/safetensors, format section):
//
//	[8 bytes]  N, the header length, little-endian uint64
//	[N bytes]  UTF-8 JSON header: {"__metadata__":{...},"<name>":{"dtype":"F32","shape":[..],"data_offsets":[begin,end]},...}
//	[rest]     data section: raw little-endian, C-order (row-major) tensor bytes;
//	           data_offsets count from the start of the data section.
//
// Reading validates the file the way the reference Rust implementation does:
// every byte of the data section belongs to exactly one tensor, in offset order,
// and each tensor's byte length equals elements × dtype size. Writing follows the
// Rust serializer byte for byte (compact JSON, "__metadata__" first, tensors
// sorted by name in the header and in the data, header padded with spaces to a
// multiple of 8), so ReadFile → WriteFile reproduces a canonical file exactly.
//
// The package only moves bytes: it never prints and it keeps no global state.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/x448/float16"
)

// ErrInvalid is wrapped by every error about a malformed file, header or
// tensor (bad lengths, JSON, offsets, dtypes, shapes), so callers can tell a
// corrupt checkpoint from an I/O failure with errors.Is.
var ErrInvalid = errors.New("invalid safetensors")

// DType is a safetensors element type, spelled as in the header ("F32", "I64", ...).
type DType string

// Element types of the safetensors format (Rust crate `safetensors::Dtype`).
// Sub-byte float formats (F4, F6_*) are not supported.
const (
	BOOL   DType = "BOOL"
	U8     DType = "U8"
	I8     DType = "I8"
	F8E5M2 DType = "F8_E5M2"
	F8E4M3 DType = "F8_E4M3"
	F8E8M0 DType = "F8_E8M0"
	I16    DType = "I16"
	U16    DType = "U16"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I32    DType = "I32"
	U32    DType = "U32"
	F32    DType = "F32"
	I64    DType = "I64"
	U64    DType = "U64"
	F64    DType = "F64"
	C64    DType = "C64"
)

var dtypeSizes = map[DType]int{
	BOOL: 1, U8: 1, I8: 1, F8E5M2: 1, F8E4M3: 1, F8E8M0: 1,
	I16: 2, U16: 2, F16: 2, BF16: 2,
	I32: 4, U32: 4, F32: 4,
	I64: 8, U64: 8, F64: 8, C64: 8,
}

// Size returns the size of one element in bytes, or 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSizes[d] }

// Valid reports whether d is a dtype this package can read and write.
func (d DType) Valid() bool { return d.Size() > 0 }

// Tensor is one named tensor: Data holds NumElements()*DType.Size() raw
// little-endian bytes in C order (row-major, last axis fastest). A scalar has
// an empty Shape and one element.
//
// Tensors returned by ReadFile share one backing buffer per file; Data is
// capped, so appending to it copies.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// NumElements returns the product of Shape (1 for a scalar, 0 if any axis is 0).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// numElements is NumElements with overflow and negative-axis checks.
func numElements(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d != 0 && n > math.MaxInt/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// checkData verifies that t's dtype is known and that len(t.Data) matches
// shape × dtype size.
func (t *Tensor) checkData() error {
	if !t.DType.Valid() {
		return fmt.Errorf("tensor %q: unknown dtype %q: %w", t.Name, t.DType, ErrInvalid)
	}
	n, ok := numElements(t.Shape)
	if !ok || n > math.MaxInt/t.DType.Size() {
		return fmt.Errorf("tensor %q: invalid shape %v: %w", t.Name, t.Shape, ErrInvalid)
	}
	if want := n * t.DType.Size(); len(t.Data) != want {
		return fmt.Errorf("tensor %q: %s%v needs %d bytes, data has %d: %w",
			t.Name, t.DType, t.Shape, want, len(t.Data), ErrInvalid)
	}
	return nil
}

// Equal reports whether t and u hold the same dtype, shape and bytes (a
// tied weight saved twice, for instance).
func (t *Tensor) Equal(u *Tensor) bool {
	return t.DType == u.DType && slices.Equal(t.Shape, u.Shape) && bytes.Equal(t.Data, u.Data)
}

// Float32 decodes the data as float32 values in C order, converting F32, F16
// (IEEE 754 binary16, subnormals, ±Inf and NaN kept), BF16 (upper half of a
// float32) and F64 (rounded to nearest float32). Any other dtype, or data whose
// length disagrees with the shape, is an error naming the tensor.
func (t *Tensor) Float32() ([]float32, error) {
	if err := t.checkData(); err != nil {
		return nil, err
	}
	n := t.NumElements()
	out := make([]float32, n)
	b := t.Data
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case F16:
		for i := range out {
			out[i] = float16ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	default:
		return nil, fmt.Errorf("tensor %q: dtype %s cannot be converted to float32", t.Name, t.DType)
	}
	return out, nil
}

// FiniteFloat32 is Float32 for model weights: a NaN or infinite element (a
// diverged or corrupt checkpoint, which would otherwise surface as a NaN
// perplexity or score) is an error naming the tensor and the element.
func (t *Tensor) FiniteFloat32() ([]float32, error) {
	v, err := t.Float32()
	if err != nil {
		return nil, err
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("tensor %q: element %d of %d is %v: the weights are not finite (diverged training or a corrupt file)", t.Name, i, len(v), x)
		}
	}
	return v, nil
}

// Int64 decodes the data as int64 values in C order, converting I64, I32, I16,
// I8, U32, U16, U8 and BOOL (0 or 1). Any other dtype (floats, U64), or data
// whose length disagrees with the shape, is an error naming the tensor.
func (t *Tensor) Int64() ([]int64, error) {
	if err := t.checkData(); err != nil {
		return nil, err
	}
	out := make([]int64, t.NumElements())
	b := t.Data
	switch t.DType {
	case I64:
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case I32:
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	case U32:
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case I16:
		for i := range out {
			out[i] = int64(int16(binary.LittleEndian.Uint16(b[2*i:])))
		}
	case U16:
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case I8:
		for i := range out {
			out[i] = int64(int8(b[i]))
		}
	case U8:
		for i := range out {
			out[i] = int64(b[i])
		}
	case BOOL:
		for i := range out {
			if b[i] != 0 {
				out[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("tensor %q: dtype %s cannot be converted to int64", t.Name, t.DType)
	}
	return out, nil
}

// float16ToFloat32 converts an IEEE 754 binary16 bit pattern exactly.
func float16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		// Zero or subnormal: mant × 2^-24, exact in float32.
		v := float32(mant) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(v) | sign)
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// FromFloat32 builds an F32 tensor from v in C order. Shape is copied; v is
// not validated against it here (WriteFile, Float32 and Int64 report a
// mismatch, naming the tensor).
func FromFloat32(name string, shape []int, v []float32) *Tensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return &Tensor{Name: name, DType: F32, Shape: append([]int{}, shape...), Data: b}
}

// FromFloat32As builds a tensor of dtype dt (F32, BF16 or F16) from v in
// C order, rounding to nearest even as torch's .to(dtype) does; NaN stays
// NaN and values beyond F16's range become ±Inf. Other dtypes are an error.
// Shape is copied.
func FromFloat32As(name string, shape []int, v []float32, dt DType) (*Tensor, error) {
	var enc func(float32) uint16
	switch dt {
	case F32:
		return FromFloat32(name, shape, v), nil
	case BF16:
		enc = BFloat16Bits
	case F16:
		enc = Float16Bits
	default:
		return nil, fmt.Errorf("tensor %q: cannot encode float32 values as %s (want F32, BF16 or F16)", name, dt)
	}
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], enc(x))
	}
	return &Tensor{Name: name, DType: dt, Shape: append([]int{}, shape...), Data: b}, nil
}

// BFloat16Bits rounds x to the nearest bfloat16, ties to even (torch's
// float32 → bfloat16 cast; truncating would bias every weight toward 0).
// NaN stays a quiet NaN.
func BFloat16Bits(x float32) uint16 {
	b := math.Float32bits(x)
	if x != x {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// Float16Bits rounds x to the nearest IEEE binary16, ties to even; beyond
// its range (±65504) it is ±Inf.
func Float16Bits(x float32) uint16 { return float16.Fromfloat32(x).Bits() }

// FromInt64 builds an I64 tensor from v in C order; see FromFloat32.
func FromInt64(name string, shape []int, v []int64) *Tensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return &Tensor{Name: name, DType: I64, Shape: append([]int{}, shape...), Data: b}
}

// File is a parsed safetensors file. Metadata is the header's "__metadata__"
// object (an empty, non-nil map when the header has none); Tensors is keyed by name.
type File struct {
	Path     string
	Metadata map[string]string
	Tensors  map[string]*Tensor
}

// Names returns the tensor names in byte-wise sorted order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Tensors))
	for n := range f.Tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
