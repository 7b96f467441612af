package hf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/internal/testutil"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigName), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

type t5Config struct {
	ModelType        string  `json:"model_type"`
	DModel           int     `json:"d_model"`
	NumHeads         int     `json:"num_heads"`
	NumDecoderLayers *int    `json:"num_decoder_layers"`
	LayerNormEpsilon float64 `json:"layer_norm_epsilon"`
	FeedForwardProj  string  `json:"feed_forward_proj"`
}

func TestReadConfigFixtures(t *testing.T) {
	dir := testutil.SharedPath(t, "fixtures")
	cases := []struct {
		model  string
		dModel int
		heads  int
		dec    int
		ff     string
	}{
		{"t5-flan-tiny", 64, 4, 2, "gated-gelu"},
		{"t5-v1_0-tiny", 64, 4, 2, "relu"},
		{"t5-flan-inner", 48, 6, 3, "gated-gelu"},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			var c t5Config
			if err := ReadConfig(filepath.Join(dir, tc.model), &c); err != nil {
				t.Fatal(err)
			}
			if c.DModel != tc.dModel || c.NumHeads != tc.heads || c.NumDecoderLayers == nil || *c.NumDecoderLayers != tc.dec ||
				c.FeedForwardProj != tc.ff || c.LayerNormEpsilon != 1e-6 || c.ModelType != "t5" {
				t.Errorf("config %+v", c)
			}
			mt, err := ModelType(filepath.Join(dir, tc.model))
			if err != nil || mt != "t5" {
				t.Errorf("ModelType = %q, %v", mt, err)
			}
		})
	}
	raw, err := ReadRawConfig(filepath.Join(dir, "bert-tiny"))
	if err != nil {
		t.Fatal(err)
	}
	if raw["hidden_size"] != 64.0 || raw["layer_norm_eps"] != 1e-12 || raw["hidden_act"] != "gelu" {
		t.Errorf("bert raw config %v", raw)
	}
	if mt, err := ModelType(filepath.Join(dir, "bert-tiny")); err != nil || mt != "bert" {
		t.Errorf("ModelType(bert-tiny) = %q, %v", mt, err)
	}
}

