package hook

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>

void openblas_set_num_threads(int num_threads);

// Batched row-major GEMM: for each i < batch, C[i] (m×n, leading dimension
// ldc) = op(A[i]) · op(B[i]), with A[i] at a + offA[i] (or a + i·strideA
// when offA is NULL), B[i] likewise, C[i] at c + i·strideC. One cgo call for
// the whole batch keeps the call overhead off the many small per-head
// attention products; the offsets let batch matrices sit anywhere in an
// operand used in place (heads inside [B, L, H, d]).
static void batched_sgemm(int transA, int transB, int batch, int m, int n, int k,
		const float *a, int lda, long strideA, const long *offA,
		const float *b, int ldb, long strideB, const long *offB,
		float *c, int ldc, long strideC) {
	for (int i = 0; i < batch; i++) {
		cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
			m, n, k, 1.0f, a + (offA ? offA[i] : i*strideA), lda, b + (offB ? offB[i] : i*strideB), ldb,
			0.0f, c + i*strideC, ldc);
	}
}

static void batched_dgemm(int transA, int transB, int batch, int m, int n, int k,
		const double *a, int lda, long strideA, const long *offA,
		const double *b, int ldb, long strideB, const long *offB,
		double *c, int ldc, long strideC) {
	for (int i = 0; i < batch; i++) {
		cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
			m, n, k, 1.0, a + (offA ? offA[i] : i*strideA), lda, b + (offB ? offB[i] : i*strideB), ldb,
			0.0, c + i*strideC, ldc);
	}
}
*/
import "C"

import (
	"runtime"
	"sync"
)

// OpenBLAS's own worker threads busy-wait (sched_yield) for a while after
// each call: on 2 cores that burnt a third of a self-learning round's CPU
// time in system calls and would steal CPU from whatever runs beside it
// (parallel test packages, FAISS's OpenMP threads). So OpenBLAS runs
// single-threaded and large products are split across goroutines instead,
// which sleep when idle.
func init() { C.openblas_set_num_threads(1) }

// minParallelFlops is the size below which a product is not split: about
// 15 µs of single-core work, well above a goroutine hand-off.
const minParallelFlops = 1 << 20

// operand is one side of a batched product as laid out in memory: batch
// matrices of rows×cols each, row-major with leading dimension ld (cols
// when the matrix is contiguous), used transposed when trans is set. Batch
// matrix i starts at offs[i], or at i·rows·cols when offs is nil.
type operand struct {
	trans      bool
	rows, cols int
	ld         int
	offs       []int
}

// batchOffsets returns the C view of o.offs for batches [b0, b1) (nil when
// the batch matrices are contiguous) and the base index of batch b0 used
// with it.
func batchOffsets(o operand, b0, b1 int) (*C.long, int) {
	if o.offs == nil {
		return nil, b0 * o.rows * o.cols
	}
	offs := make([]C.long, b1-b0)
	for i := range offs {
		offs[i] = C.long(o.offs[b0+i])
	}
	return &offs[0], 0
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// part is a slice of a batched product: batches [b0, b1), rows [r0, r1) of
// op(A) and C.
type part struct{ b0, b1, r0, r1 int }

// split cuts a batch×m×n×k product into at most GOMAXPROCS parts: whole
// batches when there are enough of them, else row blocks of op(A) and C.
func split(batch, m, n, k int) []part {
	p := runtime.GOMAXPROCS(0)
	if p <= 1 || 2*batch*m*n*k < minParallelFlops {
		return []part{{0, batch, 0, m}}
	}
	var parts []part
	if batch >= p {
		for i := range p {
			parts = append(parts, part{batch * i / p, batch * (i + 1) / p, 0, m})
		}
		return parts
	}
	for b := range batch {
		q := max(1, min((p+batch-1)/batch, m/8)) // row blocks of at least 8 rows
		for i := range q {
			parts = append(parts, part{b, b + 1, m * i / q, m * (i + 1) / q})
		}
	}
	return parts
}

// run calls f on every part, concurrently when there are several.
func run(parts []part, f func(part)) {
	if len(parts) == 1 {
		f(parts[0])
		return
	}
	var wg sync.WaitGroup
	for _, pt := range parts[1:] {
		wg.Go(func() { f(pt) })
	}
	f(parts[0])
	wg.Wait()
}

// aOffset is where row r of op(A) starts within one batch matrix: a row of
// the stored matrix, or a column when A is used transposed.
func aOffset(oa operand, r int) int {
	if oa.trans {
		return r
	}
	return r * oa.ld
}

// sgemm computes c[b] = op(a[b])·op(b[b]) for b < batch, where op(a[b]) is
// m×k and op(b[b]) is k×n; c is batch×m×n, row-major.
func sgemm(batch, m, n, k int, a []float32, oa operand, b []float32, ob operand, c []float32) {
	sa, sb := oa.rows*oa.cols, ob.rows*ob.cols
	run(split(batch, m, n, k), func(p part) {
		offA, baseA := batchOffsets(oa, p.b0, p.b1)
		offB, baseB := batchOffsets(ob, p.b0, p.b1)
		C.batched_sgemm(cbool(oa.trans), cbool(ob.trans), C.int(p.b1-p.b0), C.int(p.r1-p.r0), C.int(n), C.int(k),
			(*C.float)(&a[baseA+aOffset(oa, p.r0)]), C.int(oa.ld), C.long(sa), offA,
			(*C.float)(&b[baseB]), C.int(ob.ld), C.long(sb), offB,
			(*C.float)(&c[p.b0*m*n+p.r0*n]), C.int(n), C.long(m*n))
	})
}

// dgemm is sgemm for float64.
func dgemm(batch, m, n, k int, a []float64, oa operand, b []float64, ob operand, c []float64) {
	sa, sb := oa.rows*oa.cols, ob.rows*ob.cols
	run(split(batch, m, n, k), func(p part) {
		offA, baseA := batchOffsets(oa, p.b0, p.b1)
		offB, baseB := batchOffsets(ob, p.b0, p.b1)
		C.batched_dgemm(cbool(oa.trans), cbool(ob.trans), C.int(p.b1-p.b0), C.int(p.r1-p.r0), C.int(n), C.int(k),
			(*C.double)(&a[baseA+aOffset(oa, p.r0)]), C.int(oa.ld), C.long(sa), offA,
			(*C.double)(&b[baseB]), C.int(ob.ld), C.long(sb), offB,
			(*C.double)(&c[p.b0*m*n+p.r0*n]), C.int(n), C.long(m*n))
	})
}
