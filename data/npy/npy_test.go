package npy

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

func TestReadNPYGolden(t *testing.T) {
	tests := []struct {
		file       string
		major      int
		dataOffset int64
		shape      []int
		n, d       int
		want       []float32
	}{
		{"arange_2x3_v1.npy", 1, 128, []int{2, 3}, 2, 3, []float32{0, 1, 2, 3, 4, 5}},
		{"v2_3x2.npy", 2, 128, []int{3, 2}, 3, 2, []float32{0.5, -1, 2.25, 3, -0.125, 1024}},
		{"v3_1x2.npy", 3, 128, []int{1, 2}, 1, 2, []float32{1.5, -2}},
		{"py2_2x1_v1.npy", 1, 80, []int{2, 1}, 2, 1, []float32{7, 8}},
		{"empty_0x4_v1.npy", 1, 128, []int{0, 4}, 0, 4, []float32{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h, err := ReadHeader(f)
			if err != nil {
				t.Fatal(err)
			}
			if h.Major != tt.major || h.Minor != 0 || h.Descr != "<f4" || h.FortranOrder ||
				!slices.Equal(h.Shape, tt.shape) || h.DataOffset != tt.dataOffset {
				t.Errorf("header = %+v, want version %d.0 '<f4' C-order shape %v data at %d",
					h, tt.major, tt.shape, tt.dataOffset)
			}
			x, n, d, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.n || d != tt.d || !slices.Equal(x, tt.want) {
				t.Errorf("Read = %v [%d, %d], want %v [%d, %d]", x, n, d, tt.want, tt.n, tt.d)
			}
		})
	}
}

func TestWriteMatchesNumPyBytes(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "arange_2x3_v1.npy"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.npy")
	if err := Write(path, []float32{0, 1, 2, 3, 4, 5}, 2, 3); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Write bytes differ from NumPy's:\n got %q\nwant %q", got, want)
	}
}

func TestWriteReadNPYRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		n, d int
	}{
		{"1x1", 1, 1},
		{"7x5", 7, 5},
		{"wide shape digits", 12345, 3},
		{"0x8", 0, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := make([]float32, tt.n*tt.d)
			for i := range x {
				x[i] = float32(i)*0.25 - 3
			}
			x = append(x[:0:0], x...)
			if len(x) > 0 {
				x[0] = float32(math.Inf(-1))
			}
			path := filepath.Join(t.TempDir(), "x.npy")
			if err := Write(path, x, tt.n, tt.d); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			off := len(b) - 4*len(x)
			if off%64 != 0 || b[off-1] != '\n' {
				t.Errorf("header length %d: want a multiple of 64 ending in '\\n'", off)
			}
			got, n, d, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.n || d != tt.d || !slices.Equal(got, x) {
				t.Errorf("round trip: got [%d, %d], want [%d, %d] with equal data", n, d, tt.n, tt.d)
			}
		})
	}
	if err := Write(filepath.Join(t.TempDir(), "bad.npy"), make([]float32, 5), 2, 3); err == nil ||
		!strings.Contains(err.Error(), "does not match shape [2, 3]") {
		t.Errorf("Write with 5 floats for [2, 3]: err = %v", err)
	}
}

func TestReadNPYErrors(t *testing.T) {
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"float64", testutil.RawNPY(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }", make([]byte, 8)), `dtype "<f8"`},
		{"float16", testutil.RawNPY(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2), }", make([]byte, 4)), `dtype "<f2"`},
		{"big endian", testutil.RawNPY(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1, 1), }", make([]byte, 4)), `dtype ">f4"`},
		{"fortran order", testutil.RawNPY(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", testutil.F4Bytes(1, 2, 3, 4)), "fortran_order is True"},
		{"1-D", testutil.RawNPY(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", testutil.F4Bytes(1, 2, 3)), "want 2 dimensions"},
		{"3-D", testutil.RawNPY(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1), }", testutil.F4Bytes(1)), "want 2 dimensions"},
		{"truncated data", testutil.RawNPY(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", testutil.F4Bytes(1, 2, 3)), "want"},
		{"extra data", testutil.RawNPY(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }", testutil.F4Bytes(1, 2)), "want"},
		{"bad magic", []byte("\x93NUMPX\x01\x00\x00\x00"), "bad magic"},
		{"version 4", testutil.RawNPY(4, "{}", nil), "unsupported format version 4.0"},
		{"missing key", testutil.RawNPY(1, "{'descr': '<f4', 'shape': (1, 1), }", testutil.F4Bytes(1)), `missing key "fortran_order"`},
		{"extra key", testutil.RawNPY(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), 'x': True}", testutil.F4Bytes(1)), "unexpected keys"},
		{"not a dict", testutil.RawNPY(1, "descr=<f4", nil), "want '{'"},
		{"shape not ints", testutil.RawNPY(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (a, 1), }", nil), "non-negative integer"},
		{"descr not string", testutil.RawNPY(1, "{'descr': True, 'fortran_order': False, 'shape': (1, 1), }", testutil.F4Bytes(1)), `field "descr"`},
		{"short header", []byte("\x93NUMPY\x01\x00\xff\x00{'descr'"), "255-byte dict"},
		{"empty file", nil, "EOF"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".npy")
			if err := os.WriteFile(path, tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, _, err := Read(path)
			if err == nil {
				t.Fatal("Read succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want it to contain %q and the file name", err, tt.want)
			}
		})
	}
}
