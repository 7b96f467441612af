package archtest

import (
	"sort"
	"testing"
)

// TestArchitectureDoc fails when docs/architecture.md's package map misses a
// package of the module or lists one that does not exist (twice: ParseTable).
func TestArchitectureDoc(t *testing.T) {
	listed := readTable(t)
	var missing []string
	for pkg := range goList(t, "Imports") {
		p, ok := rel(pkg)
		if !ok {
			continue
		}
		if _, ok := listed[p]; !ok {
			missing = append(missing, p)
		}
		delete(listed, p)
	}
	sort.Strings(missing)
	for _, p := range missing {
		t.Errorf("%s: package %s is not in the package map", docPath, p)
	}
	var extra []string
	for p := range listed {
		extra = append(extra, p)
	}
	sort.Strings(extra)
	for _, p := range extra {
		t.Errorf("%s: package map lists %s, which is not a package of the module", docPath, p)
	}
}
