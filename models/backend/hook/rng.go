package hook

import (
	"encoding/binary"
	"fmt"
	mbits "math/bits"
	"math/rand/v2"
	"reflect"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// RNGBitGenerator on every core. simplego's executor (exec_special_ops.go)
// seeds math/rand/v2's PCG with the two state words, draws one Uint64 per 8
// output bytes and writes it a byte at a time, in one goroutine: with the
// dropout masks of a training step (a [batch, heads, L, L] uniform tensor
// per attention layer) it took a tenth of the step. This executor writes the
// same stream: each core starts its block of 64-bit words at the PCG state
// jumped ahead to the block's first word (pcgAdvance), draws with
// math/rand/v2's own PCG, and stores whole words; the new state is the one
// simplego returns. TestRNGBitIdentical compares the two on odd sizes.

//go:linkname multiOutputExecutors github.com/gomlx/gomlx/backends/simplego.multiOutputsNodeExecutors
var multiOutputExecutors [backends.OpTypeLast]multiExecutor

type multiExecutor = func(*simplego.Backend, *simplego.Node, []*simplego.Buffer, []bool) ([]*simplego.Buffer, error)

// nativeRNG is the function simplego v0.26 registers for RNGBitGenerator.
const nativeRNG = GoMLXModule + "/backends/simplego.execRNGBitGenerator"

var nativeRNGExec multiExecutor

// rngMinBytes: below it the jump-ahead and goroutines cost more than they save.
const rngMinBytes = 1 << 16

func execRNG(b *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, owned []bool) ([]*simplego.Buffer, error) {
	outs := field[[]shapes.Shape](unsafe.Pointer(node), nodeMultiShapes)
	state := inputs[0]
	st, ok := field[any](unsafe.Pointer(state), bufFlat).([]uint64)
	if len(outs) != 2 || !ok || len(st) < 2 || outs[1].DType == dtypes.Bool {
		return nativeRNGExec(b, node, inputs, owned)
	}
	if n := outs[1].Size() * outs[1].DType.Size(); n < rngMinBytes || !parallelEnabled(n) {
		return nativeRNGExec(b, node, inputs, owned)
	}
	data := getBufferForShape(b, outs[1])
	raw := bytesOf(field[any](unsafe.Pointer(data), bufFlat), outs[1])
	words := (len(raw) + 7) / 8
	hi, lo := st[0], st[1]
	parallelFor(words, words*8, func(w0, w1 int) {
		var p rand.PCG
		p.Seed(pcgAdvance(hi, lo, uint64(w0)))
		for w := w0; w < w1; w++ {
			v := p.Uint64()
			if off := 8 * w; off+8 <= len(raw) {
				binary.LittleEndian.PutUint64(raw[off:], v)
			} else {
				for i := off; i < len(raw); i++ { // the last, partial word: low bytes first
					raw[i] = byte(v)
					v >>= 8
				}
			}
		}
	})
	newState := state
	if owned[0] {
		inputs[0] = nil
	} else {
		newState = getBufferForShape(b, outs[0])
		// Words past the two PCG ones are unused; simplego leaves them as
		// its buffer pool hands them out, zero for a new buffer.
		clear(field[any](unsafe.Pointer(newState), bufFlat).([]uint64))
	}
	nhi, nlo := pcgAdvance(hi, lo, uint64(words))
	// simplego reads PCG.MarshalBinary's big-endian words as little-endian.
	ns := field[any](unsafe.Pointer(newState), bufFlat).([]uint64)
	ns[0], ns[1] = mbits.ReverseBytes64(nhi), mbits.ReverseBytes64(nlo)
	return []*simplego.Buffer{newState, data}, nil
}

// bytesOf views a buffer's flat slice (a []T of s's dtype) as its bytes.
func bytesOf(flat any, s shapes.Shape) []byte {
	v := reflect.ValueOf(flat)
	n := s.Size() * s.DType.Size()
	if v.Kind() != reflect.Slice || v.Len()*int(v.Type().Elem().Size()) != n {
		panic(fmt.Sprintf("hook: RNGBitGenerator output holds %T, want %d bytes of %s", flat, n, s.DType))
	}
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), n)
}

// math/rand/v2's PCG: state = state·mul + inc (mod 2^128).
const (
	pcgMulHi = 2549297995355413924
	pcgMulLo = 4865540595714422341
	pcgIncHi = 6364136223846793005
	pcgIncLo = 1442695040888963407
)

// pcgAdvance returns the PCG state (hi, lo) after n steps, in O(log n)
// (F. Brown, "Random number generation with arbitrary strides", 1994).
func pcgAdvance(hi, lo, n uint64) (uint64, uint64) {
	accMulHi, accMulLo := uint64(0), uint64(1)
	accAddHi, accAddLo := uint64(0), uint64(0)
	curMulHi, curMulLo := uint64(pcgMulHi), uint64(pcgMulLo)
	curAddHi, curAddLo := uint64(pcgIncHi), uint64(pcgIncLo)
	for ; n > 0; n >>= 1 {
		if n&1 == 1 {
			accMulHi, accMulLo = mul128(accMulHi, accMulLo, curMulHi, curMulLo)
			accAddHi, accAddLo = mul128(accAddHi, accAddLo, curMulHi, curMulLo)
			accAddHi, accAddLo = add128(accAddHi, accAddLo, curAddHi, curAddLo)
		}
		// cur = cur∘cur: add' = (mul+1)·add, mul' = mul².
		mp1Hi, mp1Lo := add128(curMulHi, curMulLo, 0, 1)
		curAddHi, curAddLo = mul128(mp1Hi, mp1Lo, curAddHi, curAddLo)
		curMulHi, curMulLo = mul128(curMulHi, curMulLo, curMulHi, curMulLo)
	}
	hi, lo = mul128(accMulHi, accMulLo, hi, lo)
	return add128(hi, lo, accAddHi, accAddLo)
}

func mul128(ah, al, bh, bl uint64) (uint64, uint64) {
	h, l := mbits.Mul64(al, bl)
	return h + ah*bl + al*bh, l
}

func add128(ah, al, bh, bl uint64) (uint64, uint64) {
	l, c := mbits.Add64(al, bl, 0)
	h, _ := mbits.Add64(ah, bh, c)
	return h, l
}
