// Package hook is the one place where ragforge reaches into GoMLX v0.26
// internals. It holds two patches, each checked before it is installed and
// each with a way back to GoMLX's own code:
//
//   - DotGeneral on OpenBLAS (dotgeneral.go, gemm.go). GoMLX v0.26's simplego
//     multiplies matrices in plain Go without SIMD (about 2–5 GFLOP/s on this
//     project's 2-core machines) and encoder passes are mostly DotGeneral.
//     simplego has no public way to register an executor, so its executor
//     table and output-buffer pool are reached with go:linkname, and the
//     unexported fields of Node, Buffer and the DotGeneral node data through
//     offsets. Set RAGFORGE_BLAS=off to keep simplego's matmul. The same
//     table holds the multi-core element-wise executors (elementwise.go)
//     and, in its multi-output twin, the RNGBitGenerator one (rng.go);
//     RAGFORGE_PARALLEL_OPS=off keeps simplego's.
//   - Gradients (vjp.go): Rsqrt, which v0.26 lacks, Where against a scalar
//     zero, and DotGeneral as two DotGenerals instead of v0.26's
//     broadcast-and-reduce. They go through
//     GoMLX's public graph.VJPRegistration; only the DotGeneral node's axes
//     are read from an unexported field, with a fallback to GoMLX's VJP.
//
// Before installing the executor, checkLinked checks the linknamed
// executor signature: the binary is built against the GoMLX release the
// copied declarations come from (GoMLXVersion, from the build info) and the
// DotGeneral slot of simplego's table holds simplego's own execDotGeneral.
// Then checkLayout compares the whole field list
// (names and types) of simplego.Node and simplego.Buffer with the v0.26
// layout this code was written against, and a self-test runs the linked
// buffer allocator. Any difference — another GoMLX version — leaves GoMLX's
// executor in place and Status says why; TestStatus then fails, so an
// upgrade cannot silently lose the speed or misread memory.
//
// What would replace it upstream: a public executor registration in the
// pure-Go backend (simplego's own setNodeExecutor with priorityUser, which
// exists but is unexported) and the DotGeneral axes exposed on graph.Node.
// GoMLX v0.28 computes DotGeneral gradients as gemms (vjp.go's job) but
// still has no public executor hook. Measured cost of going without the
// executor patch: docs/benchmarks.md (RAGFORGE_BLAS=off rows).
package hook

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// EnvVar turns the OpenBLAS path off when set to "off", "0", "false" or "no".
const EnvVar = "RAGFORGE_BLAS"

type executor = func(*simplego.Backend, *simplego.Node, []*simplego.Buffer, []bool) (*simplego.Buffer, error)

//go:linkname nodeExecutors github.com/gomlx/gomlx/backends/simplego.nodeExecutors
var nodeExecutors [backends.OpTypeLast]executor

//go:linkname getBufferForShape github.com/gomlx/gomlx/backends/simplego.(*Backend).getBufferForShape
func getBufferForShape(b *simplego.Backend, shape shapes.Shape) *simplego.Buffer

var (
	native       executor // simplego's own DotGeneral executor
	notInstalled string   // why the executor is not in simplego's table; "" when it is
	enabled      atomic.Bool

	// Offsets of the unexported fields read, set by checkLayout.
	nodeData, nodeShape, nodeOpType, nodeMultiShapes, bufShape, bufFlat uintptr
)

// fieldSpec is one struct field as reflect reports it: name and type string.
type fieldSpec struct{ name, typ string }

// The layouts this package was written against (GoMLX v0.26.0,
// backends/simplego/builder.go and buffers.go), field by field.
var (
	wantNode = []fieldSpec{
		{"builderIdx", "int"}, {"inputs", "[]*simplego.Node"}, {"opType", "backends.OpType"},
		{"shape", "shapes.Shape"}, {"builder", "*simplego.Builder"},
		{"multiOutputsShapes", "[]shapes.Shape"}, {"multiOutputsNodes", "[]*simplego.Node"},
		{"isNodeSelectOutput", "bool"}, {"selectOutputIdx", "int"}, {"data", "interface {}"},
	}
	wantBuffer = []fieldSpec{{"shape", "shapes.Shape"}, {"valid", "bool"}, {"flat", "interface {}"}}
)

func init() {
	native = nodeExecutors[backends.OpTypeDotGeneral]
	if err := install(reflect.TypeFor[simplego.Node](), reflect.TypeFor[simplego.Buffer]()); err != nil {
		notInstalled = err.Error()
		return
	}
	nodeExecutors[backends.OpTypeDotGeneral] = execDotGeneral
	enabled.Store(!isOff(os.Getenv(EnvVar)))
	installParallel()
	parallelOn.Store(!isOff(os.Getenv(EnvVarParallel)))
}

