package filter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

// Format is an on-disk layout of RAG² examples.
type Format string

const (
	FormatJSON  Format = "json"  // one JSON array of examples (RAG² release files)
	FormatJSONL Format = "jsonl" // one example object per line
)

// FormatOf returns the format named by s ("json", "jsonl"), or, when s is
// empty, the one implied by path's extension (.jsonl/.ndjson → JSONL, else
// JSON). Errors: an unknown name.
func FormatOf(s, path string) (Format, error) {
	switch strings.ToLower(s) {
	case "json":
		return FormatJSON, nil
	case "jsonl", "ndjson":
		return FormatJSONL, nil
	case "":
		switch strings.ToLower(filepath.Ext(path)) {
		case ".jsonl", ".ndjson":
			return FormatJSONL, nil
		}
		return FormatJSON, nil
	}
	return "", fmt.Errorf("unknown label format %q (want json or jsonl)", s)
}

// ErrEmpty reports a file holding no examples.
var ErrEmpty = errors.New("file holds no examples")

// ReadExamples reads RAG² examples from path. The layout is sniffed from the
// content: a first non-blank byte '[' is a JSON array, '{' is JSONL (blank
// lines skipped). Validation is strict; every error names the file, the
// 1-based record number and line, and the field:
//   - id: present, a non-empty string, unique in the file;
//   - question: present, a string in the Instruction layout (ParseInstruction);
//   - answer: present, exactly Helpful or NotHelpful;
//   - dataset_name: optional, a string when present.
//
// Unknown fields are ignored (encoding/json convention). An empty file, or an
// empty array, is an error wrapping ErrEmpty.
func ReadExamples(path string) ([]Example, error) {
	return ReadExamplesLimit(path, DefaultMaxExampleBytes)
}

// DefaultMaxExampleBytes is the largest examples file ReadExamples reads,
// 1 GiB; `label import --max-bytes` raises it.
const DefaultMaxExampleBytes = 1 << 30

// ReadExamplesLimit is ReadExamples reading at most limit bytes: a longer
// file (or an endless one such as /dev/zero) is an error naming the limit
// before it is parsed, never an unbounded read.
func ReadExamplesLimit(path string, limit int64) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read examples: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read examples %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("read examples %s: over the limit of %d bytes (max-bytes)", path, limit)
	}
	return ParseExamples(b, path)
}

// ParseExamples is ReadExamples on bytes already read; name is used in errors.
func ParseExamples(b []byte, name string) ([]Example, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, fmt.Errorf("read %s: %w", name, ErrEmpty)
	}
	var out []Example
	seen := map[string]int{}
	add := func(rec, line int, raw []byte) error {
		ex, err := decodeExample(raw)
		if err != nil {
			return fmt.Errorf("read %s: record %d (line %d): %w", name, rec, line, err)
		}
		if prev, dup := seen[ex.ID]; dup {
			return fmt.Errorf("read %s: record %d (line %d): field %q: duplicate id %q (first in record %d)", name, rec, line, "id", ex.ID, prev)
		}
		seen[ex.ID] = rec
		out = append(out, ex)
		return nil
	}
	switch t[0] {
	case '[':
		dec := json.NewDecoder(bytes.NewReader(b))
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		// Line numbers are counted forward from the previous record, so the
		// whole read stays linear in the file size.
		line, lineOff := 1, 0
		lineAt := func(off int) int {
			off = min(max(off, lineOff), len(b))
			line += bytes.Count(b[lineOff:off], []byte("\n"))
			lineOff = off
			return line
		}
		for rec := 1; dec.More(); rec++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, fmt.Errorf("read %s: record %d (near line %d): %w", name, rec, lineAt(int(dec.InputOffset())), err)
			}
			if err := add(rec, lineAt(int(dec.InputOffset())-len(raw)), raw); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("read %s: after record %d: %w", name, len(out), err)
		}
		if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
			return nil, fmt.Errorf("read %s: trailing data after the JSON array", name)
		}
	case '{':
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
		rec := 0
		for line := 1; sc.Scan(); line++ {
			l := bytes.TrimSpace(sc.Bytes())
			if len(l) == 0 {
				continue
			}
			rec++
			if err := add(rec, line, l); err != nil {
				return nil, err
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
	default:
		return nil, fmt.Errorf("read %s: neither a JSON array nor JSONL (first byte %q)", name, t[0])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read %s: %w", name, ErrEmpty)
	}
	return out, nil
}

func decodeExample(raw []byte) (Example, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Example{}, fmt.Errorf("not a JSON object: %w", err)
	}
	str := func(field string, required bool) (string, error) {
		v, ok := m[field]
		if !ok {
			if required {
				return "", fmt.Errorf("field %q: missing", field)
			}
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("field %q: not a string: %s", field, v)
		}
		return s, nil
	}
	var ex Example
	var err error
	if ex.ID, err = str("id", true); err != nil {
		return ex, err
	}
	if ex.ID == "" {
		return ex, fmt.Errorf("field %q: empty", "id")
	}
	if ex.Question, err = str("question", true); err != nil {
		return ex, err
	}
	if _, _, err := ParseInstruction(ex.Question); err != nil {
		return ex, fmt.Errorf("field %q: %w", "question", err)
	}
	if ex.Answer, err = str("answer", true); err != nil {
		return ex, err
	}
	if !ValidLabel(ex.Answer) {
		return ex, fmt.Errorf("field %q: label %q is neither %s nor %s", "answer", ex.Answer, Helpful, NotHelpful)
	}
	if ex.DatasetName, err = str("dataset_name", false); err != nil {
		return ex, err
	}
	return ex, nil
}

// EncodeExamples writes examples to w: FormatJSON as an indented JSON array
// (2 spaces, trailing newline), FormatJSONL as one compact object per line.
// HTML characters are not escaped, so evidence text stays readable.
func EncodeExamples(w io.Writer, format Format, examples []Example) error {
	switch format {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if examples == nil {
			examples = []Example{}
		}
		return enc.Encode(examples)
	case FormatJSONL:
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for i, ex := range examples {
			if err := enc.Encode(ex); err != nil {
				return fmt.Errorf("record %d: %w", i+1, err)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown label format %q", format)
}

// WriteExamples writes examples to path in format, atomically: into a
// temporary file in the same directory, renamed over path only when complete,
// so a failed write never destroys an existing file. Records are validated
// first (ValidLabel answer, non-empty id); an invalid one is an error naming it.
func WriteExamples(path string, format Format, examples []Example) error {
	for i, ex := range examples {
		if ex.ID == "" {
			return fmt.Errorf("write %s: record %d: field %q: empty", path, i+1, "id")
		}
		if !ValidLabel(ex.Answer) {
			return fmt.Errorf("write %s: record %d: field %q: label %q is neither %s nor %s", path, i+1, "answer", ex.Answer, Helpful, NotHelpful)
		}
	}
	if err := atomicfile.Write(path, 0o644, func(w io.Writer) error { return EncodeExamples(w, format, examples) }); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteJSON writes examples as one JSON array (see WriteExamples).
func WriteJSON(path string, examples []Example) error {
	return WriteExamples(path, FormatJSON, examples)
}

// WriteJSONL writes examples one per line (see WriteExamples).
func WriteJSONL(path string, examples []Example) error {
	return WriteExamples(path, FormatJSONL, examples)
}
