package data

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A field over FieldOptions.MaxFieldBytes is a RecordError naming the
// record and the field, in every format that goes through toDocument; 0
// takes DefaultMaxFieldBytes.
func TestMaxFieldBytes(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a", 2048)
	files := map[string]string{
		"c.csv":   "id,text,note\n1,short,x\n2,ok," + long + "\n",
		"c.jsonl": `{"id":"1","text":"short"}` + "\n" + `{"id":"2","text":"` + long + `"}` + "\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			limit   int
			wantErr bool
		}{{1024, true}, {2048, false}, {0, false}} {
			_, err := LoadCorpus(p, FieldOptions{MaxFieldBytes: c.limit})
			var re *RecordError
			if !c.wantErr {
				if err != nil {
					t.Errorf("%s limit %d: %v", name, c.limit, err)
				}
				continue
			}
			if !errors.Is(err, ErrFieldTooLong) || !errors.As(err, &re) || re.Record != 3 && re.Record != 2 {
				t.Fatalf("%s limit %d: %v, want ErrFieldTooLong at the second record", name, c.limit, err)
			}
			if !strings.Contains(err.Error(), "2048 bytes, over the limit of 1024 bytes per field (max-field-bytes)") {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}
