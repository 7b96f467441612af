package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"unicode/utf8"
)

// MaxHeaderBytes bounds the JSON header length, as the Rust reader does
// (100 MB); a larger length field is treated as corruption.
const MaxHeaderBytes = 100_000_000

// metadataKey is the reserved header key holding string→string metadata.
const metadataKey = "__metadata__"

// ReadFile reads and validates a whole safetensors file into memory.
//
// Errors name the file and, where one is involved, the tensor, and wrap
// ErrInvalid for malformed content: a file shorter than 8 bytes, a header
// length beyond the file or above MaxHeaderBytes, a header that is not valid
// UTF-8 JSON object, duplicate keys, non-string metadata values, a missing or
// unknown dtype, a negative or overflowing shape, data_offsets that are not
// [begin, end] with begin <= end, that disagree with elements × dtype size,
// that overlap, leave gaps, or do not end exactly at the end of the file.
func ReadFile(path string) (*File, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := parse(buf)
	if err != nil {
		return nil, fmt.Errorf("safetensors: read %s: %w", path, err)
	}
	f.Path = path
	return f, nil
}

type rawInfo struct {
	DType       *DType   `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// parse decodes a complete safetensors image; errors name the tensor but not
// the file.
func parse(buf []byte) (*File, error) {
	if len(buf) < 8 {
		return nil, fmt.Errorf("truncated: %d bytes, need at least 8 for the header length: %w", len(buf), ErrInvalid)
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > MaxHeaderBytes {
		return nil, fmt.Errorf("header length %d exceeds the %d-byte limit: %w", n, MaxHeaderBytes, ErrInvalid)
	}
	if n > uint64(len(buf)-8) {
		return nil, fmt.Errorf("truncated: header length %d goes beyond the file (%d bytes after the length field): %w", n, len(buf)-8, ErrInvalid)
	}
	header := buf[8 : 8+n]
	data := buf[8+n:]
	if !utf8.Valid(header) {
		return nil, fmt.Errorf("header is not valid UTF-8: %w", ErrInvalid)
	}
	f := &File{Metadata: map[string]string{}, Tensors: map[string]*Tensor{}}
	type span struct {
		name       string
		begin, end int64
	}
	var spans []span
	dec := json.NewDecoder(bytes.NewReader(header))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("header: %s: %w", jsonErr(header, dec, err, "expected a JSON object"), ErrInvalid)
	}
	seenMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header: %s: %w", jsonErr(header, dec, err, ""), ErrInvalid)
		}
		name := tok.(string) // object keys are always strings
		if name == metadataKey {
			if seenMeta {
				return nil, fmt.Errorf("header: duplicate %q: %w", metadataKey, ErrInvalid)
			}
			seenMeta = true
			var m map[string]string
			if err := dec.Decode(&m); err != nil {
				return nil, fmt.Errorf("header: %q: %s: %w", metadataKey, jsonErr(header, dec, err, ""), ErrInvalid)
			}
			for k, v := range m {
				f.Metadata[k] = v
			}
			continue
		}
		if _, dup := f.Tensors[name]; dup {
			return nil, fmt.Errorf("tensor %q: duplicate header entry: %w", name, ErrInvalid)
		}
		var ri rawInfo
		if err := dec.Decode(&ri); err != nil {
			return nil, fmt.Errorf("tensor %q: %s: %w", name, jsonErr(header, dec, err, ""), ErrInvalid)
		}
		t, b, e, err := checkInfo(name, ri, len(data))
		if err != nil {
			return nil, err
		}
		t.Data = data[b:e:e]
		f.Tensors[name] = t
		spans = append(spans, span{name, int64(b), int64(e)})
	}
	if _, err := dec.Token(); err != nil { // closing '}'
		return nil, fmt.Errorf("header: %s: %w", jsonErr(header, dec, err, ""), ErrInvalid)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("header: trailing content after the JSON object at byte %d: %w", dec.InputOffset(), ErrInvalid)
	}
	// Every data byte must belong to exactly one tensor (Rust: validate()).
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var pos int64
	for i, s := range spans {
		if s.begin < pos {
			return nil, fmt.Errorf("tensor %q: data_offsets [%d,%d] overlap tensor %q ending at %d: %w",
				s.name, s.begin, s.end, spans[i-1].name, pos, ErrInvalid)
		}
		if s.begin > pos {
			return nil, fmt.Errorf("tensor %q: data_offsets [%d,%d] leave a gap after byte %d: %w",
				s.name, s.begin, s.end, pos, ErrInvalid)
		}
		pos = s.end
	}
	if pos != int64(len(data)) {
		last := "(no tensors)"
		if len(spans) > 0 {
			last = fmt.Sprintf("last tensor %q", spans[len(spans)-1].name)
		}
		return nil, fmt.Errorf("data section has %d bytes but tensors cover %d (%s): %w", len(data), pos, last, ErrInvalid)
	}
	return f, nil
}

// checkInfo validates one header entry against a data section of dataLen bytes.
func checkInfo(name string, ri rawInfo, dataLen int) (*Tensor, int, int, error) {
	bad := func(format string, a ...any) (*Tensor, int, int, error) {
		return nil, 0, 0, fmt.Errorf("tensor %q: %s: %w", name, fmt.Sprintf(format, a...), ErrInvalid)
	}
	switch {
	case ri.DType == nil:
		return bad("missing field %q", "dtype")
	case ri.Shape == nil:
		return bad("missing field %q", "shape")
	case ri.DataOffsets == nil:
		return bad("missing field %q", "data_offsets")
	}
	dt := *ri.DType
	if !dt.Valid() {
		return bad("field %q: unknown dtype %q", "dtype", string(dt))
	}
	shape := make([]int, len(*ri.Shape))
	for i, d := range *ri.Shape {
		if d < 0 || int64(int(d)) != d {
			return bad("field %q: invalid dimension %d at axis %d", "shape", d, i)
		}
		shape[i] = int(d)
	}
	n, ok := numElements(shape)
	if !ok || n > math.MaxInt/dt.Size() {
		return bad("field %q: %v overflows the element count", "shape", shape)
	}
	off := *ri.DataOffsets
	if len(off) != 2 {
		return bad("field %q: want [begin, end], got %d values", "data_offsets", len(off))
	}
	b, e := off[0], off[1]
	if b < 0 || e < b {
		return bad("field %q: invalid range [%d,%d]", "data_offsets", b, e)
	}
	if e > int64(dataLen) {
		return bad("field %q: [%d,%d] out of range of the %d-byte data section", "data_offsets", b, e, dataLen)
	}
	if want := int64(n) * int64(dt.Size()); e-b != want {
		return bad("field %q: [%d,%d] holds %d bytes but %s%v needs %d", "data_offsets", b, e, e-b, dt, shape, want)
	}
	return &Tensor{Name: name, DType: dt, Shape: shape}, int(b), int(e), nil
}

// jsonErr describes a JSON decoding failure with the header byte offset.
func jsonErr(header []byte, dec *json.Decoder, err error, fallback string) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at header byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		return fmt.Sprintf("invalid JSON value at header byte %d: %v", te.Offset, err)
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("invalid JSON: header ends early (%d bytes)", len(header))
	case err != nil:
		return fmt.Sprintf("invalid JSON near header byte %d: %v", dec.InputOffset(), err)
	}
	return fallback
}
