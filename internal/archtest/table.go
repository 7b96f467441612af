package archtest

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Floors are the top-level folders of the module, bottom floor last; a
// package's floor is its first path element ("retrieval" holds both
// retrieval and retrieval/dense).
var Floors = []string{"cmd", "demo", "infer", "train", "label", "retrieval", "models", "data", "internal"}

// Everything is the "May import" entry of a package that may import any
// floor (only cmd/ragforge).
const Everything = "everything"

// Allowed is one row of the package map: the floors a package's production
// files may import and the further floors only its test files may import.
// Every package may import internal/… (the bottom floor, which imports no
// other floor); only test code and test helpers may import a test helper
// (IsTestHelper).
type Allowed struct {
	Prod  []string
	Tests []string
}

// tableRow matches a package row of docs/architecture.md's map:
// | `pkg` | holds | may import |.
var tableRow = regexp.MustCompile("(?m)^\\| `([a-z0-9_/]+)` \\|.*\\| ([^|]+) \\|$")

// ParseTable reads the package map of docs/architecture.md: package
// (module-relative) → its "May import" column. The column is a comma list of
// floors, optionally followed by "; tests: " and the floors test files may
// import besides (parity checks across floors). It fails on an unknown
// floor or a package listed twice.
func ParseTable(doc string) (map[string]Allowed, error) {
	known := map[string]bool{Everything: true}
	for _, f := range Floors {
		known[f] = true
	}
	list := func(pkg, s string) ([]string, error) {
		var out []string
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			if !known[f] {
				return nil, fmt.Errorf("package %s: May import names %q, not a floor (%s or %s)", pkg, f, strings.Join(Floors, ", "), Everything)
			}
			out = append(out, f)
		}
		return out, nil
	}
	table := map[string]Allowed{}
	for _, m := range tableRow.FindAllStringSubmatch(doc, -1) {
		pkg, col := m[1], strings.TrimSpace(m[2])
		if _, dup := table[pkg]; dup {
			return nil, fmt.Errorf("package %s listed twice", pkg)
		}
		prod, tests, hasTests := strings.Cut(col, ";")
		var a Allowed
		var err error
		if a.Prod, err = list(pkg, prod); err != nil {
			return nil, err
		}
		if hasTests {
			rest, ok := strings.CutPrefix(strings.TrimSpace(tests), "tests:")
			if !ok {
				return nil, fmt.Errorf("package %s: May import %q: after ';' expected \"tests: floors\"", pkg, col)
			}
			if a.Tests, err = list(pkg, rest); err != nil {
				return nil, err
			}
		}
		table[pkg] = a
	}
	return table, nil
}

// floor returns the floor of a module-relative package path.
func floor(rel string) string {
	f, _, _ := strings.Cut(rel, "/")
	return f
}

// IsTestHelper reports whether a module-relative package holds test helpers
// (a "testutil" path element: internal/testutil, models/testutil/tinyt5),
// which production code may not import.
func IsTestHelper(rel string) bool {
	for _, e := range strings.Split(rel, "/") {
		if e == "testutil" {
			return true
		}
	}
	return false
}

func allows(floors []string, f string) bool {
	for _, g := range floors {
		if g == f || g == Everything {
			return true
		}
	}
	return false
}

// Imports are one package's direct imports: Prod from its non-test files,
// Test from its _test.go files (in-package and external).
type Imports struct {
	Prod, Test []string
}

// TableViolations returns, sorted, one line per import edge of imports
// (import path → direct imports) that the table does not declare: a floor
// missing from the package's row, a test-only floor used by production
// code, production code importing a test helper, or a package without a
// row. Paths outside the module are ignored.
func TableViolations(imports map[string]Imports, table map[string]Allowed) []string {
	var out []string
	for pkg, im := range imports {
		p, ok := rel(pkg)
		if !ok {
			continue
		}
		a, ok := table[p]
		if !ok {
			out = append(out, fmt.Sprintf("%s: no row in the package map", p))
			continue
		}
		check := func(deps []string, test bool) {
			for _, d := range deps {
				q, ok := rel(d)
				if !ok || q == p {
					continue
				}
				switch f := floor(q); {
				case !test && IsTestHelper(q) && !IsTestHelper(p):
					out = append(out, fmt.Sprintf("%s imports %s: production code may not import a test helper", p, q))
				case f == "internal":
				case allows(a.Prod, f):
				case test && allows(a.Tests, f):
				case test:
					out = append(out, fmt.Sprintf("%s (tests) imports %s: floor %s is not in its May import (%s; tests: %s)", p, q, f, strings.Join(a.Prod, ", "), strings.Join(a.Tests, ", ")))
				default:
					out = append(out, fmt.Sprintf("%s imports %s: floor %s is not in its May import (%s)", p, q, f, strings.Join(a.Prod, ", ")))
				}
			}
		}
		check(im.Prod, false)
		check(im.Test, true)
	}
	sort.Strings(out)
	return out
}
