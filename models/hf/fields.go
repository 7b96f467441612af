package hf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

// Field is one top-level key of a JSON object with its value's bytes as
// the file held them.
type Field struct {
	Key   string
	Value json.RawMessage
}

// Fields are a JSON object's top-level keys in file order with their raw
// values: the one way ragforge edits a config.json, so keys it does not
// model (transformers' extra attributes, ragforge_* settings) survive with
// their order and number formatting. Methods never modify a shared backing
// array (a Config holding Fields is copied by value).
type Fields []Field

// ParseFields returns the top-level keys of the JSON object b in order.
// Errors: b is not one JSON object, a value does not decode (naming the key).
func ParseFields(b []byte) (Fields, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("want a JSON object, got %v", tok)
	}
	out := Fields{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("field %q: %w", key, err)
		}
		out = append(out, Field{key, v})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing content after the JSON object")
	}
	return out, nil
}

// Get returns key's raw value and whether the object has it.
func (fs Fields) Get(key string) (json.RawMessage, bool) {
	for _, f := range fs {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// SetRaw sets key to raw, in place when the key exists, else as the last key.
func (fs *Fields) SetRaw(key string, raw json.RawMessage) {
	out := slices.Clone(*fs)
	for i, f := range out {
		if f.Key == key {
			out[i].Value = raw
			*fs = out
			return
		}
	}
	*fs = append(out, Field{key, raw})
}

// Set sets key to the JSON encoding of v (SetRaw). Errors: v does not encode.
func (fs *Fields) Set(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("field %q: %w", key, err)
	}
	fs.SetRaw(key, b)
	return nil
}

// Delete removes key and reports whether it was there.
func (fs *Fields) Delete(key string) bool {
	for i, f := range *fs {
		if f.Key == key {
			*fs = slices.Delete(slices.Clone(*fs), i, i+1)
			return true
		}
	}
	return false
}

// Marshal returns the object in the layout transformers' save_pretrained
// writes (Python json.dumps(indent=2): two-space indent, a final newline),
// each value's bytes kept apart from re-indentation.
func (fs Fields) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, f := range fs {
		if i > 0 {
			buf.WriteString(",")
		}
		buf.WriteString("\n  ")
		k, _ := json.Marshal(f.Key)
		buf.Write(k)
		buf.WriteString(": ")
		if err := json.Indent(&buf, bytes.TrimSpace(f.Value), "  ", "  "); err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Key, err)
		}
	}
	if len(fs) == 0 {
		buf.WriteString("}\n")
	} else {
		buf.WriteString("\n}\n")
	}
	return buf.Bytes(), nil
}

// SameJSON reports whether two JSON values are equal as decoded values
// (1 and 1.0 equal, key order ignored).
func SameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// EditConfig reads dir/config.json as Fields, applies edit and writes the
// result atomically (Fields.Marshal). Errors name the file: unreadable or
// not an object, edit's error, an encoding failure.
func EditConfig(dir string, edit func(*Fields) error) error {
	path := filepath.Join(dir, ConfigName)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	fs, err := ParseFields(b)
	if err != nil {
		return fmt.Errorf("hf: read %s: %w", path, err)
	}
	if err := edit(&fs); err != nil {
		return fmt.Errorf("hf: %s: %w", path, err)
	}
	out, err := fs.Marshal()
	if err != nil {
		return fmt.Errorf("hf: %s: %w", path, err)
	}
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { _, err := w.Write(out); return err })
}
