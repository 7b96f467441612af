package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

// DefaultMetadata is the header metadata WriteFile uses when given nil, as
// written by safetensors.torch.save_file / transformers save_pretrained.
func DefaultMetadata() map[string]string { return map[string]string{"format": "pt"} }

// WriteFile writes tensors to path in the canonical layout of the Rust
// serializer: compact JSON header with "__metadata__" first (its keys
// sorted), then one {"dtype":..,"shape":[..],"data_offsets":[b,e]} entry per
// tensor sorted by name (byte-wise), data in the same order, and the header
// padded with spaces so that the data section starts at a multiple of 8.
//
// metadata nil means DefaultMetadata ({"format":"pt"}); an empty non-nil map
// omits "__metadata__". The input slice is not reordered. The write is atomic
// (temporary file in the same directory, fsync, rename), so a crash never
// leaves a half-written checkpoint at path.
//
// Errors name the file and tensor: duplicate or reserved ("__metadata__")
// names, names or metadata that are not valid UTF-8, unknown dtypes, and data
// whose length disagrees with shape × dtype size (wrapping ErrInvalid).
func WriteFile(path string, tensors []*Tensor, metadata map[string]string) error {
	header, sorted, err := encodeHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	err = atomicfile.Write(path, 0o644, func(w io.Writer) error {
		var lenBuf [8]byte
		binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
		if _, err := w.Write(lenBuf[:]); err != nil {
			return err
		}
		if _, err := w.Write(header); err != nil {
			return err
		}
		for _, t := range sorted {
			if _, err := w.Write(t.Data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("safetensors: write %s: %w", path, err)
	}
	return nil
}

// encodeHeader validates tensors and returns the padded header and the
// tensors in data order.
func encodeHeader(tensors []*Tensor, metadata map[string]string) ([]byte, []*Tensor, error) {
	sorted := make([]*Tensor, len(tensors))
	copy(sorted, tensors)
	for i, t := range sorted {
		if t == nil {
			return nil, nil, fmt.Errorf("tensor #%d is nil", i)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	if metadata == nil {
		metadata = DefaultMetadata()
	}
	h := make([]byte, 0, 64+96*len(sorted))
	h = append(h, '{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k, v := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, nil, fmt.Errorf("metadata %q: not valid UTF-8: %w", k, ErrInvalid)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h = appendJSONString(h, metadataKey)
		h = append(h, ':', '{')
		for i, k := range keys {
			if i > 0 {
				h = append(h, ',')
			}
			h = appendJSONString(h, k)
			h = append(h, ':')
			h = appendJSONString(h, metadata[k])
		}
		h = append(h, '}')
	}
	var off int64
	for i, t := range sorted {
		switch {
		case i > 0 && t.Name == sorted[i-1].Name:
			return nil, nil, fmt.Errorf("tensor %q: duplicate name: %w", t.Name, ErrInvalid)
		case t.Name == metadataKey:
			return nil, nil, fmt.Errorf("tensor %q: reserved name: %w", t.Name, ErrInvalid)
		case !utf8.ValidString(t.Name):
			return nil, nil, fmt.Errorf("tensor %q: name is not valid UTF-8: %w", t.Name, ErrInvalid)
		}
		if err := t.checkData(); err != nil {
			return nil, nil, err
		}
		if len(h) > 1 {
			h = append(h, ',')
		}
		h = appendJSONString(h, t.Name)
		h = append(h, `:{"dtype":`...)
		h = appendJSONString(h, string(t.DType))
		h = append(h, `,"shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				h = append(h, ',')
			}
			h = strconv.AppendInt(h, int64(d), 10)
		}
		h = append(h, `],"data_offsets":[`...)
		h = strconv.AppendInt(h, off, 10)
		h = append(h, ',')
		off += int64(len(t.Data))
		h = strconv.AppendInt(h, off, 10)
		h = append(h, ']', '}')
	}
	h = append(h, '}')
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	return h, sorted, nil
}

// appendJSONString appends s as a JSON string the way serde_json does:
// '"' and '\\' escaped, \b \f \n \r \t short escapes, other control bytes as
// \u00XX, everything else (including non-ASCII UTF-8) verbatim.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			} else {
				b = append(b, c)
			}
		}
	}
	return append(b, '"')
}
