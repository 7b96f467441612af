package nn

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/ragforge/ragforge/models/backend"
	"github.com/ragforge/ragforge/models/safetensors"
)

func TestParseDType(t *testing.T) {
	for _, s := range []string{"auto", "float32", "bfloat16", "float16"} {
		if d, err := ParseDType(s); err != nil || string(d) != s {
			t.Fatalf("ParseDType(%q) = %q, %v", s, d, err)
		}
	}
	for _, s := range []string{"", "bf16", "fp16", "Float32", "half"} {
		if _, err := ParseDType(s); err == nil {
			t.Fatalf("ParseDType(%q): no error", s)
		}
	}
}

// Hold: auto keeps BF16, widens F16 on a backend without float16 and F64;
// the casts ignore the stored dtype.
func TestHold(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d    DType
		st   safetensors.DType
		want dtypes.DType
	}{
		{Auto, safetensors.BF16, dtypes.BFloat16},
		{Auto, safetensors.F32, dtypes.Float32},
		{Auto, safetensors.F64, dtypes.Float32},
		{Auto, safetensors.F16, dtypes.Float32}, // the go backend has no float16
		{"", safetensors.BF16, dtypes.BFloat16},
		{Float32, safetensors.BF16, dtypes.Float32},
		{BFloat16, safetensors.F32, dtypes.BFloat16},
		{BFloat16, safetensors.F16, dtypes.BFloat16},
	} {
		got, err := tc.d.Hold(tc.st, be)
		if err != nil || got != tc.want {
			t.Errorf("%q.Hold(%s) = %s, %v; want %s", tc.d, tc.st, got, err, tc.want)
		}
	}
	if _, err := Float16.Hold(safetensors.F16, be); err == nil || !strings.Contains(err.Error(), "no float16") {
		t.Fatalf("float16 on the go backend: %v", err)
	}
}

// WeightTensor: a BF16 weight is copied bit for bit; an F32 one is rounded
// to nearest even (hand-checked bit patterns); an F16 one is held exactly;
// a non-finite element is refused by tensor and index.
func TestWeightTensor(t *testing.T) {
	// 1 + 2^-8 is halfway between bfloat16 1 and 1+2^-7: ties to even → 1.
	// 1 + 3·2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even → 1+2^-6.
	// 1 + 2^-8 + 2^-20 is above the half: rounds up to 1+2^-7.
	in := []float32{1, 1 + 1.0/256, 1 + 3.0/256, 1 + 1.0/256 + 1.0/(1<<20), -2.5}
	want := []float32{1, 1, 1 + 1.0/64, 1 + 1.0/128, -2.5}
	bf, err := WeightTensor(safetensors.FromFloat32("w", []int{5}, in), dtypes.BFloat16)
	if err != nil {
		t.Fatal(err)
	}
	if bf.DType() != dtypes.BFloat16 {
		t.Fatalf("dtype %s", bf.DType())
	}
	got, err := TensorFloat32(bf)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("bfloat16 of %v = %v, want %v", in, got, want)
	}
	// Stored BF16 → held BF16: the same bits back.
	st, err := safetensors.FromFloat32As("w", []int{5}, want, safetensors.BF16)
	if err != nil {
		t.Fatal(err)
	}
	again, err := WeightTensor(st, dtypes.BFloat16)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := TensorFloat32(again); !slices.Equal(got, want) {
		t.Fatalf("stored bfloat16 %v read back as %v", want, got)
	}
	// F16 holds 1 + 2^-10 exactly (bfloat16 could not).
	f16in := []float32{1 + 1.0/1024, -0.5, 65504}
	h, err := WeightTensor(safetensors.FromFloat32("w", []int{3}, f16in), dtypes.Float16)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := TensorFloat32(h); h.DType() != dtypes.Float16 || !slices.Equal(got, f16in) {
		t.Fatalf("float16 of %v = %v (%s)", f16in, got, h.DType())
	}
	for _, tc := range []struct {
		v  []float32
		dt dtypes.DType
	}{
		{[]float32{1, float32(math.Inf(1))}, dtypes.BFloat16},
		{[]float32{1, float32(math.NaN())}, dtypes.Float32},
		{[]float32{1, 1e6}, dtypes.Float16}, // beyond float16's 65504
	} {
		_, err := WeightTensor(safetensors.FromFloat32("layer.w", []int{2}, tc.v), tc.dt)
		if err == nil || !strings.Contains(err.Error(), `"layer.w": element 1`) {
			t.Errorf("%v as %s: error %v, want one naming the tensor and element 1", tc.v, tc.dt, err)
		}
	}
}

