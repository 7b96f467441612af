package archtest

import (
	"os"
	"regexp"
	"sort"
	"testing"
)

// docRow matches a package row of the map in docs/architecture.md.
var docRow = regexp.MustCompile("(?m)^\\| `([a-z0-9_/]+)` \\|")

// TestArchitectureDoc fails when docs/architecture.md's package map misses a
// package of the module or lists one that does not exist (or twice).
func TestArchitectureDoc(t *testing.T) {
	const path = "../../docs/architecture.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range docRow.FindAllStringSubmatch(string(b), -1) {
		if listed[m[1]] {
			t.Errorf("%s: package %s listed twice", path, m[1])
		}
		listed[m[1]] = true
	}
	var missing []string
	for pkg := range goList(t, "Imports") {
		p, ok := rel(pkg)
		if !ok {
			continue
		}
		if !listed[p] {
			missing = append(missing, p)
		}
		delete(listed, p)
	}
	sort.Strings(missing)
	for _, p := range missing {
		t.Errorf("%s: package %s is not in the package map", path, p)
	}
	var extra []string
	for p := range listed {
		extra = append(extra, p)
	}
	sort.Strings(extra)
	for _, p := range extra {
		t.Errorf("%s: package map lists %s, which is not a package of the module", path, p)
	}
}
