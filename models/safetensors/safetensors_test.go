package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestWriteFileGolden checks the exact bytes of a tiny file, laid out by hand
// from the format description: header length, compact sorted JSON, space
// padding to a multiple of 8, then data in name order.
func TestWriteFileGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.safetensors")
	b := FromInt64("b", []int{}, []int64{7})
	a := FromFloat32("a", []int{2}, []float32{1, -2})
	if err := WriteFile(path, []*Tensor{b, a}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// 138 bytes of JSON + 6 spaces = 144 = 0x90, so data starts at 8+144 = 152.
	header := `{"__metadata__":{"format":"pt"},` +
		`"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"b":{"dtype":"I64","shape":[],"data_offsets":[8,16]}}` + "      "
	var want []byte
	want = append(want, 0x90, 0, 0, 0, 0, 0, 0, 0)
	want = append(want, header...)
	want = append(want, 0x00, 0x00, 0x80, 0x3f) // 1.0f
	want = append(want, 0x00, 0x00, 0x00, 0xc0) // -2.0f
	want = append(want, 7, 0, 0, 0, 0, 0, 0, 0) // int64 7
	if !bytes.Equal(got, want) {
		t.Fatalf("bytes differ\ngot  %q\nwant %q", got, want)
	}
	// The input slice order is untouched.
	if b.Name != "b" {
		t.Fatal("input reordered")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestRoundTripInMemory(t *testing.T) {
	f16 := &Tensor{Name: "h", DType: F16, Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0xc0}}
	u8 := &Tensor{Name: "mask", DType: BOOL, Shape: []int{3}, Data: []byte{1, 0, 1}}
	cases := []struct {
		name     string
		tensors  []*Tensor
		metadata map[string]string
		wantMeta map[string]string
	}{
		{"default metadata", []*Tensor{FromFloat32("w", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}), FromInt64("ids", []int{1, 2}, []int64{-1, 1 << 40})},
			nil, map[string]string{"format": "pt"}},
		{"no metadata", []*Tensor{FromFloat32("s", nil, []float32{0.5})}, map[string]string{}, map[string]string{}},
		{"custom metadata", []*Tensor{f16, u8}, map[string]string{"z": "1", "format": "np", "a": "x\"y"},
			map[string]string{"z": "1", "format": "np", "a": "x\"y"}},
		{"zero elements", []*Tensor{FromFloat32("empty", []int{0, 4}, nil), FromFloat32("one", []int{1}, []float32{3})}, nil, map[string]string{"format": "pt"}},
		{"escaped names", []*Tensor{FromFloat32("q\"\\\n\x01é", []int{1}, []float32{1})}, nil, map[string]string{"format": "pt"}},
		{"no tensors", nil, nil, map[string]string{"format": "pt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.safetensors")
			if err := WriteFile(path, tc.tensors, tc.metadata); err != nil {
				t.Fatal(err)
			}
			f, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Metadata, tc.wantMeta) {
				t.Errorf("metadata %v, want %v", f.Metadata, tc.wantMeta)
			}
			if len(f.Tensors) != len(tc.tensors) {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tc.tensors))
			}
			for _, want := range tc.tensors {
				got := f.Tensors[want.Name]
				if got == nil {
					t.Fatalf("tensor %q missing; have %v", want.Name, f.Names())
				}
				if got.DType != want.DType || len(got.Shape) != len(want.Shape) || !bytes.Equal(got.Data, want.Data) {
					t.Errorf("tensor %q: got %s%v %x, want %s%v %x", want.Name, got.DType, got.Shape, got.Data, want.DType, want.Shape, want.Data)
				}
				for i := range want.Shape {
					if got.Shape[i] != want.Shape[i] {
						t.Errorf("tensor %q: shape %v, want %v", want.Name, got.Shape, want.Shape)
					}
				}
			}
			// Writing what was read reproduces the file byte for byte.
			var ts []*Tensor
			for _, n := range f.Names() {
				ts = append(ts, f.Tensors[n])
			}
			path2 := filepath.Join(t.TempDir(), "again.safetensors")
			if err := WriteFile(path2, ts, f.Metadata); err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(path)
			b, _ := os.ReadFile(path2)
			if !bytes.Equal(a, b) {
				t.Errorf("re-written file differs")
			}
			if (8+binary.LittleEndian.Uint64(a))%8 != 0 {
				t.Errorf("data section starts at %d, not a multiple of 8", 8+binary.LittleEndian.Uint64(a))
			}
		})
	}
}

