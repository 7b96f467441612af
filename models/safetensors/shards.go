package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

// HF file names (transformers.utils: SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME).
const (
	WeightsName      = "model.safetensors"
	WeightsIndexName = "model.safetensors.index.json"
)

// DefaultMaxShardBytes is transformers' default max_shard_size "5GB" (10^9-byte GB).
const DefaultMaxShardBytes = 5_000_000_000

// shardNameRE matches HF shard names "model-00001-of-00003.safetensors".
var shardNameRE = regexp.MustCompile(`^model-[0-9]{5}-of-[0-9]{5}\.safetensors$`)

// Index is the content of model.safetensors.index.json: total_size is the sum
// of the tensors' data bytes; weight_map maps tensor name → shard file name.
type Index struct {
	Metadata  IndexMetadata     `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// IndexMetadata is the "metadata" object of an Index.
type IndexMetadata struct {
	TotalSize int64 `json:"total_size"`
}

// ShardName returns the HF shard file name for 1-based shard i of n,
// "model-0000i-of-0000n.safetensors" (5-digit zero padding).
func ShardName(i, n int) string { return fmt.Sprintf("model-%05d-of-%05d.safetensors", i, n) }

// WriteShards saves tensors to dir the way transformers' save_pretrained
// does (huggingface_hub split_torch_state_dict_into_shards): tensors are taken
// in name order; one whose data exceeds maxShardBytes gets a shard of its own,
// otherwise a shard is closed when the next tensor would push it past
// maxShardBytes. With a single shard the result is dir/model.safetensors and no
// index; otherwise shards are written as ShardName(i, n) with {"format":"pt"}
// metadata, plus model.safetensors.index.json (indent 2, keys sorted, trailing
// newline). Stale model.safetensors, index and model-*-of-*.safetensors files
// from an earlier save are removed, so LoadDir reads exactly what was written.
// dir is created if missing. maxShardBytes must be positive.
func WriteShards(dir string, tensors []*Tensor, maxShardBytes int64) error {
	if maxShardBytes <= 0 {
		return fmt.Errorf("safetensors: write shards %s: maxShardBytes %d must be positive", dir, maxShardBytes)
	}
	sorted := make([]*Tensor, len(tensors))
	copy(sorted, tensors)
	for i, t := range sorted {
		if t == nil {
			return fmt.Errorf("safetensors: write shards %s: tensor #%d is nil", dir, i)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var shards [][]*Tensor
	var cur []*Tensor
	var curSize, total int64
	for _, t := range sorted {
		size := int64(len(t.Data))
		total += size
		if size > maxShardBytes {
			shards = append(shards, []*Tensor{t})
			continue
		}
		if curSize+size > maxShardBytes {
			shards = append(shards, cur)
			cur, curSize = nil, 0
		}
		cur = append(cur, t)
		curSize += size
	}
	if len(cur) > 0 || len(shards) == 0 {
		shards = append(shards, cur)
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("safetensors: write shards: %w", err)
	}
	written := map[string]bool{}
	if len(shards) == 1 {
		if err := WriteFile(filepath.Join(dir, WeightsName), shards[0], nil); err != nil {
			return err
		}
		written[WeightsName] = true
	} else {
		idx := Index{Metadata: IndexMetadata{TotalSize: total}, WeightMap: map[string]string{}}
		for i, sh := range shards {
			name := ShardName(i+1, len(shards))
			if err := WriteFile(filepath.Join(dir, name), sh, nil); err != nil {
				return err
			}
			written[name] = true
			for _, t := range sh {
				idx.WeightMap[t.Name] = name
			}
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(idx); err != nil {
			return fmt.Errorf("safetensors: write shards %s: index: %w", dir, err)
		}
		path := filepath.Join(dir, WeightsIndexName)
		if err := atomicfile.Write(path, 0o644, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
			return fmt.Errorf("safetensors: write %s: %w", path, err)
		}
		written[WeightsIndexName] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("safetensors: write shards: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if written[n] || e.IsDir() || !(n == WeightsName || n == WeightsIndexName || shardNameRE.MatchString(n)) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("safetensors: write shards: remove stale checkpoint file: %w", err)
		}
	}
	return nil
}

// LoadDir loads the weights of a Hugging Face model directory: dir/model.safetensors
// when present (as transformers' from_pretrained prefers it), otherwise every
// shard listed in dir/model.safetensors.index.json "weight_map", merged into
// one map keyed by tensor name.
//
// Errors name the file and tensor: neither file present, an index that is not
// JSON or lacks "weight_map", a shard path leaving dir, a corrupt shard (see
// ReadFile), a listed tensor missing from its shard, or a shard holding a
// tensor the weight_map does not assign to it (unlisted, or listed elsewhere).
func LoadDir(dir string) (map[string]*Tensor, error) {
	single := filepath.Join(dir, WeightsName)
	f, err := ReadFile(single)
	if err == nil {
		return f.Tensors, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	indexPath := filepath.Join(dir, WeightsIndexName)
	raw, err := os.ReadFile(indexPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: load %s: neither %s nor %s exists: %w", dir, WeightsName, WeightsIndexName, err)
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: load %s: %w", dir, err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("safetensors: load %s: %w: %w", indexPath, err, ErrInvalid)
	}
	if idx.WeightMap == nil {
		return nil, fmt.Errorf("safetensors: load %s: missing field %q: %w", indexPath, "weight_map", ErrInvalid)
	}
	byShard := map[string][]string{}
	for name, shard := range idx.WeightMap {
		if shard == "" || shard != filepath.Base(shard) || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) {
			return nil, fmt.Errorf("safetensors: load %s: tensor %q: shard %q is not a file name inside the directory: %w",
				indexPath, name, shard, ErrInvalid)
		}
		byShard[shard] = append(byShard[shard], name)
	}
	shardNames := make([]string, 0, len(byShard))
	for s := range byShard {
		shardNames = append(shardNames, s)
	}
	sort.Strings(shardNames)
	out := make(map[string]*Tensor, len(idx.WeightMap))
	for _, s := range shardNames {
		path := filepath.Join(dir, s)
		f, err := ReadFile(path)
		if err != nil {
			return nil, err
		}
		names := byShard[s]
		sort.Strings(names)
		for _, name := range names {
			if _, ok := f.Tensors[name]; !ok {
				return nil, fmt.Errorf("safetensors: load %s: tensor %q: listed in %s but missing from %s: %w",
					dir, name, WeightsIndexName, path, ErrInvalid)
			}
		}
		for _, name := range f.Names() {
			if want := idx.WeightMap[name]; want != s {
				where := "not listed"
				if want != "" {
					where = "listed for " + want
				}
				return nil, fmt.Errorf("safetensors: load %s: tensor %q: found in %s but %s in %s: %w",
					dir, name, path, where, WeightsIndexName, ErrInvalid)
			}
			out[name] = f.Tensors[name]
		}
	}
	return out, nil
}
