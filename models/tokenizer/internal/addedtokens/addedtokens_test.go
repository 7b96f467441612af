package addedtokens

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	const (
		cfg   = ConfigFile
		vocab = VocabFile
	)
	tests := []struct {
		name    string
		files   map[string]string // file name → contents
		asDir   string            // a file name created as a directory (unreadable as a file)
		base    int
		want    []Token
		wantErr []string // substrings of the error, nil for success
	}{
		{
			name: "decoder form: ids below base dropped, sorted by id, special kept",
			files: map[string]string{cfg: `{"extra_ids": 0, "added_tokens_decoder": {
				"6": {"content": "[B]", "special": false},
				"0": {"content": "<pad>", "special": true},
				"5": {"content": "[A]", "special": true}}}`},
			base: 5,
			want: []Token{{5, "[A]", true}, {6, "[B]", false}},
		},
		{
			name:  "added_tokens.json form when there is no config",
			files: map[string]string{vocab: `{"[B]": 4, "[A]": 3, "low": 1}`},
			base:  3,
			want:  []Token{{3, "[A]", false}, {4, "[B]", false}},
		},
		{
			name: "config without ids >= base falls back to added_tokens.json",
			files: map[string]string{
				cfg:   `{"added_tokens_decoder": {"1": {"content": "</s>", "special": true}}}`,
				vocab: `{"[A]": 2}`,
			},
			base: 2,
			want: []Token{{2, "[A]", false}},
		},
		{
			name: "decoder wins over added_tokens.json, which is then not read",
			files: map[string]string{
				cfg:   `{"added_tokens_decoder": {"2": {"content": "[D]", "special": true}}}`,
				vocab: `{`,
			},
			base: 2,
			want: []Token{{2, "[D]", true}},
		},
		{
			name: "no files: no tokens",
			base: 7,
		},
		{
			name:    "gap in decoder ids",
			files:   map[string]string{cfg: `{"added_tokens_decoder": {"6": {"content": "[X]"}}}`},
			base:    5,
			wantErr: []string{cfg, `added token "[X]" has id 6, want 5`},
		},
		{
			name:    "gap in added_tokens.json ids",
			files:   map[string]string{vocab: `{"[A]": 5, "[C]": 7}`},
			base:    5,
			wantErr: []string{vocab, `added token "[C]" has id 7, want 6`},
		},
		{
			name:    "two tokens with one id",
			files:   map[string]string{vocab: `{"[A]": 5, "[B]": 5}`},
			base:    5,
			wantErr: []string{vocab, "has id 5, want 6"},
		},
		{
			name:    "bad decoder key",
			files:   map[string]string{cfg: `{"added_tokens_decoder": {"x": {"content": "[X]"}}}`},
			base:    5,
			wantErr: []string{cfg, `field "added_tokens_decoder": key "x"`, "invalid syntax"},
		},
		{
			name:    "malformed config",
			files:   map[string]string{cfg: `{"added_tokens_decoder": `},
			wantErr: []string{cfg, "unexpected end of JSON input"},
		},
		{
			name:    "decoder entry of the wrong type",
			files:   map[string]string{cfg: `{"added_tokens_decoder": {"5": "[X]"}}`},
			wantErr: []string{cfg, "cannot unmarshal string"},
		},
		{
			name:    "malformed added_tokens.json",
			files:   map[string]string{vocab: `{"[A]": "5"}`},
			wantErr: []string{vocab, "cannot unmarshal string"},
		},
		{
			name:    "config unreadable",
			asDir:   cfg,
			wantErr: []string{cfg, "is a directory"},
		},
		{
			name:    "added_tokens.json unreadable",
			asDir:   vocab,
			wantErr: []string{vocab, "is a directory"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.asDir != "" {
				if err := os.Mkdir(filepath.Join(dir, tc.asDir), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Read(dir, tc.base)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("Read = %+v, want %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Read = %+v, want an error containing %q", got, tc.wantErr)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}
