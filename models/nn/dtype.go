package nn

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"reflect"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/x448/float16"

	"github.com/ragforge/ragforge/models/safetensors"
)

// DType is the dtype a loader holds a checkpoint's weights in, with the
// values of HF from_pretrained's torch_dtype. The graphs always compute in
// float32: a weight held in bfloat16 or float16 is converted where it is
// used (Param, Widen), so only the resident weights shrink (half the
// memory) and the products keep running on the float32 GEMM.
//
//   - Auto keeps each tensor's stored dtype: BF16 stays bfloat16, F32
//     float32, F64 becomes float32; F16 stays float16 on a backend that has
//     float16 and becomes float32 (exactly) on one that has not (GoMLX
//     v0.26's pure-Go backend);
//   - Float32 converts every weight to float32 (training's master weights);
//   - BFloat16 and Float16 cast every weight, rounding to nearest even as
//     torch's .to(dtype) does.
//
// The zero value "" is Auto, the inference default; the training loaders
// (Load) ask for Float32.
type DType string

const (
	Auto     DType = "auto"
	Float32  DType = "float32"
	BFloat16 DType = "bfloat16"
	Float16  DType = "float16"
)

// DTypes lists the accepted names, for flag help and errors.
var DTypes = []DType{Auto, Float32, BFloat16, Float16}

