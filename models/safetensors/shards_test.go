package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func shardTensors() []*Tensor {
	return []*Tensor{
		FromFloat32("d", []int{1}, []float32{4}),          // 4 bytes
		FromFloat32("c", []int{10}, make([]float32, 10)),  // 40 bytes
		FromFloat32("a", []int{4}, []float32{1, 2, 3, 4}), // 16 bytes
		FromFloat32("b", []int{2}, []float32{5, 6}),       // 8 bytes
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// TestWriteShards follows huggingface_hub's split rule by hand with a 24-byte
// limit over a(16) b(8) c(40) d(4) in name order: a+b fill shard [a,b] (24 is
// not > 24); c (40 > 24) is appended as its own shard before [a,b] is closed;
// d would tip [a,b] over, so [a,b] closes and d starts the last shard:
// shards = [c], [a,b], [d].
func TestWriteShards(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteShards(dir, shardTensors(), 24); err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
		"model-00003-of-00003.safetensors", "model.safetensors.index.json"}
	if got := dirNames(t, dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	index, _ := os.ReadFile(filepath.Join(dir, WeightsIndexName))
	wantIndex := `{
  "metadata": {
    "total_size": 68
  },
  "weight_map": {
    "a": "model-00002-of-00003.safetensors",
    "b": "model-00002-of-00003.safetensors",
    "c": "model-00001-of-00003.safetensors",
    "d": "model-00003-of-00003.safetensors"
  }
}
`
	if string(index) != wantIndex {
		t.Errorf("index:\n%s\nwant:\n%s", index, wantIndex)
	}
	for shard, names := range map[string][]string{
		"model-00001-of-00003.safetensors": {"c"},
		"model-00002-of-00003.safetensors": {"a", "b"},
		"model-00003-of-00003.safetensors": {"d"},
	} {
		f, err := ReadFile(filepath.Join(dir, shard))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.Names(), names) {
			t.Errorf("%s holds %v, want %v", shard, f.Names(), names)
		}
	}
	got, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range shardTensors() {
		g := got[w.Name]
		if g == nil || !bytes.Equal(g.Data, w.Data) || !reflect.DeepEqual(g.Shape, w.Shape) {
			t.Errorf("tensor %q = %+v, want %+v", w.Name, g, w)
		}
	}
	if len(got) != 4 {
		t.Errorf("LoadDir returned %d tensors, want 4", len(got))
	}

	// Saving again unsharded replaces the shards and index with model.safetensors.
	if err := WriteShards(dir, shardTensors()[:2], DefaultMaxShardBytes); err != nil {
		t.Fatal(err)
	}
	if got, want := dirNames(t, dir), []string{"config.json", "model.safetensors"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after re-save: files %v, want %v", got, want)
	}
	got, err = LoadDir(dir)
	if err != nil || len(got) != 2 || got["c"] == nil || got["d"] == nil {
		t.Fatalf("LoadDir after re-save: %v, %v", got, err)
	}
	// And sharding again removes the single file: with a 40-byte limit,
	// [a,b]=24 closes before c (24+40 > 40), [c]=40 closes before d.
	if err := WriteShards(dir, shardTensors(), 40); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, append(want[:4:4], WeightsIndexName)) {
		t.Fatalf("after re-shard: %v", names)
	}
}

func TestWriteShardsErrors(t *testing.T) {
	dir := t.TempDir()
	if err := WriteShards(dir, shardTensors(), 0); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("maxShardBytes 0: %v", err)
	}
	bad := append(shardTensors(), FromFloat32("e", []int{3}, []float32{1}))
	err := WriteShards(dir, bad, 1000)
	if err == nil || !strings.Contains(err.Error(), `"e"`) || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("bad tensor: %v", err)
	}
}

func TestLoadDirErrors(t *testing.T) {
	w := func(dir, name string, ts ...*Tensor) {
		t.Helper()
		if err := WriteFile(filepath.Join(dir, name), ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	idx := func(dir, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, WeightsIndexName), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := FromFloat32("a", []int{1}, []float32{1})
	b := FromFloat32("b", []int{1}, []float32{2})
	s1, s2 := ShardName(1, 2), ShardName(2, 2)
	cases := []struct {
		name    string
		setup   func(dir string)
		wantSub []string
		invalid bool
	}{
		{"empty dir", func(string) {}, []string{"neither model.safetensors nor model.safetensors.index.json"}, false},
		{"corrupt single file", func(d string) {
			os.WriteFile(filepath.Join(d, WeightsName), []byte{1, 2, 3}, 0o644)
		}, []string{"model.safetensors", "truncated"}, true},
		{"index not JSON", func(d string) { idx(d, "{weight_map") }, []string{WeightsIndexName, "invalid character"}, true},
		{"index without weight_map", func(d string) { idx(d, `{"metadata":{}}`) }, []string{WeightsIndexName, `missing field "weight_map"`}, true},
		{"shard outside dir", func(d string) { idx(d, `{"weight_map":{"a":"../x.safetensors"}}`) }, []string{`"a"`, "not a file name inside"}, true},
		{"missing shard file", func(d string) { idx(d, `{"weight_map":{"a":"`+s1+`"}}`) }, []string{s1, "no such file"}, false},
		{"tensor missing from shard", func(d string) {
			w(d, s1, a)
			idx(d, fmt.Sprintf(`{"weight_map":{"a":%q,"b":%q}}`, s1, s1))
		}, []string{`"b"`, "missing from", s1}, true},
		{"unlisted tensor in shard", func(d string) {
			w(d, s1, a, b)
			idx(d, fmt.Sprintf(`{"weight_map":{"a":%q}}`, s1))
		}, []string{`"b"`, "not listed", s1}, true},
		{"tensor in two shards", func(d string) {
			w(d, s1, a, b)
			w(d, s2, b)
			idx(d, fmt.Sprintf(`{"weight_map":{"a":%q,"b":%q}}`, s1, s2))
		}, []string{`"b"`, "listed for " + s2}, true},
		{"corrupt shard", func(d string) {
			w(d, s1, a)
			os.WriteFile(filepath.Join(d, s2), []byte("garbage!garbage!"), 0o644)
			idx(d, fmt.Sprintf(`{"weight_map":{"a":%q,"b":%q}}`, s1, s2))
		}, []string{s2, "exceeds the 100000000-byte limit"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(dir)
			got, err := LoadDir(dir)
			if err == nil {
				t.Fatalf("no error; loaded %d tensors", len(got))
			}
			if errors.Is(err, ErrInvalid) != tc.invalid {
				t.Errorf("errors.Is(ErrInvalid) = %v, want %v (%v)", !tc.invalid, tc.invalid, err)
			}
			for _, s := range append(tc.wantSub, dir) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestShardName(t *testing.T) {
	if got := ShardName(2, 13); got != "model-00002-of-00013.safetensors" {
		t.Errorf("ShardName(2, 13) = %q", got)
	}
}
