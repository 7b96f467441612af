// Package catch turns panics into errors at the boundary of graph code.
//
// GoMLX reports graph-building and execution failures by panicking (see its
// docs/error_handling.md); ragforge's APIs return errors instead, so every
// call into a graph goes through Do or Exec.
package catch

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Do runs fn and returns the value of a panic raised inside it as an error:
// the value itself when it is an error (so errors.Is/As still see it),
// otherwise its fmt "%v" text. It returns nil when fn returns normally.
func Do(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	fn()
	return nil
}

// Execer is a compiled graph executor: *graph.Exec and *context.Exec.
type Execer interface {
	Exec(args ...any) ([]*tensors.Tensor, error)
}

// Exec runs e.Exec(args...), returning a panic raised inside it as an error
// the way Do does; on a panic the outputs are nil.
func Exec(e Execer, args ...any) (out []*tensors.Tensor, err error) {
	if perr := Do(func() { out, err = e.Exec(args...) }); perr != nil {
		return nil, perr
	}
	return out, err
}
