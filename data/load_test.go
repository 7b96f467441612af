package data

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ragforge/ragforge/internal/testutil"
)

// sharedData returns <module root>/../shared/data/rel or skips.
func sharedData(tb testing.TB, rel string) string { return testutil.SharedPath(tb, "data/"+rel) }

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// hfCol is one column of a test dataset: string or int64 values, nil = null.
type hfCol struct {
	name string
	vals []any
}

// writeHF writes a save_to_disk directory with one Arrow stream file.
func writeHF(t *testing.T, dir string, cols []hfCol) {
	t.Helper()
	mem := memory.NewGoAllocator()
	var fields []arrow.Field
	var arrs []arrow.Array
	features := []string{}
	for _, c := range cols {
		isInt := false
		for _, v := range c.vals {
			if _, ok := v.(int64); ok {
				isInt = true
			}
		}
		if isInt {
			b := array.NewInt64Builder(mem)
			for _, v := range c.vals {
				if v == nil {
					b.AppendNull()
				} else {
					b.Append(v.(int64))
				}
			}
			fields = append(fields, arrow.Field{Name: c.name, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
			arrs = append(arrs, b.NewArray())
			features = append(features, `"`+c.name+`": {"dtype": "int64", "_type": "Value"}`)
		} else {
			b := array.NewStringBuilder(mem)
			for _, v := range c.vals {
				if v == nil {
					b.AppendNull()
				} else {
					b.Append(v.(string))
				}
			}
			fields = append(fields, arrow.Field{Name: c.name, Type: arrow.BinaryTypes.String, Nullable: true})
			arrs = append(arrs, b.NewArray())
			features = append(features, `"`+c.name+`": {"dtype": "string", "_type": "Value"}`)
		}
	}
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(schema, arrs, int64(len(cols[0].vals)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "data-00000-of-00001.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	w := ipc.NewWriter(f, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "state.json"), `{"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": null}`)
	writeFile(t, filepath.Join(dir, "dataset_info.json"), `{"features": {`+strings.Join(features, ", ")+`}}`)
}

func TestLoadHFDatasetSmall(t *testing.T) {
	dir := t.TempDir()
	writeHF(t, dir, []hfCol{
		{"text", []any{"página um", "página dois"}},
		{"title", []any{"Bouin", nil}},
		{"page_number", []any{int64(1), nil}},
		{"category", []any{"Coloracoes", "Geral"}},
	})
	got, err := LoadHFDataset(dir, HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Document{
		{ID: "0", Title: "Bouin", Text: "página um", Meta: map[string]any{"title": "Bouin", "page_number": int64(1), "category": "Coloracoes"}},
		{ID: "1", Text: "página dois", Meta: map[string]any{"category": "Geral"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}

	// An id column is used, and stays out of Meta; custom text field.
	dir2 := t.TempDir()
	writeHF(t, dir2, []hfCol{{"id", []any{"a", "b"}}, {"body", []any{"x", "y"}}})
	got, err = LoadHFDataset(dir2, HFOptions{FieldOptions: FieldOptions{TextField: "body"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Document{{ID: "a", Text: "x"}, {ID: "b", Text: "y"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

func TestLoadHFDatasetDict(t *testing.T) {
	dir := t.TempDir()
	writeHF(t, filepath.Join(dir, "train"), []hfCol{{"text", []any{"treino"}}})
	writeHF(t, filepath.Join(dir, "test"), []hfCol{{"text", []any{"teste"}}})
	writeFile(t, filepath.Join(dir, "dataset_dict.json"), `{"splits": ["train", "test"]}`)
	for _, tc := range []struct{ split, want string }{{"", "treino"}, {"train", "treino"}, {"test", "teste"}} {
		docs, err := LoadHFDataset(dir, HFOptions{Split: tc.split})
		if err != nil {
			t.Fatalf("split %q: %v", tc.split, err)
		}
		if len(docs) != 1 || docs[0].Text != tc.want {
			t.Errorf("split %q: got %+v, want text %q", tc.split, docs, tc.want)
		}
	}
	if _, err := LoadHFDataset(dir, HFOptions{Split: "validation"}); err == nil || !strings.Contains(err.Error(), `no split "validation" (have train, test)`) {
		t.Errorf("unknown split: error %v", err)
	}
	// Only one split, not named train: it is the default.
	dir2 := t.TempDir()
	writeHF(t, filepath.Join(dir2, "dev"), []hfCol{{"text", []any{"dev"}}})
	writeFile(t, filepath.Join(dir2, "dataset_dict.json"), `{"splits": ["dev"]}`)
	if docs, err := LoadCorpus(dir2, FieldOptions{}); err != nil || len(docs) != 1 || docs[0].Text != "dev" {
		t.Errorf("single split: %+v, %v", docs, err)
	}
}

func TestLoadHFDatasetAP(t *testing.T) {
	dir := sharedData(t, "ap_protocols")
	docs, err := LoadHFDataset(dir, HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 221 {
		t.Fatalf("%d documents, want 221 (one per page)", len(docs))
	}
	codes := map[string]bool{}
	for i, d := range docs {
		if _, ok := d.Meta["text"]; ok {
			t.Fatalf("doc %d: text copied into Meta", i)
		}
		code, ok := d.Meta["document_code"].(string)
		if !ok {
			t.Fatalf("doc %d: document_code %T, want string", i, d.Meta["document_code"])
		}
		codes[code] = true
		if _, ok := d.Meta["page_number"].(int64); !ok {
			t.Fatalf("doc %d: page_number %T, want int64", i, d.Meta["page_number"])
		}
	}
	if len(codes) != 94 {
		t.Errorf("%d distinct document_code, want 94", len(codes))
	}
	d := docs[0]
	if d.ID != "0" || d.Title != "Bouin" || d.Meta["document_code"] != "APIN COL 001" || d.Meta["page_number"] != int64(1) {
		t.Errorf("first page: id %q title %q meta %v", d.ID, d.Title, d.Meta)
	}
	via, err := LoadCorpus(dir, FieldOptions{})
	if err != nil || !reflect.DeepEqual(via, docs) {
		t.Errorf("LoadCorpus(dir) differs from LoadHFDataset (err %v)", err)
	}
}

func TestLoadJSONLAndCSV(t *testing.T) {
	wantJSONL := []Document{
		{ID: "d1", Title: "Bouin", Text: "Fixador de Bouin.", Meta: map[string]any{"title": "Bouin", "metadata": map[string]any{"lang": "pt"}}},
		{ID: "d2", Text: "Ácido pícrico\nsaturado.", Meta: map[string]any{"title": "", "year": int64(2019), "score": 0.5}},
		{ID: "3", Text: "Hematoxilina."},
	}
	wantCSV := []Document{
		{ID: "p1", Title: "Bouin", Text: "Linha um\nlinha \"dois\"", Meta: map[string]any{"title": "Bouin", "page": "1"}},
		{ID: "p2", Text: "a, b", Meta: map[string]any{"title": "", "page": "2"}},
	}
	for _, tc := range []struct {
		path string
		load func(string, FieldOptions) ([]Document, error)
		want []Document
	}{
		{"testdata/beir/corpus.jsonl", LoadJSONL, wantJSONL},
		{"testdata/beir", LoadCorpus, wantJSONL},
		{"testdata/corpus.csv", LoadCSV, wantCSV},
		{"testdata/corpus.csv", LoadCorpus, wantCSV},
	} {
		got, err := tc.load(tc.path, FieldOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", tc.path, got, tc.want)
		}
	}

	// Field options: other schemas.
	p := writeFile(t, filepath.Join(t.TempDir(), "c.jsonl"), `{"pid": 7, "body": "x", "name": "T"}`+"\n")
	got, err := LoadJSONL(p, FieldOptions{TextField: "body", IDField: "pid", TitleField: "name"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Document{{ID: "7", Title: "T", Text: "x", Meta: map[string]any{"name": "T"}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("field options: got %#v, want %#v", got, want)
	}
	// No id column: 0-based record index.
	p = writeFile(t, filepath.Join(t.TempDir(), "c.csv"), "text\nx\ny\n")
	if got, err := LoadCSV(p, FieldOptions{}); err != nil || got[0].ID != "0" || got[1].ID != "1" {
		t.Errorf("index ids: %+v, %v", got, err)
	}
}

func TestLoadQueries(t *testing.T) {
	qs, err := LoadAPQA("testdata/apqa.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{
		{ID: "q0001", Text: "Qual é a cor?", Answer: "Azul, claro.", Context: "A cor é azul\nclaro."},
		{ID: "q0002", Text: "Quanto tempo?", Answer: "24 horas.", Context: "Fixar 24 horas."},
	}
	if !reflect.DeepEqual(qs, want) {
		t.Errorf("LoadAPQA:\n got %#v\nwant %#v", qs, want)
	}

	docs, queries, qrels, err := LoadBEIR("testdata/beir", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 {
		t.Errorf("%d docs, want 3", len(docs))
	}
	wantQ := []Query{{ID: "q1", Text: "O que é o fixador de Bouin?"}, {ID: "q2", Text: "Como saturar o ácido pícrico?"}}
	if !reflect.DeepEqual(queries, wantQ) {
		t.Errorf("queries (q3 has no judgments and is dropped):\n got %#v\nwant %#v", queries, wantQ)
	}
	wantR := Qrels{"q1": {"d1": 1}, "q2": {"d2": 2, "3": 0}}
	if !reflect.DeepEqual(qrels, wantR) {
		t.Errorf("qrels %v, want %v", qrels, wantR)
	}
	all, err := LoadBEIRQueries("testdata/beir/queries.jsonl")
	if err != nil || len(all) != 3 || all[2].ID != "q3" {
		t.Errorf("LoadBEIRQueries: %+v, %v", all, err)
	}
}

func TestLoadAPQAReal(t *testing.T) {
	qs, err := LoadAPQA(sharedData(t, "ap_protocols_qa/dev.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 200 {
		t.Fatalf("%d queries, want 200", len(qs))
	}
	if qs[0].ID != "q0001" || qs[199].ID != "q0200" ||
		qs[0].Text != "Qual é a ordem correta para misturar os reagentes na preparação do fixador de Bouin?" ||
		qs[0].Context != "Adicionar o formol ao ácido pícrico, seguido do ácido acético." {
		t.Errorf("first query %+v, last id %q", qs[0], qs[199].ID)
	}
}

// TestLoadErrors feeds one bad input per case and checks the error names the
// file, the record and the field, and wraps the expected cause.
func TestLoadErrors(t *testing.T) {
	type loader func(path string) error
	corpus := func(f func(string, FieldOptions) ([]Document, error)) loader {
		return func(p string) error { _, err := f(p, FieldOptions{}); return err }
	}
	jsonl, csvL := corpus(LoadJSONL), corpus(LoadCSV)
	apqa := func(p string) error { _, err := LoadAPQA(p); return err }
	qrelsL := func(p string) error { _, err := LoadQrels(p); return err }
	queriesL := func(p string) error { _, err := LoadBEIRQueries(p); return err }

	cases := []struct {
		name    string
		file    string // written in a temp dir
		content string
		load    loader
		cause   error    // errors.Is target, nil = any
		want    []string // substrings of the message besides the path
	}{
		{"jsonl missing file", "none.jsonl", "", jsonl, os.ErrNotExist, nil},
		{"csv missing file", "none.csv", "", csvL, os.ErrNotExist, nil},
		{"jsonl empty text", "c.jsonl", `{"_id": "a", "text": "x"}` + "\n" + `{"_id": "b", "text": "  \n"}` + "\n", jsonl, ErrEmptyText, []string{"line 2", `field "text"`}},
		{"jsonl null text", "c.jsonl", `{"_id": "a", "text": null}`, jsonl, ErrEmptyText, []string{"line 1", `field "text"`}},
		{"jsonl missing text", "c.jsonl", `{"_id": "a", "body": "x"}`, jsonl, ErrMissingField, []string{"line 1", `field "text"`}},
		{"jsonl number text", "c.jsonl", `{"_id": "a", "text": 3}`, jsonl, ErrFieldType, []string{"line 1", `field "text"`}},
		{"jsonl invalid utf8", "c.jsonl", "{\"_id\": \"a\", \"title\": \"ok\", \"text\": \"caf\xe9\"}", jsonl, ErrInvalidUTF8, []string{"line 1", `field "text"`}},
		{"jsonl duplicate id", "c.jsonl", `{"_id": "a", "text": "x"}` + "\n\n" + `{"_id": "a", "text": "y"}`, jsonl, ErrDuplicateID, []string{"line 3", `field "_id"`, `"a" (first at line 1)`}},
		{"jsonl not an object", "c.jsonl", `{"_id": "a", "text": "x"}` + "\n" + `{"_id": "b", "te`, jsonl, nil, []string{"line 2", "not a JSON object"}},
		{"csv missing column", "c.csv", "id,text,page\na,x,1\nb,y\n", csvL, ErrMissingField, []string{"line 3", `field "page"`, "2 of 3 columns"}},
		{"csv extra column", "c.csv", "id,text\na,x,1\n", csvL, nil, []string{"line 2", "3 columns, header has 2"}},
		{"csv empty text", "c.csv", "id,text\na,\"x\ny\"\nb,\" \"\n", csvL, ErrEmptyText, []string{"line 4", `field "text"`}},
		{"csv invalid utf8", "c.csv", "id,title,text\na,t\xff,x\n", csvL, ErrInvalidUTF8, []string{"line 2", `field "title"`}},
		{"csv duplicate id", "c.csv", "id,text\na,x\na,y\n", csvL, ErrDuplicateID, []string{"line 3", `field "id"`, "first at line 2"}},
		{"csv bad quote", "c.csv", "id,text\na,\"x\"y\n", csvL, nil, []string{"line 2"}},
		{"csv duplicate header", "c.csv", "text,text\nx,y\n", csvL, nil, []string{"line 1", `field "text"`, "duplicate header"}},
		{"apqa missing column", "q.csv", "Question,Context\n", apqa, ErrMissingField, []string{"line 1", `field "Ground_Truth"`}},
		{"apqa empty question", "q.csv", "Question,Ground_Truth,Context\nq,a,c\n,a,c\n", apqa, ErrEmptyText, []string{"line 3", `field "Question"`}},
		{"apqa short row", "q.csv", "Question,Ground_Truth,Context\nq,a\n", apqa, ErrMissingField, []string{"line 2", `field "Context"`}},
		{"csv NUL byte", "c.csv", "id,text\na,x\nb,y\x00z\n", csvL, ErrNULByte, []string{"line 3", `field "text"`}},
		{"csv NUL in header", "c.csv", "id,te\x00xt\na,x\n", csvL, ErrNULByte, []string{"line 1", "header column 2"}},
		{"apqa NUL byte", "q.csv", "Question,Ground_Truth,Context\nq,a\x00,c\n", apqa, ErrNULByte, []string{"line 2", `field "Ground_Truth"`}},
		{"apqa header only", "q.csv", "Question,Ground_Truth,Context\n", apqa, ErrNoRecords, []string{"line 2", "no data rows after the header"}},
		{"queries duplicate", "q.jsonl", `{"_id": "q", "text": "a"}` + "\n" + `{"_id": "q", "text": "b"}`, queriesL, ErrDuplicateID, []string{"line 2", `field "_id"`}},
		{"queries no text", "q.jsonl", `{"_id": "q"}`, queriesL, ErrMissingField, []string{"line 1", `field "text"`}},
		{"qrels bad score", "t.tsv", "query-id\tcorpus-id\tscore\nq\td\t1\nq\te\thigh\n", qrelsL, ErrFieldType, []string{"line 3", `field "score"`}},
		{"qrels no header", "t.tsv", "q\td\t1\n", qrelsL, nil, []string{"line 1", "missing header"}},
		{"qrels two fields", "t.tsv", "query-id\tcorpus-id\tscore\nq\td\n", qrelsL, nil, []string{"line 2", "want 3"}},
		{"qrels conflict", "t.tsv", "query-id\tcorpus-id\tscore\nq\td\t1\nq\td\t2\n", qrelsL, nil, []string{"line 3", "repeated with score 2, earlier 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			if !strings.HasPrefix(tc.file, "none") {
				writeFile(t, path, tc.content)
			}
			err := tc.load(path)
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("error %q does not wrap %v", err, tc.cause)
			}
			for _, s := range append([]string{path}, tc.want...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestSkipEmpty(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, filepath.Join(dir, "c.jsonl"), `{"_id": "a", "text": "x"}`+"\n"+`{"_id": "b", "text": " "}`+"\n"+`{"_id": "b", "text": null}`+"\n"+`{"_id": "c", "text": "z"}`+"\n")
	var skipped []int
	opt := FieldOptions{SkipEmpty: true, OnSkip: func(file string, rec int) {
		if file != p {
			t.Errorf("OnSkip file %q, want %q", file, p)
		}
		skipped = append(skipped, rec)
	}}
	docs, err := LoadJSONL(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0].ID != "a" || docs[1].ID != "c" {
		t.Errorf("docs %+v, want a and c", docs)
	}
	if !reflect.DeepEqual(skipped, []int{2, 3}) {
		t.Errorf("skipped lines %v, want [2 3]", skipped)
	}

	hf := filepath.Join(dir, "hf")
	writeHF(t, hf, []hfCol{{"text", []any{"x", nil, ""}}})
	skipped = nil
	opt.OnSkip = func(_ string, rec int) { skipped = append(skipped, rec) }
	docs, err = LoadHFDataset(hf, HFOptions{FieldOptions: opt})
	if err != nil || len(docs) != 1 || !reflect.DeepEqual(skipped, []int{1, 2}) {
		t.Errorf("HF skip: docs %+v, skipped rows %v, err %v", docs, skipped, err)
	}
	_, err = LoadHFDataset(hf, HFOptions{})
	if !errors.Is(err, ErrEmptyText) || !strings.Contains(err.Error(), `row 1: field "text"`) {
		t.Errorf("HF null text without SkipEmpty: %v", err)
	}
}

func TestLoadHFErrors(t *testing.T) {
	t.Run("missing dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		_, err := LoadHFDataset(dir, HFOptions{})
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), dir) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("missing data file", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "state.json"), `{"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}`)
		_, err := LoadHFDataset(dir, HFOptions{})
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "data-00000-of-00001.arrow") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("duplicate id", func(t *testing.T) {
		dir := t.TempDir()
		writeHF(t, dir, []hfCol{{"_id", []any{"a", "b", "a"}}, {"text", []any{"x", "y", "z"}}})
		_, err := LoadHFDataset(dir, HFOptions{})
		if !errors.Is(err, ErrDuplicateID) || !strings.Contains(err.Error(), `row 2: field "_id": duplicate id "a" (first at row 0)`) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("invalid utf8", func(t *testing.T) {
		dir := t.TempDir()
		writeHF(t, dir, []hfCol{{"text", []any{"ok", "caf\xe9"}}})
		_, err := LoadHFDataset(dir, HFOptions{})
		if !errors.Is(err, ErrInvalidUTF8) || !strings.Contains(err.Error(), `row 1: field "text"`) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("missing text column", func(t *testing.T) {
		dir := t.TempDir()
		writeHF(t, dir, []hfCol{{"body", []any{"x"}}})
		_, err := LoadHFDataset(dir, HFOptions{})
		if !errors.Is(err, ErrMissingField) || !strings.Contains(err.Error(), `row 0: field "text"`) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("features disagree", func(t *testing.T) {
		dir := t.TempDir()
		writeHF(t, dir, []hfCol{{"text", []any{"x"}}})
		writeFile(t, filepath.Join(dir, "dataset_info.json"), `{"features": {"text": {}, "title": {}}}`)
		_, err := LoadHFDataset(dir, HFOptions{})
		if err == nil || !strings.Contains(err.Error(), `dataset_info.json: field "title"`) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		src := sharedData(t, "ap_protocols")
		b, err := os.ReadFile(filepath.Join(src, "data-00000-of-00001.arrow"))
		if err != nil {
			t.Fatal(err)
		}
		// The AP file holds one record batch: a cut inside the schema or the
		// batch fails at row 0; dropping only the end-of-stream marker
		// leaves all 221 rows readable, but the file is still truncated.
		for _, tc := range []struct {
			cut int
			row string
		}{{100, "row 0:"}, {len(b) / 2, "row 0:"}, {len(b) - len(eosMarker), "row 221:"}} {
			cut := tc.cut
			dir := t.TempDir()
			for _, f := range []string{"state.json", "dataset_info.json"} {
				c, err := os.ReadFile(filepath.Join(src, f))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, f), string(c))
			}
			arrowPath := writeFile(t, filepath.Join(dir, "data-00000-of-00001.arrow"), string(b[:cut]))
			docs, err := LoadHFDataset(dir, HFOptions{})
			if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), arrowPath) || !strings.Contains(err.Error(), tc.row) {
				t.Errorf("cut at %d of %d bytes: %d docs, error %v", cut, len(b), len(docs), err)
			}
		}
	})
}

func TestLoadBEIRErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "corpus.jsonl"), `{"_id": "d", "text": "x"}`+"\n")
	writeFile(t, filepath.Join(dir, "queries.jsonl"), `{"_id": "q1", "text": "a"}`+"\n")
	qp := writeFile(t, filepath.Join(dir, "qrels", "dev.tsv"), "query-id\tcorpus-id\tscore\nq1\td\t1\nq9\td\t1\n")
	_, _, _, err := LoadBEIR(dir, "dev")
	if err == nil || !strings.Contains(err.Error(), qp+`: line 3: field "query-id": query "q9" not in queries.jsonl`) {
		t.Errorf("unknown query: %v", err)
	}
	_, _, _, err = LoadBEIR(dir, "")
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join("qrels", "test.tsv")) {
		t.Errorf("missing default split: %v", err)
	}
	if _, err := LoadCorpus(filepath.Join(dir, "qrels"), FieldOptions{}); err == nil {
		t.Error("LoadCorpus accepted a directory without a corpus")
	}
	if _, err := LoadCorpus(qp, FieldOptions{}); err == nil || !strings.Contains(err.Error(), "unknown corpus format") {
		t.Errorf("LoadCorpus(.tsv): %v", err)
	}
}
