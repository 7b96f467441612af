package catch

import (
	"errors"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

var errSentinel = errors.New("sentinel")

func TestDo(t *testing.T) {
	tests := []struct {
		name    string
		fn      func()
		wantErr string // "" means nil
		wantIs  error
	}{
		{"returns normally", func() {}, "", nil},
		{"panics with an error", func() { panic(errSentinel) }, "sentinel", errSentinel},
		{"panics with a string", func() { panic("shape mismatch") }, "shape mismatch", nil},
		{"panics with an int", func() { panic(42) }, "42", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Do(tc.fn)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Do = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Do = %v, want %q", err, tc.wantErr)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Fatalf("errors.Is(%v, %v) = false", err, tc.wantIs)
			}
		})
	}
}

type fakeExec func(args ...any) ([]*tensors.Tensor, error)

func (f fakeExec) Exec(args ...any) ([]*tensors.Tensor, error) { return f(args...) }

func TestExec(t *testing.T) {
	one := tensors.FromValue(float32(1))
	tests := []struct {
		name    string
		e       fakeExec
		wantOut int
		wantErr string
	}{
		{"outputs pass through", func(args ...any) ([]*tensors.Tensor, error) {
			if len(args) != 2 {
				t.Errorf("got %d args, want 2", len(args))
			}
			return []*tensors.Tensor{one}, nil
		}, 1, ""},
		{"returned error passes through", func(...any) ([]*tensors.Tensor, error) {
			return nil, errSentinel
		}, 0, "sentinel"},
		{"panic becomes an error", func(...any) ([]*tensors.Tensor, error) {
			panic("exec failed")
		}, 0, "exec failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Exec(tc.e, "a", "b")
			if len(out) != tc.wantOut {
				t.Fatalf("got %d outputs, want %d", len(out), tc.wantOut)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Exec err = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("Exec err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
