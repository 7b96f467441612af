package safetensors

import (
	"path/filepath"
	"strconv"
	"testing"
)

// writeSynthetic writes n F32 tensors of elems elements each (4·n·elems bytes).
func writeSynthetic(b *testing.B, n, elems int) (string, int64) {
	b.Helper()
	ts := make([]*Tensor, n)
	v := make([]float32, elems)
	for i := range v {
		v[i] = float32(i) * 0.5
	}
	for i := range ts {
		ts[i] = FromFloat32("layer."+strconv.Itoa(i)+".weight", []int{elems / 64, 64}, v)
	}
	path := filepath.Join(b.TempDir(), "big.safetensors")
	if err := WriteFile(path, ts, nil); err != nil {
		b.Fatal(err)
	}
	return path, int64(4 * n * elems)
}

// BenchmarkReadFile reads a 32 MiB synthetic checkpoint (128 tensors of
// 256 KiB); MB/s is the read+validate throughput.
func BenchmarkReadFile(b *testing.B) {
	path, size := writeSynthetic(b, 128, 64*1024)
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		f, err := ReadFile(path)
		if err != nil || len(f.Tensors) != 128 {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloat32 decodes one 4 MiB F32 tensor.
func BenchmarkFloat32(b *testing.B) {
	t := FromFloat32("w", []int{1024, 1024}, make([]float32, 1024*1024))
	b.SetBytes(int64(len(t.Data)))
	for b.Loop() {
		if _, err := t.Float32(); err != nil {
			b.Fatal(err)
		}
	}
}