// ParseDType reads a dtype name (Auto, Float32, BFloat16 or Float16); any
// other string, the empty one included, is an error naming the choices.
func ParseDType(s string) (DType, error) {
	for _, d := range DTypes {
		if s == string(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("dtype %q: want auto, float32, bfloat16 or float16", s)
}

// Check reports an unknown DType; the zero value is valid (Auto).
func (d DType) Check() error {
	if d == "" {
		return nil
	}
	_, err := ParseDType(string(d))
	return err
}

// CheckOn is Check plus the backend: Float16 needs a backend that has
// float16 (GoMLX v0.26's pure-Go backend has not; XLA has).
func (d DType) CheckOn(be backends.Backend) error {
	if err := d.Check(); err != nil {
		return err
	}
	if d == Float16 && !hasFloat16(be) {
		return fmt.Errorf("dtype float16: backend %s has no float16 (GoMLX v0.26's pure-Go backend); use bfloat16, float32 or auto, or an XLA backend", be.Name())
	}
	return nil
}

func hasFloat16(be backends.Backend) bool { return be.Capabilities().DTypes[dtypes.Float16] }

// Hold returns the GoMLX dtype a weight stored as st is held in under d on
// be (see DType). Errors: an unknown d, Float16 on a backend without it.
func (d DType) Hold(st safetensors.DType, be backends.Backend) (dtypes.DType, error) {
	if err := d.CheckOn(be); err != nil {
		return dtypes.InvalidDType, err
	}
	switch d {
	case BFloat16:
		return dtypes.BFloat16, nil
	case Float16:
		return dtypes.Float16, nil
	case Auto, "":
		switch {
		case st == safetensors.BF16:
			return dtypes.BFloat16, nil
		case st == safetensors.F16 && hasFloat16(be):
			return dtypes.Float16, nil
		}
	}
	return dtypes.Float32, nil
}

// WeightTensor builds the GoMLX tensor of a checkpoint weight held as dt
// (Float32, BFloat16 or Float16; DType.Hold), shaped as t. A weight already
// stored in dt is copied bit for bit; others go through float32, rounding
// to nearest even (safetensors.FromFloat32As). A NaN or infinite element is
// an error naming the tensor and the element.
func WeightTensor(t *safetensors.Tensor, dt dtypes.DType) (*tensors.Tensor, error) {
	var want safetensors.DType
	switch dt {
	case dtypes.Float32:
		v, err := t.FiniteFloat32()
		if err != nil {
			return nil, err
		}
		return tensors.FromFlatDataAndDimensions(v, t.Shape...), nil
	case dtypes.BFloat16:
		want = safetensors.BF16
	case dtypes.Float16:
		want = safetensors.F16
	default:
		return nil, fmt.Errorf("tensor %q: weights cannot be held as %s (want float32, bfloat16 or float16)", t.Name, dt)
	}
	src := t
	if t.DType != want {
		v, err := t.FiniteFloat32()
		if err != nil {
			return nil, err
		}
		if src, err = safetensors.FromFloat32As(t.Name, t.Shape, v, want); err != nil {
			return nil, err
		}
	}
	if len(src.Data) != 2*src.NumElements() {
		return nil, fmt.Errorf("tensor %q: %s%v needs %d bytes, data has %d: %w", t.Name, src.DType, src.Shape, 2*src.NumElements(), len(src.Data), safetensors.ErrInvalid)
	}
	// All-ones exponent: ±Inf or NaN (stored so, or a cast beyond F16's range).
	exp := uint16(0x7c00)
	if want == safetensors.BF16 {
		exp = 0x7f80
	}
	for i := range src.NumElements() {
		if binary.LittleEndian.Uint16(src.Data[2*i:])&exp == exp {
			v, _ := src.Float32()
			return nil, fmt.Errorf("tensor %q: element %d of %d is %v as %s: the weights are not finite (diverged training, a corrupt file, or beyond the dtype's range)", t.Name, i, src.NumElements(), v[i], want)
		}
	}
	out := tensors.FromShape(shapes.Make(dt, t.Shape...))
	if err := out.MutableBytes(func(b []byte) { copy(b, src.Data) }); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	return out, nil
}

// CastTensor returns a float32, bfloat16 or float16 tensor t held as dt
// (itself when it already is), rounding to nearest even; the bench casts
// randomly initialised float32 weights with it. Errors: other dtypes.
func CastTensor(t *tensors.Tensor, dt dtypes.DType) (*tensors.Tensor, error) {
	if t.DType() == dt {
		return t, nil
	}
	v, err := TensorFloat32(t)
	if err != nil {
		return nil, err
	}
	return WeightTensor(safetensors.FromFloat32("weight", t.Shape().Dimensions, v), dt)
}

// TensorFloat32 copies a float32, bfloat16 or float16 tensor's values to
// the host as float32 (exact widening).
func TensorFloat32(t *tensors.Tensor) ([]float32, error) {
	switch t.DType() {
	case dtypes.Float32:
		return tensors.CopyFlatData[float32](t)
	case dtypes.BFloat16:
		return widen[bfloat16.BFloat16](t)
	case dtypes.Float16:
		return widen[float16.Float16](t)
	}
	return nil, fmt.Errorf("tensor %s: not a float32, bfloat16 or float16 weight", t.Shape())
}

// widen copies t's half-precision values (of Go type T) to the host as
// float32.
func widen[T interface {
	bfloat16.BFloat16 | float16.Float16
	Float32() float32
}](t *tensors.Tensor) ([]float32, error) {
	v, err := tensors.CopyFlatData[T](t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x.Float32()
	}
	return out, nil
}

// Widen returns x converted to float32 (x itself when it already is): a
// weight held in bfloat16 or float16 enters the float32 computation here.
func Widen(x *graph.Node) *graph.Node {
	if x.DType() == dtypes.Float32 {
		return x
	}
	return graph.ConvertDType(x, dtypes.Float32)
}

// LoadWeight is the tensor a loader makes a variable of for checkpoint
// weight t under d on be: DType.Hold, then WeightTensor. Errors name the
// tensor.
func LoadWeight(t *safetensors.Tensor, d DType, be backends.Backend) (*tensors.Tensor, error) {
	dt, err := d.Hold(t.DType, be)
	if err != nil {
		return nil, err
	}
	return WeightTensorOn(be, t, dt)
}

// WeightTensorOn is WeightTensor written straight into a shared buffer of
// be when the checkpoint already stores dt (F32 held as float32, BF16 as
// bfloat16, F16 as float16): the bytes are copied once and checked in
// place. A host tensor would be copied to the backend on first use and
// its host copy freed only by a later GC, so a loaded model briefly held
// its weights twice over the file's bytes. Other cases, and any error
// (which WeightTensor then names), take WeightTensor's path.
func WeightTensorOn(be backends.Backend, t *safetensors.Tensor, dt dtypes.DType) (*tensors.Tensor, error) {
	same := false
	switch dt {
	case dtypes.Float32:
		same = t.DType == safetensors.F32
	case dtypes.BFloat16:
		same = t.DType == safetensors.BF16
	case dtypes.Float16:
		same = t.DType == safetensors.F16
	}
	n := t.NumElements()
	if be == nil || !be.HasSharedBuffers() || !same || n <= 0 || len(t.Data) != n*t.DType.Size() {
		return WeightTensor(t, dt)
	}
	buf, flat, err := be.NewSharedBuffer(0, shapes.Make(dt, t.Shape...))
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	copy(flatBytes(flat), t.Data)
	if !finite(flat) {
		_ = be.BufferFinalize(buf)
		return WeightTensor(t, dt) // names the first non-finite element
	}
	return tensors.FromBuffer(be, buf)
}

// finite reports whether every element of a float32, bfloat16 or float16
// flat slice is finite.
func finite(flat any) bool {
	switch v := flat.(type) {
	case []float32:
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return false
			}
		}
	case []bfloat16.BFloat16:
		for _, x := range v {
			if uint16(x)&0x7f80 == 0x7f80 {
				return false
			}
		}
	case []float16.Float16:
		for _, x := range v {
			if uint16(x)&0x7c00 == 0x7c00 {
				return false
			}
		}
	default:
		return false
	}
	return true
}

