package archtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

const docPath = "../../docs/architecture.md"

// readTable parses docs/architecture.md's package map.
func readTable(t *testing.T) map[string]Allowed {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	table, err := ParseTable(string(b))
	if err != nil {
		t.Fatalf("%s: %v", docPath, err)
	}
	return table
}

// goListImports returns each package's direct imports, production and test
// files apart (go list's Imports, TestImports and XTestImports).
func goListImports(t *testing.T) map[string]Imports {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	imports := map[string]Imports{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 3 {
			t.Fatalf("go list line %q", sc.Text())
		}
		imports[f[0]] = Imports{Prod: strings.Fields(f[1]), Test: strings.Fields(f[2])}
	}
	if _, ok := imports[Module+"/internal/archtest"]; !ok {
		t.Fatalf("go list listed %d packages; not run from the module root?", len(imports))
	}
	return imports
}

// TestPackageTable fails on any import edge of the module, test files
// included, that docs/architecture.md's "May import" column does not
// declare, and on production code importing a test helper.
func TestPackageTable(t *testing.T) {
	for _, v := range TableViolations(goListImports(t), readTable(t)) {
		t.Error(v)
	}
}

func TestParseTable(t *testing.T) {
	doc := "| Package | Holds | May import |\n|---|---|---|\n" +
		"| `cmd/ragforge` | the CLI | everything |\n" +
		"| `infer/serve` | server, a | b | infer, retrieval, models, data; tests: train, label |\n" +
		"| `internal/catch` | panics | internal |\n"
	got, err := ParseTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Allowed{
		"cmd/ragforge":   {Prod: []string{"everything"}},
		"infer/serve":    {Prod: []string{"infer", "retrieval", "models", "data"}, Tests: []string{"train", "label"}},
		"internal/catch": {Prod: []string{"internal"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseTable =\n%v\nwant\n%v", got, want)
	}
	for _, bad := range []string{
		"| `a/b` | x | models, dta |\n",
		"| `a/b` | x | models; train |\n",
		"| `a/b` | x | models |\n| `a/b` | y | data |\n",
	} {
		if _, err := ParseTable(bad); err == nil {
			t.Errorf("ParseTable(%q): no error", bad)
		}
	}
}

func TestTableViolations(t *testing.T) {
	m := func(s string) string { return Module + "/" + s }
	table := map[string]Allowed{
		"cmd/ragforge":         {Prod: []string{"everything"}},
		"infer/serve":          {Prod: []string{"infer", "retrieval", "models", "data"}, Tests: []string{"train"}},
		"models/t5":            {Prod: []string{"models", "data"}},
		"internal/catch":       {Prod: []string{"internal"}},
		"internal/testutil":    {Prod: []string{"internal"}},
		"models/testutil/tiny": {Prod: []string{"models", "data"}},
	}
	tests := []struct {
		name    string
		imports map[string]Imports
		want    []string
	}{
		{"declared", map[string]Imports{
			m("cmd/ragforge"):         {Prod: []string{m("train/filtertrain"), m("infer/serve"), "fmt"}, Test: []string{m("internal/testutil")}},
			m("infer/serve"):          {Prod: []string{m("models/t5"), m("internal/catch")}, Test: []string{m("train/filtertrain"), m("models/testutil/tiny")}},
			m("models/testutil/tiny"): {Prod: []string{m("internal/testutil"), m("models/t5")}},
		}, nil},
		{"undeclared floor", map[string]Imports{m("models/t5"): {Prod: []string{m("retrieval/encode")}}},
			[]string{"models/t5 imports retrieval/encode: floor retrieval is not in its May import (models, data)"}},
		{"undeclared in tests", map[string]Imports{m("infer/serve"): {Test: []string{m("label")}}},
			[]string{"infer/serve (tests) imports label: floor label is not in its May import (infer, retrieval, models, data; tests: train)"}},
		{"test-only floor in production", map[string]Imports{m("infer/serve"): {Prod: []string{m("train/filtertrain")}}},
			[]string{"infer/serve imports train/filtertrain: floor train is not in its May import (infer, retrieval, models, data)"}},
		{"production imports a test helper", map[string]Imports{m("models/t5"): {Prod: []string{m("internal/testutil"), m("models/testutil/tiny")}}},
			[]string{
				"models/t5 imports internal/testutil: production code may not import a test helper",
				"models/t5 imports models/testutil/tiny: production code may not import a test helper",
			}},
		{"internal climbing", map[string]Imports{m("internal/catch"): {Prod: []string{m("models/backend")}}},
			[]string{"internal/catch imports models/backend: floor models is not in its May import (internal)"}},
		{"no row", map[string]Imports{m("retrieval/new"): {}}, []string{"retrieval/new: no row in the package map"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := TableViolations(tc.imports, table); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("TableViolations =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
