package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// ErrTruncated: an Arrow IPC stream ends before its end-of-stream marker or
// in the middle of a message.
var ErrTruncated = errors.New("truncated Arrow IPC stream")

// HFOptions configures LoadHFDataset.
type HFOptions struct {
	FieldOptions
	// Split selects the split of a DatasetDict directory. Default: "train"
	// when present, else the only split. Ignored for a plain Dataset
	// directory.
	Split string
}

// hfState is the part of a save_to_disk state.json we use.
type hfState struct {
	DataFiles []struct {
		Filename string `json:"filename"`
	} `json:"_data_files"`
}

// LoadHFDataset reads a Hugging Face datasets save_to_disk directory (the
// layout of datasets >= 2: state.json listing "_data_files", each an Arrow
// IPC *stream* file, and dataset_info.json with the features), or a
// DatasetDict directory (dataset_dict.json {"splits": [...]} with one such
// directory per split; opt.Split chooses).
//
// Each row becomes a Document (row order kept across data files; see
// FieldOptions for the text/id/title columns). Every column other than the
// text and id columns goes to Meta: integer columns as int64, string columns
// as string, floats as float64, booleans as bool, other types as Arrow's
// JSON-compatible value; nulls are omitted.
//
// Errors (as *RecordError where a row is at fault; position unit "row",
// 0-based): missing state.json or data file, a data file without the Arrow
// end-of-stream marker or with a broken message (ErrTruncated), columns that
// disagree with dataset_info.json features, a missing text column
// (ErrMissingField), a non-string text column (ErrFieldType), empty text
// (ErrEmptyText unless opt.SkipEmpty), invalid UTF-8, duplicate ids.
func LoadHFDataset(dir string, opt HFOptions) ([]Document, error) {
	c := newCollector(opt.FieldOptions)
	if err := c.hfDataset(dir, opt.Split); err != nil {
		return nil, err
	}
	return c.docs, nil
}

// hfDataset passes the rows of dir's split (LoadHFDataset) to c.
func (c *collector) hfDataset(dir, wantSplit string) error {
	dictPath := filepath.Join(dir, "dataset_dict.json")
	if b, err := os.ReadFile(dictPath); err == nil {
		var dict struct {
			Splits []string `json:"splits"`
		}
		if err := json.Unmarshal(b, &dict); err != nil {
			return fmt.Errorf("load %s: %w", dictPath, err)
		}
		split, err := chooseSplit(dict.Splits, wantSplit)
		if err != nil {
			return fmt.Errorf("load %s: field %q: %w", dictPath, "splits", err)
		}
		return c.hfSplit(filepath.Join(dir, split))
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("load %s: %w", dictPath, err)
	}
	return c.hfSplit(dir)
}

func chooseSplit(splits []string, want string) (string, error) {
	if len(splits) == 0 {
		return "", errors.New("no splits")
	}
	if want != "" {
		for _, s := range splits {
			if s == want {
				return s, nil
			}
		}
		return "", fmt.Errorf("no split %q (have %s)", want, strings.Join(splits, ", "))
	}
	for _, s := range splits {
		if s == "train" {
			return s, nil
		}
	}
	if len(splits) == 1 {
		return splits[0], nil
	}
	return "", fmt.Errorf("several splits (%s) and none is \"train\": choose one", strings.Join(splits, ", "))
}

func (c *collector) hfSplit(dir string) error {
	statePath := filepath.Join(dir, "state.json")
	b, err := os.ReadFile(statePath)
	if err != nil {
		return fmt.Errorf("load %s: not a save_to_disk dataset: %w", dir, err)
	}
	var st hfState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("load %s: %w", statePath, err)
	}
	if len(st.DataFiles) == 0 {
		return fmt.Errorf("load %s: field %q: no data files", statePath, "_data_files")
	}
	features, err := readFeatures(filepath.Join(dir, "dataset_info.json"))
	if err != nil {
		return err
	}

	row := 0
	for i, f := range st.DataFiles {
		if f.Filename == "" || filepath.IsAbs(f.Filename) || strings.Contains(f.Filename, "..") {
			return fmt.Errorf("load %s: field \"_data_files\"[%d]: bad filename %q", statePath, i, f.Filename)
		}
		n, err := readArrowStream(filepath.Join(dir, f.Filename), row, features, c)
		if err != nil {
			return err
		}
		row += n
	}
	return nil
}

// readFeatures returns the feature names in dataset_info.json, or nil when the
// file does not exist (it is optional; when present the Arrow schema must
// agree with it).
func readFeatures(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	var info struct {
		Features map[string]json.RawMessage `json:"features"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	names := make([]string, 0, len(info.Features))
	for k := range info.Features {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, nil
}

// eosMarker is the Arrow IPC end-of-stream marker: continuation token
// 0xFFFFFFFF followed by a zero metadata length (Arrow columnar format,
// "IPC Streaming Format").
var eosMarker = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// readArrowStream reads one Arrow IPC stream file, passing each row (global
// index firstRow+i) to c. It returns the number of rows read.
func readArrowStream(path string, firstRow int, features []string, c *collector) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("load %s: %w", path, err)
	}
	rowErr := func(row int, err error) error {
		return &RecordError{File: path, Unit: "row", Record: row, Err: err}
	}
	rd, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		return 0, rowErr(firstRow, fmt.Errorf("%w: read schema: %v", ErrTruncated, err))
	}
	defer rd.Release()
	schema := rd.Schema()
	if features != nil {
		if err := checkFeatures(schema, features); err != nil {
			return 0, fmt.Errorf("load %s: schema disagrees with dataset_info.json: %w", path, err)
		}
	}

	row := firstRow
	for rd.Next() {
		rec := rd.RecordBatch()
		cols := rec.Columns()
		for i := 0; i < int(rec.NumRows()); i++ {
			r := make(record, len(cols))
			for j, col := range cols {
				r[schema.Field(j).Name] = arrowValue(col, i)
			}
			if err := c.add(r, where{file: path, unit: "row", pos: row, idx: row}); err != nil {
				return 0, err
			}
			row++
		}
	}
	if err := rd.Err(); err != nil {
		return 0, rowErr(row, fmt.Errorf("%w: %v", ErrTruncated, err))
	}
	if !bytes.HasSuffix(b, eosMarker) {
		return 0, rowErr(row, fmt.Errorf("%w: no end-of-stream marker after %d rows", ErrTruncated, row-firstRow))
	}
	return row - firstRow, nil
}

func checkFeatures(schema *arrow.Schema, features []string) error {
	have := map[string]bool{}
	for _, f := range schema.Fields() {
		have[f.Name] = true
	}
	want := map[string]bool{}
	for _, f := range features {
		want[f] = true
		if !have[f] {
			return fmt.Errorf("field %q: %w: in features, not in the Arrow schema", f, ErrMissingField)
		}
	}
	for _, f := range schema.Fields() {
		if !want[f.Name] {
			return fmt.Errorf("field %q: in the Arrow schema, not in features", f.Name)
		}
	}
	return nil
}

// arrowValue converts element i of col to a JSON-compatible Go value; nil
// for nulls. Strings are copied out of the Arrow buffers.
func arrowValue(col arrow.Array, i int) any {
	if col.IsNull(i) {
		return nil
	}
	switch a := col.(type) {
	case *array.String:
		return strings.Clone(a.Value(i))
	case *array.LargeString:
		return strings.Clone(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Uint32:
		return int64(a.Value(i))
	case *array.Uint16:
		return int64(a.Value(i))
	case *array.Uint8:
		return int64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Boolean:
		return a.Value(i)
	}
	return col.GetOneForMarshal(i)
}
