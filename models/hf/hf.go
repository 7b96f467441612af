// Package hf holds helpers for Hugging Face model directories
// (config.json, JSON side files, copying tokenizer files): reading configs
// with errors that name the file, line and field, and atomic JSON writes in
// the layout transformers' save_pretrained produces (indent 2, trailing newline).
//
// Weights are read and written by package models/safetensors.
package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ragforge/ragforge/internal/atomicfile"
)

// ConfigName is the model configuration file of an HF directory.
const ConfigName = "config.json"

// ReadConfig JSON-decodes dir/config.json into v (a pointer, usually to a
// config struct whose fields carry `json:"..."` tags as in HF's
// PretrainedConfig.to_dict). Unknown keys are ignored, as transformers keeps
// them as extra attributes. Errors name the file and, for malformed JSON or a
// value of the wrong type, the line, column and field.
func ReadConfig(dir string, v any) error {
	return readJSON(filepath.Join(dir, ConfigName), v)
}

// ReadRawConfig returns dir/config.json as a generic map (numbers as
// float64, as encoding/json decodes them). Errors as ReadConfig; a config
// whose top level is not an object is an error.
func ReadRawConfig(dir string) (map[string]any, error) {
	var m map[string]any
	path := filepath.Join(dir, ConfigName)
	if err := readJSON(path, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("hf: read %s: top level is null, want a JSON object", path)
	}
	return m, nil
}

// readJSON decodes the JSON file at path into v, with positioned errors.
func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	return DecodeJSON(path, raw, v)
}

// DecodeJSON decodes raw, the content of the JSON file at path, into v. An
// empty file, invalid JSON and a value of the wrong type are errors naming
// the file and, where there is one, the line, column and field.
func DecodeJSON(path string, raw []byte, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return fmt.Errorf("hf: read %s: file is empty, want a JSON object", path)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("hf: read %s: %s", path, describeJSONErr(raw, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := lineCol(raw, dec.InputOffset())
		return fmt.Errorf("hf: read %s: line %d, column %d: trailing content after the JSON value", path, line, col)
	}
	return nil
}

// describeJSONErr turns a decoding error into "line L, column C: ..." text,
// naming the field for type errors.
func describeJSONErr(raw []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		// Offset counts the offending byte; report that byte's position.
		line, col := lineCol(raw, max(se.Offset-1, 0))
		return fmt.Sprintf("line %d, column %d: invalid JSON: %v", line, col, se)
	case errors.As(err, &te):
		line, col := lineCol(raw, te.Offset)
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Sprintf("line %d, column %d: field %q: cannot use JSON %s as %v", line, col, field, te.Value, te.Type)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "invalid JSON: unexpected end of file"
	}
	return err.Error()
}

// lineCol converts a byte offset into 1-based line and column numbers.
func lineCol(raw []byte, off int64) (int, int) {
	if off > int64(len(raw)) {
		off = int64(len(raw))
	}
	before := raw[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// WriteJSON writes v to path as JSON indented by two spaces with a trailing
// newline (HF's json.dumps(indent=2) + "\n" layout; map keys sorted, no HTML
// escaping of <, >, &). The write is atomic: a temporary file in the same
// directory is fsynced and renamed over path (mode 0644).
func WriteJSON(path string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("hf: write %s: %w", path, err)
	}
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	})
	if err != nil {
		return fmt.Errorf("hf: write %s: %w", path, err)
	}
	return nil
}

// CopyFile copies the regular file src to dst atomically (temporary file in
// dst's directory, then rename), keeping src's permission bits. src must be
// a regular file; the directory of dst must exist.
func CopyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("hf: copy: %w", err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("hf: copy: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("hf: copy %s: not a regular file (%v)", src, st.Mode().Type())
	}
	err = atomicfile.Write(dst, st.Mode().Perm(), func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
	if err != nil {
		return fmt.Errorf("hf: copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// architecturePrefixes maps the class-name prefix of an HF architecture
// ("T5ForConditionalGeneration", "BertModel") to its model_type.
var architecturePrefixes = map[string]string{
	"T5":           "t5",
	"MT5":          "mt5",
	"UMT5":         "umt5",
	"Bert":         "bert",
	"DistilBert":   "distilbert",
	"Roberta":      "roberta",
	"XLMRoberta":   "xlm-roberta",
	"Electra":      "electra",
	"Deberta":      "deberta",
	"DebertaV2":    "deberta-v2",
	"MPNet":        "mpnet",
	"Bart":         "bart",
	"ModernBert":   "modernbert",
	"NomicBert":    "nomic_bert",
	"Albert":       "albert",
	"LongT5":       "longt5",
	"Camembert":    "camembert",
	"BigBird":      "big_bird",
	"Pegasus":      "pegasus",
	"MBart":        "mbart",
	"Llama":        "llama",
	"Qwen2":        "qwen2",
	"GPT2":         "gpt2",
	"XLMRobertaXL": "xlm-roberta-xl",
}

// architectureSuffixStarts are what may follow the prefix in a class name:
// "For..." heads, "Model", "EncoderModel", "LMHeadModel", "PreTrainedModel".
var architectureSuffixStarts = []string{"For", "Model", "Encoder", "LMHead", "PreTrained"}

// ModelType returns the model family of an HF directory: config.json's
// "model_type" when present, otherwise inferred from the first entry of
// "architectures" that matches a known class-name prefix (longest prefix
// wins, e.g. "T5ForConditionalGeneration" → "t5", "BertModel" → "bert",
// "DebertaV2Model" → "deberta-v2"). Errors name the file: unreadable or
// malformed config, "model_type" not a string, or neither key usable.
func ModelType(dir string) (string, error) {
	path := filepath.Join(dir, ConfigName)
	cfg, err := ReadRawConfig(dir)
	if err != nil {
		return "", err
	}
	if mt, ok := cfg["model_type"]; ok && mt != nil {
		s, ok := mt.(string)
		if !ok || s == "" {
			return "", fmt.Errorf("hf: read %s: field %q: want a non-empty string, got %v", path, "model_type", mt)
		}
		return s, nil
	}
	archs, ok := cfg["architectures"].([]any)
	if !ok || len(archs) == 0 {
		return "", fmt.Errorf("hf: read %s: no %q and no %q list to infer it from", path, "model_type", "architectures")
	}
	var names []string
	for _, a := range archs {
		s, ok := a.(string)
		if !ok {
			return "", fmt.Errorf("hf: read %s: field %q: entry %v is not a string", path, "architectures", a)
		}
		if mt := inferModelType(s); mt != "" {
			return mt, nil
		}
		names = append(names, s)
	}
	return "", fmt.Errorf("hf: read %s: no %q and architectures %v match no known model family", path, "model_type", names)
}

// inferModelType maps an architecture class name to a model_type, or "".
func inferModelType(arch string) string {
	prefixes := make([]string, 0, len(architecturePrefixes))
	for p := range architecturePrefixes {
		prefixes = append(prefixes, p)
	}
	sort.Slice(prefixes, func(i, j int) bool { return len(prefixes[i]) > len(prefixes[j]) })
	for _, p := range prefixes {
		rest, ok := strings.CutPrefix(arch, p)
		if !ok {
			continue
		}
		for _, s := range architectureSuffixStarts {
			if strings.HasPrefix(rest, s) {
				return architecturePrefixes[p]
			}
		}
	}
	return ""
}
