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
