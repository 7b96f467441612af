package main

import "testing"

func TestFmtNum(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		prec int
		sign bool
		want string
	}{
		{72, 3, false, "72"},
		{0.25, 4, false, "0.2500"},
		{-3, 4, true, "-3"},
		{2, 4, true, "+2"},
		{0.125, 3, true, "+0.125"},
		{1e20, 2, false, "100000000000000000000.00"},
	} {
		if got := fmtNum(tc.v, tc.prec, tc.sign); got != tc.want {
			t.Errorf("fmtNum(%v, %d, %v) = %q, want %q", tc.v, tc.prec, tc.sign, got, tc.want)
		}
	}
	if got := formatCounts(map[string]int{"b": 1, "a": 1, "c": 3}); got != "c 3, a 1, b 1" {
		t.Errorf("formatCounts = %q", got)
	}
}
