package hook

import (
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
)

// GoMLXModule and GoMLXVersion name the release whose unexported
// declarations the go:linkname symbols of this package copy: simplego's
// nodeExecutors table of
//
//	type nodeExecutor func(backend *Backend, node *Node, inputs []*Buffer, inputsOwned []bool) (*Buffer, error)
//
// (backends/simplego/exec.go), its multiOutputsNodeExecutors twin (the same
// arguments, returning []*Buffer), and (*Backend).getBufferForShape(shapes.Shape)
// *Buffer (buffers.go). The linker checks neither signature: another
// release with another signature would be called with the wrong arguments.
const (
	GoMLXModule  = "github.com/gomlx/gomlx"
	GoMLXVersion = "v0.26.0"
)

// nativeDotGeneral is the function simplego v0.26 registers for DotGeneral
// (dotgeneral.go: setNodeExecutor(backends.OpTypeDotGeneral, …, execDotGeneral)).
const nativeDotGeneral = GoMLXModule + "/backends/simplego.execDotGeneral"

// checkLinked is the start-up check of the linknamed executor signature:
// the binary must be built against GoMLXVersion (go.mod, or a replace
// pointing at it), so that the copied declarations are the linked ones, and
// the table slot read as DotGeneral's must hold simplego's execDotGeneral,
// so the table is indexed as this package assumes. deps are the binary's
// module dependencies (debug.ReadBuildInfo; nil when unavailable, then only
// the slot is checked) and slot the function found in the table.
func checkLinked(deps []*debug.Module, slot any) error {
	for _, d := range deps {
		if d.Path != GoMLXModule {
			continue
		}
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		if m.Version != GoMLXVersion {
			return fmt.Errorf("built with %s %s, the linknamed executor signature is %s's", GoMLXModule, m.Version, GoMLXVersion)
		}
	}
	v := reflect.ValueOf(slot)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return fmt.Errorf("simplego's DotGeneral executor slot is empty")
	}
	if name := funcName(slot); name != nativeDotGeneral {
		return fmt.Errorf("simplego's DotGeneral executor slot holds %s, want %s (executor table changed)", name, nativeDotGeneral)
	}
	return nil
}

// buildDeps returns the module dependencies of the running binary.
func buildDeps() []*debug.Module {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Deps
	}
	return nil
}

// funcName is the linker's name of the function value f.
func funcName(f any) string {
	v := reflect.ValueOf(f)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	return runtime.FuncForPC(v.Pointer()).Name()
}
