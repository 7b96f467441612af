package safetensors

import (
	"crypto/sha256"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

// TestFixtureRoundTrip: ReadFile → WriteFile reproduces every fixture file
// byte for byte (same sha256), i.e. our serializer matches the reference one.
func TestFixtureRoundTrip(t *testing.T) {
	dir := testutil.SharedPath(t, "fixtures")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	// 8 forward models × model/expected (three T5 styles, BERT, XLM-R, Qwen2,
	// Llama, Qwen3), and the training-step fixtures (train-t5-filter: init +
	// expected; train-bert-infonce: expected; train-qwen2-lora: init, expected
	// and the PEFT adapter).
	if len(files) != 22 {
		t.Fatalf("found %d fixture checkpoints, want 22 (8 models × model/expected + 6 training-step files): %v", len(files), files)
	}
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		t.Run(rel, func(t *testing.T) {
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Metadata, map[string]string{"format": "pt"}) {
				t.Errorf("metadata %v, want format=pt", f.Metadata)
			}
			ts := make([]*Tensor, 0, len(f.Tensors))
			for _, t := range f.Tensors { // map order: WriteFile must sort
				ts = append(ts, t)
			}
			out := filepath.Join(t.TempDir(), filepath.Base(path))
			if err := WriteFile(out, ts, f.Metadata); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := sha256.Sum256(orig), sha256.Sum256(got); a != b {
				n := min(len(orig), len(got))
				first := n
				for i := 0; i < n; i++ {
					if orig[i] != got[i] {
						first = i
						break
					}
				}
				t.Fatalf("sha256 %x != %x (sizes %d vs %d, first difference at byte %d)", b, a, len(got), len(orig), first)
			}
		})
	}
}

// TestFixtureContents checks values stated in fixtures/README.md.
func TestFixtureContents(t *testing.T) {
	dir := testutil.SharedPath(t, "fixtures")
	counts := map[string]int{"t5-flan-tiny": 52, "t5-v1_0-tiny": 47, "t5-flan-inner": 66, "bert-tiny": 39}
	for model, want := range counts {
		ts, err := LoadDir(filepath.Join(dir, model))
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != want {
			t.Errorf("%s: %d tensors, want %d", model, len(ts), want)
		}
	}

	f, err := ReadFile(filepath.Join(dir, "t5-flan-tiny", "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	gen := f.Tensors["outputs.generated_ids"]
	if gen == nil || gen.DType != I64 || !reflect.DeepEqual(gen.Shape, []int{2, 9}) {
		t.Fatalf("outputs.generated_ids = %+v", gen)
	}
	ids, err := gen.Int64()
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []int64{0, 1641, 1278, 1, 0, 0, 0, 0, 0, 0, 1084, 1974, 1664, 429, 1200, 2077, 40, 461}
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Errorf("generated_ids %v, want %v", ids, wantIDs)
	}
	if _, err := gen.Float32(); err == nil {
		t.Error("Float32 of an I64 tensor should fail")
	}

	inner, err := ReadFile(filepath.Join(dir, "t5-flan-inner", "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	loss := inner.Tensors["outputs.loss"]
	if loss == nil || len(loss.Shape) != 0 || len(loss.Data) != 4 {
		t.Fatalf("outputs.loss = %+v, want an F32 scalar", loss)
	}
	lv, err := loss.Float32()
	if err != nil || math.Abs(float64(lv[0])-25.706202) > 1e-5 {
		t.Errorf("loss = %v, %v; want 25.706202", lv, err)
	}

	bert, err := ReadFile(filepath.Join(dir, "bert-tiny", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	emb := bert.Tensors["embeddings.word_embeddings.weight"]
	if emb == nil || !reflect.DeepEqual(emb.Shape, []int{1500, 64}) {
		t.Fatalf("word_embeddings = %+v", emb)
	}
	ev, err := emb.Float32()
	if err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for i, v := range ev {
		if i < 64 && v != 0 {
			t.Fatalf("[PAD] row element %d = %g, want 0", i, v)
		}
		if v != 0 {
			nonzero++
		}
	}
	if nonzero < len(ev)-64-10 {
		t.Errorf("only %d of %d non-pad weights are nonzero", nonzero, len(ev)-64)
	}
}
