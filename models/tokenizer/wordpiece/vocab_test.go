package wordpiece

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadVocabRefusesBadTokens(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          string // "" = accepted
	}{
		{"good", "[PAD]\n[UNK]\nhello\n##lo\n", ""},
		{"crlf", "[PAD]\r\n[UNK]\r\n", ""},
		{"duplicate", "[PAD]\n[UNK]\nhello\nhello\n", `line 4: token "hello" duplicates line 3`},
		{"invalid UTF-8", "[PAD]\n[UNK]\nhel\xfflo\n", "line 3: token \"hel\\xfflo\" is not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "vocab.txt")
			os.WriteFile(path, []byte(tc.content), 0o644)
			v, err := ReadVocab(path)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(v) != strings.Count(tc.content, "\n") {
					t.Errorf("%d tokens", len(v))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one naming %s and %q", err, path, tc.want)
			}
		})
	}
}

// A vocab.txt cut short (bert-base-uncased's first 100 lines hold [PAD]
// and [unused*] only) or lacking a special token is refused naming the
// file, the missing token and the fix; a vocabulary shorter than the
// model's vocab_size but holding the specials loads, as in HF.
func TestLoadRefusesVocabWithoutSpecials(t *testing.T) {
	full := []string{"[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s"}
	for _, tc := range []struct {
		name  string
		lines []string
		cfg   string // tokenizer_config.json, "" = none
		want  string // "" = loads
	}{
		{"complete", full, "", ""},
		{"cut after [unused0]", full[:2], "", `2 lines and no unk_token "[UNK]": the file is cut short or belongs to another tokenizer; copy the model's complete vocab.txt (or name its unk_token in tokenizer_config.json)`},
		{"no [SEP]", []string{"[PAD]", "[UNK]", "[CLS]", "the"}, "", `no sep_token "[SEP]"`},
		{"renamed specials", []string{"<pad>", "<unk>", "<s>", "</s>", "the"}, `{"pad_token": "<pad>", "unk_token": "<unk>", "cls_token": "<s>", "sep_token": "</s>"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(strings.Join(tc.lines, "\n")+"\n"), 0o644)
			if tc.cfg != "" {
				os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(tc.cfg), 0o644)
			}
			_, err := Load(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(dir, "vocab.txt")) {
				t.Errorf("error %v, want one naming vocab.txt and %q", err, tc.want)
			}
		})
	}
}
