// Element-wise ops across all cores. GoMLX v0.26's simplego runs them in one
// goroutine (its own parallel scheduling deadlocks on 2 cores, see
// models/backend.DefaultGoOptions), and with matrix products on OpenBLAS they
// take most of a training step. For float32 tensors of at least
// parallelMin elements, the executors (elementwise_unary.go, _binary.go,
// _copy.go for transpose and broadcast-in-dim, _reduce.go, _convert.go for
// bfloat16 weights widened to float32 and random bits to floats, _select.go
// for comparisons and Where) split the output
// into one contiguous block per core, each computed by its own goroutine
// (never waiting on simplego's worker pool, so they cannot deadlock). Every
// element is computed with exactly simplego's expression (the same float64
// round trip for transcendental functions, the same accumulation order for
// reductions), so results are bit-identical to simplego's whatever the split
// (a NaN may differ in sign and payload); TestElementwiseBitIdentical checks
// it against simplego's own executors. Smaller tensors, other dtypes and
// operands of different ranks go to simplego's executor. rng.go does the
// same for the random bits of dropout masks.

package hook

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// parallelMin is the size from which an op is split across cores: below it
// the goroutine hand-off costs more than it saves.
const parallelMin = 1 << 15

// EnvVarParallel turns the multi-core element-wise executors off when set to
// "off" (simplego's single-threaded ones then run).
const EnvVarParallel = "RAGFORGE_PARALLEL_OPS"

var (
	parallelOn  atomic.Bool
	nativeOps   [backends.OpTypeLast]executor // simplego's executors that the parallel ones replace
	parallelOps = map[backends.OpType]bool{}  // the op types installed
)

var unaryOpTypes = []backends.OpType{
	backends.OpTypeNeg, backends.OpTypeAbs, backends.OpTypeExp, backends.OpTypeLog,
	backends.OpTypeSqrt, backends.OpTypeRsqrt, backends.OpTypeTanh, backends.OpTypeLogistic, backends.OpTypeErf,
}

var binaryOpTypes = []backends.OpType{
	backends.OpTypeAdd, backends.OpTypeSub, backends.OpTypeMul, backends.OpTypeDiv,
	backends.OpTypeMax, backends.OpTypeMin, backends.OpTypePow,
}

// installParallel puts the parallel executors in simplego's table; called
// from init after the layout checks passed.
func installParallel() {
	installLayoutOps()
	for _, op := range unaryOpTypes {
		installOp(op, execUnary)
	}
	for _, op := range binaryOpTypes {
		installOp(op, execBinary)
	}
	installOp(backends.OpTypeConvertDType, execConvert)
	for _, op := range compareOpTypes {
		installOp(op, execCompare)
	}
	installOp(backends.OpTypeWhere, execWhere)
	installRNG()
}

// installRNG replaces simplego's RNGBitGenerator executor when its slot
// holds the v0.26 function whose stream rng.go reproduces.
func installRNG() {
	slot := multiOutputExecutors[backends.OpTypeRNGBitGenerator]
	if slot == nil || funcName(slot) != nativeRNG {
		return
	}
	nativeRNGExec = slot
	multiOutputExecutors[backends.OpTypeRNGBitGenerator] = execRNG
	parallelOps[backends.OpTypeRNGBitGenerator] = true
}

func installOp(op backends.OpType, exec executor) {
	if nodeExecutors[op] == nil {
		return
	}
	nativeOps[op] = nodeExecutors[op]
	nodeExecutors[op] = exec
	parallelOps[op] = true
}

// parallelFor runs fn over the items [0, n) split into one contiguous block
// per core, the last block in this goroutine, when the op touches at least
// parallelMin elements (work); else in one call.
func parallelFor(n, work int, fn func(lo, hi int)) {
	p := min(runtime.GOMAXPROCS(0), n)
	if p < 2 || work < parallelMin {
		fn(0, n)
		return
	}
	block := (n + p - 1) / p
	var wg sync.WaitGroup
	lo := 0
	for ; lo+block < n; lo += block {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, lo+block)
	}
	fn(lo, n)
	wg.Wait()
}

func opOf(node *simplego.Node) backends.OpType {
	return field[backends.OpType](unsafe.Pointer(node), nodeOpType)
}

func shapeOfBuf(b *simplego.Buffer) shapes.Shape {
	return field[shapes.Shape](unsafe.Pointer(b), bufShape)
}

func flat32(b *simplego.Buffer) []float32 {
	f, _ := field[any](unsafe.Pointer(b), bufFlat).([]float32)
	return f
}

func parallelEnabled(n int) bool {
	return parallelOn.Load() && n >= parallelMin && runtime.GOMAXPROCS(0) > 1
}

// installLayoutOps adds the data-movement and reduction executors.
func installLayoutOps() {
	installOp(backends.OpTypeTranspose, execTranspose)
	installOp(backends.OpTypeBroadcastInDim, execBroadcastInDim)
	installOp(backends.OpTypeReduceSum, execReduce)
	installOp(backends.OpTypeReduceMax, execReduce)
}

func nodeIntsData(node *simplego.Node) ([]int, bool) {
	v, ok := field[any](unsafe.Pointer(node), nodeData).([]int)
	return v, ok
}
