package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// goList returns each package of the module with the dependencies go list
// reports in field (Deps: all, transitive, of the non-test build).
func goList(t *testing.T, field string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range ."+field+"}} {{.}}{{end}}", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	if _, ok := deps[Module+"/internal/archtest"]; !ok {
		t.Fatalf("go list listed %d packages; not run from the module root?", len(deps))
	}
	return deps
}

// TestDependencyDirection fails when a package's build (test files aside)
// depends, directly or not, on one its floor may not see (see Rules). Test
// files may cross floors for parity checks (infer/serve's filter against
// train/filtertrain's evaluation).
func TestDependencyDirection(t *testing.T) {
	for _, v := range Violations(goList(t, "Deps"), Rules) {
		t.Error(v)
	}
}

func TestViolations(t *testing.T) {
	m := func(s string) string { return Module + "/" + s }
	tests := []struct {
		name string
		deps map[string][]string
		want []string
	}{
		{"allowed directions", map[string][]string{
			m("cmd/ragforge"):      {m("infer/serve"), m("train/filtertrain")},
			m("train/filtertrain"): {m("models/filter"), m("train/trainer"), "fmt"},
			m("label"):             {m("models/filter"), m("retrieval/eval")},
			m("infer/serve"):       {m("models/filter"), m("retrieval/hyde")},
			m("retrieval/hyde"):    {m("retrieval/encode"), m("data")},
			m("models/generate"):   {m("data/chunk"), m("internal/catch")},
		}, nil},
		{"train into infer", map[string][]string{m("train/selflearn"): {m("infer/generate")}},
			[]string{"train/selflearn depends on infer/generate: train may not depend on infer (training never depends on serving)"}},
		{"train into label", map[string][]string{m("train/filtertrain"): {m("label")}},
			[]string{"train/filtertrain depends on label: train may not depend on label (trainers read examples in models/filter's schema, not the labelers and their store)"}},
		{"infer into train", map[string][]string{m("infer/serve"): {m("train/filtertrain")}},
			[]string{"infer/serve depends on train/filtertrain: infer may not depend on train (serving never depends on training)"}},
		{"infer into label", map[string][]string{m("infer/web"): {m("label"), m("models/labelstore")}},
			[]string{"infer/web depends on label: infer may not depend on label (serving reads labels through models/labelstore and language models through models/lm, never the labelers)"}},
		{"models upward", map[string][]string{m("models/t5"): {m("label"), m("retrieval")}},
			[]string{
				"models/t5 depends on label: models may not depend on label (models sit below retrieval)",
				"models/t5 depends on retrieval: models may not depend on retrieval (models sit below retrieval)",
			}},
		{"prefix is not a parent", map[string][]string{m("data"): {m("database")}, m("trainer"): {m("infer")}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Violations(tc.deps, Rules); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Violations =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
