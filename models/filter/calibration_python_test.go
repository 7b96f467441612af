package filter

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/sample"
)

// pythonBlock returns the ```python block of doc whose first line is
// marker.
func pythonBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(b), "```python\n")[1:] {
		code, _, ok := strings.Cut(part, "```")
		if ok && strings.HasPrefix(code, marker+"\n") {
			return code
		}
	}
	t.Fatalf("%s: no ```python block starting %q", doc, marker)
	return ""
}

// Issue 36, acceptance 4: the Python function docs/recipes.md gives for
// the calibrated P([HELPFUL]), reading only config.json (doc_freq
// included), reproduces ragforge's Calibration.Apply within 1e-6 on 20
// instructions (the sample QA's questions with their own and with other
// contexts, and Portuguese ones with diacritics), each with a T5
// probability of its own, clipped ones included.
func TestCalibrationPythonReproducesRagforge(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the docs' calibration function is not run")
	}
	code := pythonBlock(t, filepath.Join("..", "..", "docs", "recipes.md"), "# calibrated_p: ragforge_filter_calibration of config.json (models/filter Calibration)")

	qa, err := sample.Bytes("qa.csv")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(qa)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	rows = rows[1:] // Question, Ground_Truth, Context
	var instructions, contexts []string
	for i := 0; i < 9; i++ {
		instructions = append(instructions, Instruction(rows[i][2], rows[i][0]))
		instructions = append(instructions, Instruction(rows[(i+5)%len(rows)][2], rows[i][0]))
		contexts = append(contexts, rows[i][2])
	}
	instructions = append(instructions,
		Instruction("Fixação em formol tamponado a 10% por 6 a 72 horas; a fixação insuficiente altera o HER2.", "Quanto tempo dura a fixação em formol tamponado?"),
		Instruction("Colorações de hematoxilina-eosina (H&E) são feitas após a desparafinização.", "Qual é o tempo de fixação?"))
	contexts = append(contexts, "fixação em formol tamponado", "fixado em álcool", "hematoxilina e eosina")
	if len(instructions) != 20 {
		t.Fatalf("%d instructions, want 20", len(instructions))
	}
	cal := DefaultCalibration()
	cal.Weights = []float64{-1.25, 0.83, 2.4, 1.7}
	cal.DocFreq = cal.CountDocFreq(contexts)
	if err := cal.Check(); err != nil {
		t.Fatal(err)
	}
	probs := []float64{0, 1, 1e-9, 0.5, 0.999999999}
	for len(probs) < len(instructions) {
		probs = append(probs, math.Mod(float64(len(probs))*0.6180339887, 1))
	}
	want := make([]float64, len(instructions))
	for i, s := range instructions {
		if want[i], err = cal.Apply(probs[i], s); err != nil {
			t.Fatal(err)
		}
	}
	// The config.json ragforge writes: the calibration under its key.
	config, err := json.Marshal(map[string]any{CalibrationKey: cal, "model_type": "t5"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(map[string]any{"p": probs, "instructions": instructions})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	driver := code + `
import json, sys
config = json.load(open(sys.argv[1]))
cases = json.load(open(sys.argv[2]))
json.dump([calibrated_p(config, p, s) for p, s in zip(cases["p"], cases["instructions"])], sys.stdout)
`
	for name, b := range map[string][]byte{"calibrated_p.py": []byte(driver), "config.json": config, "cases.json": in} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(py, filepath.Join(dir, "calibrated_p.py"), filepath.Join(dir, "config.json"), filepath.Join(dir, "cases.json"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	var got []float64
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(want) {
		t.Fatalf("python3 printed %s (%v), want %d probabilities", out, err, len(want))
	}
	spread := map[bool]int{}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-6 {
			t.Errorf("instruction %d (p %v): Python %v, ragforge %v", i, probs[i], got[i], want[i])
		}
		spread[want[i] > 0.5]++
	}
	if spread[true] == 0 || spread[false] == 0 {
		t.Errorf("calibrated P all on one side of 0.5 (%v): the cases do not exercise the weights", want)
	}
}
