package trainfix

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// ContextGetter reads HF-named parameters ("encoder.block.0.layer.0.…weight")
// of a GoMLX context, whose variables live at the matching /-separated scope.
func ContextGetter(t testing.TB, ctx *context.Context) Getter {
	return func(hf string) ([]float32, []int, bool) {
		i := strings.LastIndexByte(hf, '.')
		v := ctx.GetVariableByScopeAndName("/"+strings.ReplaceAll(hf[:i], ".", "/"), hf[i+1:])
		if v == nil {
			return nil, nil, false
		}
		val, err := v.Value()
		if err != nil {
			t.Fatal(err)
		}
		return tensors.MustCopyFlatData[float32](val), val.Shape().Dimensions, true
	}
}

// GradGetter reads HF-named tensors of a gradient map keyed by variable
// path (trainer.Gradients' result).
func GradGetter(grads map[string]*tensors.Tensor) Getter {
	return func(hf string) ([]float32, []int, bool) {
		g, ok := grads["/"+strings.ReplaceAll(hf, ".", "/")]
		if !ok {
			return nil, nil, false
		}
		return tensors.MustCopyFlatData[float32](g), g.Shape().Dimensions, true
	}
}