// WeightTensorOn gives WeightTensor's values and errors; a weight stored in
// the dtype it is held in lands in a backend buffer with no host copy.
func TestWeightTensorOn(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	vals := []float32{1, -2.5, 0.375, 1 + 1.0/128}
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for _, tc := range []struct {
		name   string
		stored safetensors.DType
		held   dtypes.DType
		v      []float32
		direct bool // written straight into the backend's buffer
	}{
		{"f32 as float32", safetensors.F32, dtypes.Float32, vals, true},
		{"bf16 as bfloat16", safetensors.BF16, dtypes.BFloat16, vals, true},
		{"f32 as bfloat16", safetensors.F32, dtypes.BFloat16, vals, false},
		{"bf16 as float32", safetensors.BF16, dtypes.Float32, vals, false},
		{"f32 NaN", safetensors.F32, dtypes.Float32, []float32{1, 2, nan}, true},
		{"bf16 -Inf", safetensors.BF16, dtypes.BFloat16, []float32{1, inf}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := safetensors.FromFloat32As("layer.w", []int{len(tc.v)}, tc.v, tc.stored)
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := WeightTensor(st, tc.held)
			got, err := WeightTensorOn(be, st, tc.held)
			if wantErr != nil || err != nil {
				if wantErr == nil || err == nil || err.Error() != wantErr.Error() {
					t.Fatalf("error %v, want WeightTensor's %v", err, wantErr)
				}
				return
			}
			if got.IsLocal() == tc.direct {
				t.Errorf("host copy held: %v, want %v", got.IsLocal(), !tc.direct)
			}
			gv, _ := TensorFloat32(got)
			wv, _ := TensorFloat32(want)
			if got.DType() != tc.held || !slices.Equal(gv, wv) {
				t.Errorf("%s %v, want %s %v", got.DType(), gv, tc.held, wv)
			}
		})
	}
}

// NewWeight calls at once per element in order, rounds as WeightTensor, and
// on a backend with shared buffers holds no host copy.
func TestNewWeight(t *testing.T) {
	be, err := backend.New("go")
	if err != nil {
		t.Fatal(err)
	}
	in := []float32{1, 1 + 1.0/256, 1 + 3.0/256, -2.5, 0.5, 7}
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		want, err := WeightTensor(safetensors.FromFloat32("w", []int{2, 3}, in), dt)
		if err != nil {
			t.Fatal(err)
		}
		wv, _ := TensorFloat32(want)
		for _, b := range []struct {
			name  string
			local bool
		}{{"", true}, {"go", false}} {
			var calls []int
			at := func(i int) float32 { calls = append(calls, i); return in[i] }
			var got *tensors.Tensor
			if b.name == "" {
				got, err = NewWeight(nil, []int{2, 3}, dt, at)
			} else {
				got, err = NewWeight(be, []int{2, 3}, dt, at)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(calls, []int{0, 1, 2, 3, 4, 5}) || got.IsLocal() != b.local {
				t.Errorf("%s on %q: calls %v, host copy %v", dt, b.name, calls, got.IsLocal())
			}
			if gv, _ := TensorFloat32(got); got.DType() != dt || !slices.Equal(gv, wv) || !slices.Equal(got.Shape().Dimensions, []int{2, 3}) {
				t.Errorf("%s on %q: %s %v %v, want %v", dt, b.name, got.DType(), got.Shape(), gv, wv)
			}
		}
	}
	if _, err := NewWeight(be, []int{2}, dtypes.Int32, func(int) float32 { return 0 }); err == nil {
		t.Error("int32 weight accepted")
	}
}