func isOff(v string) bool {
	switch strings.ToLower(v) {
	case "off", "0", "false", "no":
		return true
	}
	return false
}

// install runs every check the executor patch depends on, for the given
// Node and Buffer types (parameters so that tests can hand it wrong ones).
func install(node, buf reflect.Type) error {
	if native == nil {
		return fmt.Errorf("simplego registers no DotGeneral executor")
	}
	if err := checkLinked(buildDeps(), native); err != nil {
		return err
	}
	if err := checkLayout(node, buf); err != nil {
		return err
	}
	return selfTest()
}

// checkLayout compares node's and buf's fields with the v0.26 layout and
// records the offsets of the fields read.
func checkLayout(node, buf reflect.Type) error {
	if err := sameFields(node, wantNode); err != nil {
		return err
	}
	if err := sameFields(buf, wantBuffer); err != nil {
		return err
	}
	nodeData, nodeShape, nodeOpType = offset(node, "data"), offset(node, "shape"), offset(node, "opType")
	nodeMultiShapes = offset(node, "multiOutputsShapes")
	bufShape, bufFlat = offset(buf, "shape"), offset(buf, "flat")
	return nil
}

func sameFields(t reflect.Type, want []fieldSpec) error {
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("%s is a %s, want a struct (GoMLX layout changed)", t, t.Kind())
	}
	if t.NumField() != len(want) {
		return fmt.Errorf("%s has %d fields, want %d (GoMLX layout changed)", t, t.NumField(), len(want))
	}
	for i, w := range want {
		f := t.Field(i)
		if f.Name != w.name || f.Type.String() != w.typ {
			return fmt.Errorf("%s field %d is %s %s, want %s %s (GoMLX layout changed)", t, i, f.Name, f.Type, w.name, w.typ)
		}
	}
	return nil
}

func offset(t reflect.Type, name string) uintptr {
	f, _ := t.FieldByName(name)
	return f.Offset
}

// selfTest calls the linked buffer allocator once and checks what it
// returns, so a changed signature is caught here rather than mid-graph.
func selfTest() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("self-test of simplego's getBufferForShape panicked: %v", r)
		}
	}()
	be, err := simplego.New("ops_sequential")
	if err != nil {
		return fmt.Errorf("self-test: %w", err)
	}
	defer be.Finalize()
	want := shapes.Make(dtypes.Float32, 3, 5)
	b := getBufferForShape(be.(*simplego.Backend), want)
	if b == nil {
		return fmt.Errorf("self-test: getBufferForShape returned nil")
	}
	got := field[shapes.Shape](unsafe.Pointer(b), bufShape)
	flat, ok := field[any](unsafe.Pointer(b), bufFlat).([]float32)
	if !got.Equal(want) || !ok || len(flat) != want.Size() {
		return fmt.Errorf("self-test: getBufferForShape(%s) gave shape %s and %d float32s", want, got, len(flat))
	}
	return nil
}

// Status describes which matmul the pure-Go backend uses now, and why when
// it is not OpenBLAS.
func Status() string {
	switch {
	case notInstalled != "":
		return "simplego matmul (OpenBLAS hook not installed: " + notInstalled + ")"
	case !enabled.Load():
		return "simplego matmul (OpenBLAS switched off: " + EnvVar + "=" + os.Getenv(EnvVar) + " or SetEnabled(false))"
	}
	return "OpenBLAS sgemm/dgemm"
}

// ParallelStatus describes how the element-wise ops run.
func ParallelStatus() string {
	switch {
	case notInstalled != "":
		return "simplego element-wise ops (hook not installed)"
	case !parallelOn.Load():
		return "simplego element-wise ops (" + EnvVarParallel + "=" + os.Getenv(EnvVarParallel) + " or SetParallel(false))"
	}
	return fmt.Sprintf("element-wise ops on %d cores from %d elements", runtime.GOMAXPROCS(0), parallelMin)
}

// SetParallel switches the multi-core element-wise executors on or off for
// ops executed from now on and returns the previous setting (no effect when
// the hook is not installed).
func SetParallel(on bool) (prev bool) {
	if notInstalled != "" {
		return false
	}
	return parallelOn.Swap(on)
}

// Enabled reports whether DotGeneral runs on OpenBLAS (float32 and float64).
func Enabled() bool { return enabled.Load() }

// SetEnabled switches between OpenBLAS and simplego's own DotGeneral for
// graphs executed from now on, and returns the previous setting. It has no
// effect when the hook could not be installed (see Status). Meant for tests
// and benchmarks comparing the two.
func SetEnabled(on bool) (prev bool) {
	if notInstalled != "" {
		return false
	}
	return enabled.Swap(on)
}
