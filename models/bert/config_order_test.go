package bert

import (
	"encoding/json"
	"strings"
	"testing"
)

// Keys BERT does not model keep their file order through a load and save,
// as hf.Fields keeps them for every other config.json edit.
func TestConfigExtraKeepsFileOrder(t *testing.T) {
	in := `{"zeta": 1, "model_type": "bert", "vocab_size": 10, "alpha": "a", "torch_dtype": "float32", "mid": [1, 2]}`
	var c Config
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	last := -1
	for _, k := range []string{`"model_type"`, `"vocab_size"`, `"zeta"`, `"alpha"`, `"torch_dtype"`, `"mid"`} {
		i := strings.Index(s, k)
		if i < 0 || i < last {
			t.Fatalf("key %s out of order in %s", k, s)
		}
		last = i
	}
}
