// Package halfckpt copies a checkpoint directory into a test's temp dir
// with its floating-point weights stored as BF16 or F16, as a checkpoint
// saved with torch_dtype bfloat16/float16 is. Tests only: the parity tests
// of the weights-in-stored-dtype path compare loading that copy as float32
// with holding it in its stored dtype.
package halfckpt

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ragforge/ragforge/models/safetensors"
)

// Write copies every file of src to a fresh directory under t.TempDir()
// and rewrites src/model.safetensors there with each F32 tensor encoded as
// dt (safetensors.BF16 or safetensors.F16, rounded to nearest even);
// integer tensors and metadata are kept. It returns the directory. Any
// error fails the test.
func Write(t testing.TB, src string, dt safetensors.DType) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == safetensors.WeightsName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := safetensors.ReadFile(filepath.Join(src, safetensors.WeightsName))
	if err != nil {
		t.Fatal(err)
	}
	var out []*safetensors.Tensor
	for _, name := range f.Names() {
		st := f.Tensors[name]
		if st.DType == safetensors.F32 {
			v, err := st.Float32()
			if err != nil {
				t.Fatal(err)
			}
			if st, err = safetensors.FromFloat32As(name, st.Shape, v, dt); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, st)
	}
	if err := safetensors.WriteFile(filepath.Join(dst, safetensors.WeightsName), out, f.Metadata); err != nil {
		t.Fatal(err)
	}
	return dst
}