func TestHeaderEscaping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.safetensors")
	if err := WriteFile(path, []*Tensor{FromFloat32("a\"b\\c\nd\x01é", []int{1}, []float32{1})}, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	want := `{"a\"b\\c\nd\u0001é":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	if got := strings.TrimRight(string(raw[8:8+binary.LittleEndian.Uint64(raw)]), " "); got != want {
		t.Errorf("header %s, want %s", got, want)
	}
}

func TestFloat32Conversion(t *testing.T) {
	le16 := func(v ...uint16) []byte {
		b := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
		return b
	}
	le64 := func(v ...float64) []byte {
		b := make([]byte, 8*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
		}
		return b
	}
	inf := float32(math.Inf(1))
	cases := []struct {
		name  string
		dtype DType
		data  []byte
		want  []float32
	}{
		{"f32", F32, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}, []float32{1, -2}},
		// binary16: 1, -2, max normal 65504, min subnormal 2^-24, min normal 2^-14, 1/3 rounded (0x3555 = 0.333251953125), +Inf, -Inf, -0
		{"f16", F16, le16(0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x3555, 0x7c00, 0xfc00, 0x8000),
			[]float32{1, -2, 65504, 5.9604644775390625e-08, 6.103515625e-05, 0.333251953125, inf, -inf, float32(math.Copysign(0, -1))}},
		// bfloat16: 1, -3.140625 (0xc049), 2^-133 (smallest subnormal 0x0001 = 2^-133), +Inf
		{"bf16", BF16, le16(0x3f80, 0xc049, 0x0001, 0x7f80), []float32{1, -3.140625, float32(math.Ldexp(1, -133)), inf}},
		{"f64", F64, le64(0.1, -1e300, 2.5), []float32{float32(0.1), -inf, 2.5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := &Tensor{Name: tc.name, DType: tc.dtype, Shape: []int{len(tc.want)}, Data: tc.data}
			got, err := tn.Float32()
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				if math.Float32bits(got[i]) != math.Float32bits(tc.want[i]) {
					t.Errorf("[%d] = %g (%#x), want %g (%#x)", i, got[i], math.Float32bits(got[i]), tc.want[i], math.Float32bits(tc.want[i]))
				}
			}
		})
	}
	nan, err := (&Tensor{Name: "n", DType: F16, Shape: []int{1}, Data: le16(0x7e00)}).Float32()
	if err != nil || !math.IsNaN(float64(nan[0])) {
		t.Errorf("f16 0x7e00 = %v, %v; want NaN", nan, err)
	}
}

func TestInt64Conversion(t *testing.T) {
	cases := []struct {
		name  string
		dtype DType
		data  []byte
		want  []int64
	}{
		{"i64", I64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 1, 0, 0, 0, 0, 0, 0}, []int64{-1, 258}},
		{"i32", I32, []byte{0xfe, 0xff, 0xff, 0xff, 0, 0, 0, 0x80}, []int64{-2, math.MinInt32}},
		{"u32", U32, []byte{0xff, 0xff, 0xff, 0xff}, []int64{4294967295}},
		{"i16", I16, []byte{0x00, 0x80}, []int64{-32768}},
		{"u16", U16, []byte{0x00, 0x80}, []int64{32768}},
		{"i8", I8, []byte{0x80, 0x7f}, []int64{-128, 127}},
		{"u8", U8, []byte{0x80, 0x7f}, []int64{128, 127}},
		{"bool", BOOL, []byte{0, 1, 2}, []int64{0, 1, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tn := &Tensor{Name: tc.name, DType: tc.dtype, Shape: []int{len(tc.want)}, Data: tc.data}
			got, err := tn.Int64()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConversionErrors(t *testing.T) {
	cases := []struct {
		name    string
		tensor  *Tensor
		toFloat bool
		wantSub string
	}{
		{"int as float", FromInt64("ids", []int{1}, []int64{1}), true, "cannot be converted to float32"},
		{"float as int", FromFloat32("w", []int{1}, []float32{1}), false, "cannot be converted to int64"},
		{"u64 as int", &Tensor{Name: "u", DType: U64, Shape: []int{1}, Data: make([]byte, 8)}, false, "cannot be converted to int64"},
		{"short data", FromFloat32("w2", []int{3}, []float32{1, 2}), true, "needs 12 bytes, data has 8"},
		{"unknown dtype", &Tensor{Name: "x", DType: "F33", Shape: []int{1}, Data: make([]byte, 4)}, false, `unknown dtype "F33"`},
		{"negative shape", &Tensor{Name: "neg", DType: F32, Shape: []int{-1}}, true, "invalid shape"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.toFloat {
				_, err = tc.tensor.Float32()
			} else {
				_, err = tc.tensor.Int64()
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.wantSub) || !strings.Contains(err.Error(), `"`+tc.tensor.Name+`"`) {
				t.Errorf("error %q should contain %q and name the tensor %q", err, tc.wantSub, tc.tensor.Name)
			}
		})
	}
}

func TestNumElementsAndNames(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		want  int
	}{{nil, 1}, {[]int{}, 1}, {[]int{3}, 3}, {[]int{2, 3, 4}, 24}, {[]int{5, 0}, 0}} {
		if got := (&Tensor{Shape: tc.shape}).NumElements(); got != tc.want {
			t.Errorf("NumElements(%v) = %d, want %d", tc.shape, got, tc.want)
		}
	}
	f := &File{Tensors: map[string]*Tensor{"b": nil, "a.2": nil, "a.10": nil, "B": nil}}
	if got, want := f.Names(), []string{"B", "a.10", "a.2", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
}

// image builds a safetensors file from a header (padded here only if asked)
// and a data section.
func image(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestReadFileErrors(t *testing.T) {
	withLen := func(n uint64, rest string) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
	}
	w := func(dtype, shape, off string) string {
		return `{"dtype":"` + dtype + `","shape":` + shape + `,"data_offsets":` + off + `}`
	}
	cases := []struct {
		name    string
		file    []byte
		tensor  string // tensor the error must name, if any
		wantSub string
	}{
		{"empty file", nil, "", "truncated: 0 bytes"},
		{"short length field", []byte{1, 0, 0}, "", "truncated: 3 bytes"},
		{"header beyond file", withLen(100, `{"a":1}`), "", "header length 100 goes beyond the file"},
		{"huge header length", withLen(1<<40, "{}"), "", "exceeds"},
		{"invalid JSON", image(`{"w":{"dtype":"F32",`, nil), "w", "invalid JSON"},
		{"JSON syntax error", image(`{"w":{"dtype":"F32" "shape":[1]}}`, make([]byte, 4)), "w", "invalid JSON at header byte"},
		{"not an object", image(`[1,2]   `, nil), "", "expected a JSON object"},
		{"invalid UTF-8", image("{\"\xff\":1}", nil), "", "not valid UTF-8"},
		{"trailing JSON", image(`{} {}`, nil), "", "trailing content"},
		{"unknown dtype", image(`{"w":`+w("F33", "[1]", "[0,4]")+`}`, make([]byte, 4)), "w", `unknown dtype "F33"`},
		{"missing dtype", image(`{"w":{"shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", `missing field "dtype"`},
		{"missing shape", image(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4)), "w", `missing field "shape"`},
		{"missing offsets", image(`{"w":{"dtype":"F32","shape":[1]}}`, make([]byte, 4)), "w", `missing field "data_offsets"`},
		{"negative dimension", image(`{"w":`+w("F32", "[-1]", "[0,4]")+`}`, make([]byte, 4)), "w", "invalid dimension -1"},
		{"fractional dimension", image(`{"w":`+w("F32", "[1.5]", "[0,4]")+`}`, make([]byte, 4)), "w", "invalid JSON value"},
		{"overflowing shape", image(`{"w":`+w("F32", "[4611686018427387904,4]", "[0,4]")+`}`, make([]byte, 4)), "w", "overflows the element count"},
		{"dtype string wrong type", image(`{"w":`+`{"dtype":3,"shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", "invalid JSON value"},
		{"offsets out of range", image(`{"w":`+w("F32", "[2]", "[0,8]")+`}`, make([]byte, 4)), "w", "out of range"},
		{"offsets reversed", image(`{"w":`+w("F32", "[1]", "[8,4]")+`}`, make([]byte, 8)), "w", "invalid range [8,4]"},
		{"offsets negative", image(`{"w":`+w("F32", "[1]", "[-4,0]")+`}`, make([]byte, 8)), "w", "invalid range [-4,0]"},
		{"one offset", image(`{"w":`+w("F32", "[1]", "[4]")+`}`, make([]byte, 4)), "w", "got 1 values"},
		{"offsets vs dtype*shape", image(`{"w":`+w("F32", "[3]", "[0,8]")+`}`, make([]byte, 8)), "w", "holds 8 bytes but F32[3] needs 12"},
		{"offsets vs I64 shape", image(`{"w":`+w("I64", "[1]", "[0,4]")+`}`, make([]byte, 8)), "w", "holds 4 bytes but I64[1] needs 8"},
		{"overlapping", image(`{"a":`+w("F32", "[2]", "[0,8]")+`,"b":`+w("F32", "[2]", "[4,12]")+`}`, make([]byte, 12)), "b", `overlap tensor "a"`},
		{"gap", image(`{"a":`+w("F32", "[1]", "[0,4]")+`,"b":`+w("F32", "[1]", "[8,12]")+`}`, make([]byte, 12)), "b", "leave a gap after byte 4"},
		{"trailing data", image(`{"a":`+w("F32", "[1]", "[0,4]")+`}`, make([]byte, 8)), "a", "data section has 8 bytes but tensors cover 4"},
		{"duplicate tensor", image(`{"a":`+w("F32", "[1]", "[0,4]")+`,"a":`+w("F32", "[1]", "[4,8]")+`}`, make([]byte, 8)), "a", "duplicate"},
		{"metadata not strings", image(`{"__metadata__":{"format":1}}`, nil), "__metadata__", "invalid JSON value"},
		{"duplicate metadata", image(`{"__metadata__":{},"__metadata__":{}}`, nil), "__metadata__", "duplicate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := ReadFile(path)
			if err == nil {
				t.Fatalf("no error; read %v", f.Names())
			}
			msg := err.Error()
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", msg)
			}
			if !strings.Contains(msg, path) {
				t.Errorf("error %q does not name the file", msg)
			}
			if tc.tensor != "" && !strings.Contains(msg, `"`+tc.tensor+`"`) {
				t.Errorf("error %q does not name tensor %q", msg, tc.tensor)
			}
			if !strings.Contains(msg, tc.wantSub) {
				t.Errorf("error %q does not contain %q", msg, tc.wantSub)
			}
		})
	}
}

func TestReadFileMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.safetensors")
	_, err := ReadFile(path)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) || errors.Is(err, ErrInvalid) {
		t.Errorf("got %v; want a not-exist error naming %s", err, path)
	}
}

func TestReadFileNoMetadata(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := os.WriteFile(path, image(`{"w":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}`, []byte{0, 0, 0x80, 0x3f}), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata == nil || len(f.Metadata) != 0 || f.Path != path {
		t.Errorf("metadata %v path %q", f.Metadata, f.Path)
	}
	v, err := f.Tensors["w"].Float32()
	if err != nil || len(v) != 1 || v[0] != 1 {
		t.Errorf("scalar = %v, %v; want [1]", v, err)
	}
	if cap(f.Tensors["w"].Data) != 4 {
		t.Errorf("Data capacity %d, want capped at 4", cap(f.Tensors["w"].Data))
	}
}

func TestWriteFileErrors(t *testing.T) {
	ok := FromFloat32("ok", []int{1}, []float32{1})
	cases := []struct {
		name    string
		tensors []*Tensor
		meta    map[string]string
		tensor  string
		wantSub string
	}{
		{"duplicate", []*Tensor{ok, FromFloat32("ok", []int{1}, []float32{2})}, nil, "ok", "duplicate name"},
		{"reserved", []*Tensor{FromFloat32("__metadata__", []int{1}, []float32{2})}, nil, "__metadata__", "reserved"},
		{"length mismatch", []*Tensor{FromFloat32("w", []int{2, 2}, []float32{1, 2, 3})}, nil, "w", "needs 16 bytes, data has 12"},
		{"unknown dtype", []*Tensor{{Name: "q", DType: "Q4", Shape: []int{1}, Data: []byte{1}}}, nil, "q", `unknown dtype "Q4"`},
		{"bad UTF-8 name", []*Tensor{FromFloat32("\xff", []int{1}, []float32{1})}, nil, "\\xff", "not valid UTF-8"},
		{"bad UTF-8 metadata", []*Tensor{ok}, map[string]string{"k": "\xfe"}, "", "not valid UTF-8"},
		{"nil tensor", []*Tensor{ok, nil}, nil, "", "tensor #1 is nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.safetensors")
			err := WriteFile(path, tc.tensors, tc.meta)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, tc.wantSub) || (tc.tensor != "" && !strings.Contains(msg, tc.tensor)) {
				t.Errorf("error %q: want file %s, tensor %q and %q", msg, path, tc.tensor, tc.wantSub)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("failed write left files: %v", entries)
			}
		})
	}
	// An I/O failure (missing directory) names the file too.
	path := filepath.Join(t.TempDir(), "missing", "out.safetensors")
	if err := WriteFile(path, []*Tensor{ok}, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("write into missing dir: %v", err)
	}
}

func TestWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := WriteFile(path, []*Tensor{FromFloat32("a", []int{1}, []float32{1})}, nil); err != nil {
		t.Fatal(err)
	}
	// A failing write leaves the previous file intact.
	if err := WriteFile(path, []*Tensor{FromFloat32("a", []int{9}, nil)}, nil); err == nil {
		t.Fatal("expected error")
	}
	f, err := ReadFile(path)
	if err != nil || len(f.Tensors) != 1 || f.Tensors["a"].Shape[0] != 1 {
		t.Fatalf("previous file damaged: %v %v", f, err)
	}
	if err := WriteFile(path, []*Tensor{FromFloat32("b", []int{2}, []float32{1, 2})}, nil); err != nil {
		t.Fatal(err)
	}
	if f, err = ReadFile(path); err != nil || f.Names()[0] != "b" {
		t.Fatalf("overwrite: %v %v", f, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
}

func TestFiniteFloat32(t *testing.T) {
	bits := func(vs ...float32) []byte {
		b := make([]byte, 4*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	for _, tc := range []struct {
		name string
		vals []float32
		want string
	}{
		{"finite", []float32{1, -2, 0}, ""},
		{"NaN", []float32{1, float32(math.NaN()), 0}, "element 1 of 3 is NaN"},
		{"Inf", []float32{float32(math.Inf(-1)), 1, 0}, "element 0 of 3 is -Inf"},
	} {
		tn := &Tensor{Name: "w", DType: F32, Shape: []int{3}, Data: bits(tc.vals...)}
		_, err := tn.FiniteFloat32()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
