package bert

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DeclaredParameters is the closed form of the core paramSpecs.
func TestDeclaredParametersMatchesSpecs(t *testing.T) {
	for _, cfg := range []Config{TinyConfig(300), MiniConfig(1000)} {
		n := 0
		for _, p := range paramSpecs(cfg)[groupCore] {
			e := 1
			for _, d := range p.shape {
				e *= d
			}
			n += e
		}
		if got := cfg.DeclaredParameters(); got != float64(n) {
			t.Errorf("DeclaredParameters %v, specs hold %d", got, n)
		}
	}
}

// A config.json that does not match its checkpoint, or is not a BERT config
// at all, fails naming the file before anything is allocated.
func TestLoadRefusesBadConfigs(t *testing.T) {
	be := testBackend(t)
	m, err := NewRandom(be, TinyConfig(300), false, 1)
	if err != nil {
		t.Fatal(err)
	}
	good := t.TempDir()
	if err := m.Save(good); err != nil {
		t.Fatal(err)
	}
	cfgText, err := os.ReadFile(filepath.Join(good, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"a billion layers", strings.Replace(string(cfgText), `"num_hidden_layers": 2`, `"num_hidden_layers": 1000000000`, 1),
			[]string{ConfigFile, "declares", "num_hidden_layers 1000000000", "do not match"}},
		{"empty", "", []string{ConfigFile, "file is empty"}},
		{"not JSON", "model_type = bert\n", []string{ConfigFile, "invalid JSON"}},
		{"gpt2", strings.Replace(string(cfgText), `"model_type": "bert"`, `"model_type": "gpt2"`, 1),
			[]string{ConfigFile, `field "model_type"`, `"gpt2"`}},
		// Issue 30: a config that does not name its family was loaded as a BERT.
		{"model_type null", strings.Replace(string(cfgText), `"model_type": "bert"`, `"model_type": null`, 1),
			[]string{ConfigFile, `field "model_type": missing, null or empty`, `add "model_type": "bert"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.config == string(cfgText) {
				t.Fatal("replacement did not apply")
			}
			dir := t.TempDir()
			for _, f := range []string{"model.safetensors"} {
				b, err := os.ReadFile(filepath.Join(good, f))
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
			}
			os.WriteFile(filepath.Join(dir, ConfigFile), []byte(tc.config), 0o644)
			_, err := Load(be, dir)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
