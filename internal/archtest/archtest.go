// Package archtest checks the direction of ragforge's package dependencies
// (docs/architecture.md): cmd, demo → infer, train, label → retrieval,
// models → data → internal, with no dependency between train and infer or from train
// or infer to label, and none upward from internal, data, models or
// retrieval. The checks run as tests over `go list`: Rules over each
// package's build, TableViolations over every import edge (test files
// included) against the doc's package map.
package archtest

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the module path of ragforge.
const Module = "github.com/ragforge/ragforge"

// Rule forbids packages under From (module-relative, e.g. "train") to depend
// on packages under any of To.
type Rule struct {
	From string
	To   []string
	Why  string
}

// Rules are the dependency directions of docs/architecture.md.
var Rules = []Rule{
	{"demo", []string{"cmd"}, "the demo is a library the CLI calls, never the CLI by its flags"},
	{"train", []string{"infer", "cmd", "demo"}, "training never depends on serving"},
	{"train", []string{"label"}, "trainers read examples in models/filter's schema, not the labelers and their store"},
	{"infer", []string{"train", "cmd", "demo"}, "serving never depends on training"},
	{"infer", []string{"label"}, "serving reads labels through models/labelstore and language models through models/lm, never the labelers"},
	{"label", []string{"train", "infer", "cmd", "demo"}, "labelers sit beside train and infer"},
	{"data", []string{"train", "infer", "label", "cmd", "demo", "models", "retrieval"}, "data is the bottom floor"},
	{"models", []string{"train", "infer", "label", "cmd", "demo", "retrieval"}, "models sit below retrieval"},
	{"retrieval", []string{"train", "infer", "label", "cmd", "demo"}, "retrieval sits below train and infer"},
	{"internal", []string{"train", "infer", "label", "cmd", "demo", "retrieval", "models", "data"}, "internal is the bottom floor: helpers with no domain"},
}

// under reports whether module-relative path rel is dir or inside it.
func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

// rel returns the module-relative path of an import path and whether it is
// inside the module.
func rel(importPath string) (string, bool) {
	if importPath == Module {
		return "", true
	}
	r, ok := strings.CutPrefix(importPath, Module+"/")
	return r, ok
}

// Violations returns, sorted, one line per (package, dependency) pair of
// deps (import path → its dependencies, transitive or direct) that breaks a
// rule. Paths outside the module are ignored.
func Violations(deps map[string][]string, rules []Rule) []string {
	var out []string
	for pkg, ds := range deps {
		p, ok := rel(pkg)
		if !ok {
			continue
		}
		for _, r := range rules {
			if !under(p, r.From) {
				continue
			}
			for _, d := range ds {
				q, ok := rel(d)
				if !ok {
					continue
				}
				for _, to := range r.To {
					if under(q, to) {
						out = append(out, fmt.Sprintf("%s depends on %s: %s may not depend on %s (%s)", p, q, r.From, to, r.Why))
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
