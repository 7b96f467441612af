package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Command package limits (docs/architecture.md): cmd/ragforge holds flag
// parsing, output formatting and library calls, so its functions stay short
// and its files small; logic that outgrows these belongs to a library.
const (
	MaxCommandFuncLines = 60
	MaxCommandFileLines = 300
)

// ThinViolations lists the non-test Go files in dir over maxFile lines and
// the functions (declarations and literals, brace to brace) over maxFunc
// lines, as "file:line: …" strings in file order.
func ThinViolations(dir string, maxFunc, maxFile int) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		af, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			return nil, err
		}
		base := filepath.Base(f)
		if n := fset.File(af.Pos()).LineCount(); n > maxFile {
			out = append(out, fmt.Sprintf("%s: %d lines, want at most %d", base, n, maxFile))
		}
		ast.Inspect(af, func(n ast.Node) bool {
			var body *ast.BlockStmt
			name := "func literal"
			switch x := n.(type) {
			case *ast.FuncDecl:
				body, name = x.Body, x.Name.Name
			case *ast.FuncLit:
				body = x.Body
			}
			if body != nil {
				start, end := fset.Position(body.Lbrace).Line, fset.Position(body.Rbrace).Line
				if l := end - start + 1; l > maxFunc {
					out = append(out, fmt.Sprintf("%s:%d: %s is %d lines, want at most %d", base, start, name, l, maxFunc))
				}
			}
			return true
		})
	}
	return out, nil
}
