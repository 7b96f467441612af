package archtest

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestPackageNamesUnique fails when two packages of the module share a name
// (main aside), the collision that makes importers alias one of them.
func TestPackageNamesUnique(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	byName := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, path, _ := strings.Cut(l, " ")
		if name != "main" {
			byName[name] = append(byName[name], path)
		}
	}
	for name, paths := range byName {
		if len(paths) > 1 {
			sort.Strings(paths)
			t.Errorf("package name %s is used by %s", name, strings.Join(paths, ", "))
		}
	}
}

// TestNoImportAliases fails when a Go file renames an import of the module
// (blank imports for side effects aside): a package's name is how every
// importer refers to it.
func TestNoImportAliases(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if _, ok := rel(p); ok && im.Name != nil && im.Name.Name != "_" {
				t.Errorf("%s: import %s renamed %s", fset.Position(im.Pos()), p, im.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