func TestReadConfigErrors(t *testing.T) {
	cases := []struct {
		name    string
		body    string // "" = no config.json
		wantSub []string
	}{
		{"missing file", "", []string{"no such file"}},
		{"syntax error", "{\n  \"d_model\": 64,\n  \"num_heads\": ,\n}", []string{"line 3, column 16", "invalid JSON"}},
		{"wrong type", "{\n  \"d_model\": \"wide\"\n}", []string{"line 2", `field "d_model"`, "string"}},
		{"truncated", "{\"d_model\": 64", []string{"unexpected end of file"}},
		{"trailing content", "{\"d_model\": 64}\n}", []string{"line 2, column 1", "trailing content"}},
		{"empty file", " ", []string{"file is empty, want a JSON object"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.body != "" {
				dir = writeConfig(t, tc.body)
			}
			var c t5Config
			err := ReadConfig(dir, &c)
			if err == nil {
				t.Fatalf("no error; got %+v", c)
			}
			for _, s := range append(tc.wantSub, filepath.Join(dir, ConfigName)) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestReadRawConfigErrors(t *testing.T) {
	for body, want := range map[string]string{
		"null":    "top level is null",
		"[1, 2]":  "cannot use JSON array",
		"{\"a\":": "unexpected end of file",
	} {
		dir := writeConfig(t, body)
		_, err := ReadRawConfig(dir)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ConfigName) {
			t.Errorf("ReadRawConfig(%q) error %v, want %q naming %s", body, err, want, ConfigName)
		}
	}
}

func TestModelType(t *testing.T) {
	cases := []struct {
		body    string
		want    string
		wantErr string
	}{
		{`{"model_type": "t5", "architectures": ["BertModel"]}`, "t5", ""},
		{`{"architectures": ["T5ForConditionalGeneration"]}`, "t5", ""},
		{`{"architectures": ["T5EncoderModel"]}`, "t5", ""},
		{`{"architectures": ["MT5ForConditionalGeneration"]}`, "mt5", ""},
		{`{"architectures": ["BertModel"]}`, "bert", ""},
		{`{"architectures": ["BertForMaskedLM"]}`, "bert", ""},
		{`{"architectures": ["BertLMHeadModel"]}`, "bert", ""},
		{`{"architectures": ["DistilBertModel"]}`, "distilbert", ""},
		{`{"architectures": ["XLMRobertaModel"]}`, "xlm-roberta", ""},
		{`{"architectures": ["DebertaV2ForSequenceClassification"]}`, "deberta-v2", ""},
		{`{"architectures": ["Unknown", "BertModel"]}`, "bert", ""},
		{`{"model_type": null, "architectures": ["BertModel"]}`, "bert", ""},
		{`{"architectures": ["Bertish"]}`, "", "match no known model family"},
		{`{"architectures": ["FooModel"]}`, "", "match no known model family"},
		{`{"architectures": []}`, "", `no "model_type" and no "architectures"`},
		{`{}`, "", `no "model_type" and no "architectures"`},
		{`{"architectures": [3]}`, "", "is not a string"},
		{`{"model_type": 5}`, "", `field "model_type"`},
		{`{"model_type": ""}`, "", `field "model_type"`},
		{`not json`, "", "invalid JSON"},
	}
	for _, tc := range cases {
		dir := writeConfig(t, tc.body)
		got, err := ModelType(dir)
		if tc.wantErr == "" {
			if err != nil || got != tc.want {
				t.Errorf("ModelType(%s) = %q, %v; want %q", tc.body, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), filepath.Join(dir, ConfigName)) {
			t.Errorf("ModelType(%s) = %q, %v; want error %q naming the file", tc.body, got, err, tc.wantErr)
		}
	}
	if _, err := ModelType(t.TempDir()); err == nil || !strings.Contains(err.Error(), ConfigName) {
		t.Errorf("ModelType(empty dir) error %v", err)
	}
}

func TestWriteJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	v := map[string]any{"b": []int{1, 2}, "a": "x<y&z", "c": map[string]any{}, "d": 1e-6}
	if err := WriteJSON(path, v); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "{\n  \"a\": \"x<y&z\",\n  \"b\": [\n    1,\n    2\n  ],\n  \"c\": {},\n  \"d\": 0.000001\n}\n"
	if string(got) != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	// Overwrite in place; no temporary files remain.
	if err := WriteJSON(path, struct {
		N int `json:"n"`
	}{3}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "{\n  \"n\": 3\n}\n" {
		t.Errorf("overwrite: %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	// Unencodable value: error names the file, previous content kept.
	if err := WriteJSON(path, map[string]any{"f": func() {}}); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("unencodable value: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "{\n  \"n\": 3\n}\n" {
		t.Errorf("failed write changed the file: %q", got)
	}
	missing := filepath.Join(dir, "no", "x.json")
	if err := WriteJSON(missing, 1); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing dir: %v", err)
	}
}

func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "spiece.model")
	content := []byte("\x00binary\xffcontent\n")
	if err := os.WriteFile(src, content, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out.model")
	if err := CopyFile(src, dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || string(got) != string(content) {
		t.Fatalf("copy = %q, %v", got, err)
	}
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	cases := []struct {
		name, src, dst, wantSub string
	}{
		{"missing source", filepath.Join(dir, "nope"), filepath.Join(dir, "x"), "nope"},
		{"source is a directory", dir, filepath.Join(dir, "x"), "not a regular file"},
		{"missing destination dir", src, filepath.Join(dir, "no", "x"), filepath.Join(dir, "no", "x")},
	}
	for _, tc := range cases {
		if err := CopyFile(tc.src, tc.dst); err == nil || !strings.Contains(err.Error(), tc.wantSub) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantSub)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !os.IsNotExist(err) {
		t.Errorf("failed copy created a file: %v", err)
	}
}

func TestMarkRandomInit(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		wantErr  bool
	}{
		{"object", "{\n  \"a\": 1,\n  \"b\": 2.0\n}\n", false},
		{"empty object", "{}\n", false},
		{"already marked", "{\n  \"ragforge_random_init\": true\n}\n", false},
		{"not an object", "[1]\n", true},
		{"non-bool mark", "{\"ragforge_random_init\": 1}\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ConfigName), []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			before, err := IsRandomInit(dir)
			if tc.name == "non-bool mark" {
				if err == nil {
					t.Error("IsRandomInit accepted a non-boolean mark")
				}
			} else if err == nil && before != (tc.name == "already marked") {
				t.Errorf("IsRandomInit before = %v", before)
			}
			err = MarkRandomInit(dir)
			if (err != nil) != tc.wantErr {
				t.Fatalf("MarkRandomInit error = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			got, err := IsRandomInit(dir)
			if err != nil || !got {
				t.Fatalf("IsRandomInit after mark = %v, %v", got, err)
			}
			b, _ := os.ReadFile(filepath.Join(dir, ConfigName))
			if tc.name == "object" && string(b) != "{\n  \"a\": 1,\n  \"b\": 2.0,\n  \"ragforge_random_init\": true\n}\n" {
				t.Errorf("marked file:\n%s", b)
			}
		})
	}
}

// AddConfigKey appends an object value after the other keys, accepts the
// same value again and refuses another one.
func TestAddConfigKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigName), []byte("{\n  \"a\": 1\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := map[string]any{"heads": 4, "score": 8.0}
	if err := AddConfigKey(dir, InitKey, v); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ConfigName))
	// Python's json.dumps(indent=2) layout, as save_pretrained writes nested values.
	if want := "{\n  \"a\": 1,\n  \"ragforge_init\": {\n    \"heads\": 4,\n    \"score\": 8\n  }\n}\n"; string(b) != want {
		t.Errorf("file:\n%s\nwant:\n%s", b, want)
	}
	if err := AddConfigKey(dir, InitKey, v); err != nil {
		t.Errorf("same value again: %v", err)
	}
	if err := AddConfigKey(dir, InitKey, map[string]any{"heads": 2}); err == nil || !strings.Contains(err.Error(), InitKey) {
		t.Errorf("another value: error %v, want one naming %s", err, InitKey)
	}
}

// Fields keep unknown keys, their order and their number formatting
// through Set, SetRaw and Delete.
func TestFieldsEdit(t *testing.T) {
	in := "{\n  \"b\": 2.0,\n  \"a\": [1, 2],\n  \"x\": {\"k\": 1e-06}\n}\n"
	fs, err := ParseFields([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Set("a", 3); err != nil {
		t.Fatal(err)
	}
	if err := fs.Set("new", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if !fs.Delete("b") || fs.Delete("missing") {
		t.Error("Delete: wrong report")
	}
	got, err := fs.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"a\": 3,\n  \"x\": {\n    \"k\": 1e-06\n  },\n  \"new\": {\n    \"n\": 1\n  }\n}\n"
	if string(got) != want {
		t.Errorf("Marshal:\n%s\nwant:\n%s", got, want)
	}
	for _, bad := range []string{"[1]", "{\"a\": 1} {}", "{\"a\": }"} {
		if _, err := ParseFields([]byte(bad)); err == nil {
			t.Errorf("ParseFields(%q): no error", bad)
		}
	}
}
