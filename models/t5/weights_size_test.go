package t5

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/safetensors"
)

// DeclaredParameters is the closed form of paramSpecs.
func TestDeclaredParametersMatchesSpecs(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"tiny", TinyConfig(300)},
		{"mini", MiniConfig(300)},
		{"default t5-small", DefaultConfig()},
		{"untied gated", func() Config {
			c := TinyConfig(300)
			c.FeedForwardProj, c.TieWordEmbeddings, c.NumDecoderLayers = "gated-gelu", false, 3
			return c
		}()},
	} {
		var n int
		for _, p := range tc.cfg.paramSpecs() {
			e := 1
			for _, d := range p.shape {
				e *= d
			}
			n += e
		}
		if got := tc.cfg.DeclaredParameters(); got != float64(n) {
			t.Errorf("%s: DeclaredParameters %v, specs hold %d", tc.name, got, n)
		}
	}
}

// A config.json that does not match its checkpoint, or is not a T5 config at
// all, fails naming the file before anything is allocated.
func TestLoadRefusesBadConfigs(t *testing.T) {
	be := testBackend(t)
	m, err := NewRandom(be, TinyConfig(60), 1)
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
	layers := regexp.MustCompile(`"num_layers": *\d+`)
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"a billion layers", layers.ReplaceAllString(string(cfgText), `"num_layers": 1000000000`),
			[]string{WeightsFile, "declares", "num_layers 1000000000", "do not match"}},
		{"empty", "", []string{ConfigFile, "file is empty"}},
		{"not JSON", "d_model = 64\n", []string{ConfigFile, "invalid JSON"}},
		{"gpt2", strings.Replace(string(cfgText), `"model_type": "t5"`, `"model_type": "gpt2"`, 1),
			[]string{ConfigFile, `field "model_type"`, `"gpt2" is not a T5 model`}},
		// Issue 30: a config that does not name its family was loaded as a T5.
		{"model_type empty", strings.Replace(string(cfgText), `"model_type": "t5"`, `"model_type": ""`, 1),
			[]string{ConfigFile, `field "model_type": missing, null or empty`, `add "model_type": "t5"`}},
		{"model_type null", strings.Replace(string(cfgText), `"model_type": "t5"`, `"model_type": null`, 1),
			[]string{ConfigFile, `field "model_type": missing, null or empty`}},
		{"model_type missing", strings.Replace(string(cfgText), `"model_type": "t5",`, ``, 1),
			[]string{ConfigFile, `field "model_type": missing, null or empty`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.config == string(cfgText) {
				t.Fatal("replacement did not apply")
			}
			dir := t.TempDir()
			b, err := os.ReadFile(filepath.Join(good, WeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, WeightsFile), b, 0o644)
			os.WriteFile(filepath.Join(dir, ConfigFile), []byte(tc.config), 0o644)
			_, err = Load(be, dir)
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

// NaN weights are an error at load time, not a NaN perplexity later.
func TestLoadRefusesNaNWeights(t *testing.T) {
	be := testBackend(t)
	m, err := NewRandom(be, TinyConfig(60), 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, WeightsFile)
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := f.Tensors["encoder.final_layer_norm.weight"]
	binary.LittleEndian.PutUint32(w.Data[4:], math.Float32bits(float32(math.NaN())))
	var all []*safetensors.Tensor
	for _, n := range f.Names() {
		all = append(all, f.Tensors[n])
	}
	if err := safetensors.WriteFile(path, all, f.Metadata); err != nil {
		t.Fatal(err)
	}
	_, err = Load(be, dir)
	if err == nil || !strings.Contains(err.Error(), `"encoder.final_layer_norm.weight"`) || !strings.Contains(err.Error(), "element 1 of") {
		t.Errorf("error %v", err)
	}
}