// NewWeight builds a float32, bfloat16 or float16 tensor of shape whose
// element i (C order) is at(i) rounded to nearest even, calling at once per
// element in order (a random init draws its sequence unchanged) without a
// float32 copy of the whole tensor: a model initialised at a real shape in
// bfloat16 never holds its float32 size.
//
// On a backend with shared buffers (the CPU ones; be may be nil) the
// values are written straight into the backend's buffer. A host tensor
// would be copied there on first use and its host copy freed only by the
// next GC: at bge-m3's shape that doubled peak RSS (4.3 GiB for 2.2 GiB
// of weights, measured with `bench models --only bge-m3 --skip-train`).
func NewWeight(be backends.Backend, shape []int, dt dtypes.DType, at func(i int) float32) (*tensors.Tensor, error) {
	var enc func(float32) uint16
	switch dt {
	case dtypes.Float32:
	case dtypes.BFloat16:
		enc = safetensors.BFloat16Bits
	case dtypes.Float16:
		enc = safetensors.Float16Bits
	default:
		return nil, fmt.Errorf("weights cannot be held as %s (want float32, bfloat16 or float16)", dt)
	}
	fill := func(b []byte) {
		if enc == nil {
			for i := range len(b) / 4 {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(at(i)))
			}
			return
		}
		for i := range len(b) / 2 {
			binary.LittleEndian.PutUint16(b[2*i:], enc(at(i)))
		}
	}
	shape2 := shapes.Make(dt, shape...)
	if be != nil && be.HasSharedBuffers() && shape2.Size() > 0 {
		buf, flat, err := be.NewSharedBuffer(0, shape2)
		if err != nil {
			return nil, fmt.Errorf("weight %v: %w", shape2, err)
		}
		fill(flatBytes(flat))
		return tensors.FromBuffer(be, buf)
	}
	t := tensors.FromShape(shape2)
	err := t.MutableBytes(fill)
	return t, err
}

// flatBytes is the memory of a backend's flat slice ([]float32,
// []bfloat16.BFloat16, …) as bytes, as tensors.Tensor.MutableBytes gives it.
func flatBytes(flat any) []byte {
	v := reflect.ValueOf(flat)
	if v.Len() == 0 {
		return nil
	}
	e := v.Index(0)
	return unsafe.Slice((*byte)(e.Addr().UnsafePointer()), uintptr(v.Len())*e.Type().Size())
}

// HeldBytes sums the bytes of the variables vars (a context's
// IterVariables, a model's weights) by dtype: what the weights hold in
// memory (a BF16-held model shows half its float32 size).
func HeldBytes(vars iter.Seq[*context.Variable]) map[dtypes.DType]int64 {
	out := map[dtypes.DType]int64{}
	for v := range vars {
		s := v.Shape()
		out[s.DType] += int64(s.Memory())
	}
	return out
}

// CastVariables re-holds every float32, bfloat16 or float16 variable of
// vars as dt (DType.Hold's result), one at a time, freeing each old value
// as it goes; for models built in memory (a bench shape after its training
// step) that inference should hold like a loaded checkpoint. Errors name
// the variable.
func CastVariables(vars iter.Seq[*context.Variable], dt dtypes.DType) error {
	for v := range vars {
		switch v.Shape().DType {
		case dtypes.Float32, dtypes.BFloat16, dtypes.Float16:
		default:
			continue
		}
		t, err := v.Value()
		if err != nil {
			return fmt.Errorf("variable %s: %w", v.ScopeAndName(), err)
		}
		c, err := CastTensor(t, dt)
		if err != nil {
			return fmt.Errorf("variable %s: %w", v.ScopeAndName(), err)
		}
		if c != t {
			if err := v.SetValue(c); err != nil {
				return fmt.Errorf("variable %s: %w", v.ScopeAndName(), err)
			}
		}
	}
	return nil
}
