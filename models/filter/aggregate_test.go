package filter

import (
	"math"
	"testing"
)

func TestAggregate(t *testing.T) {
	wins := []Window{{Example: 0}, {Example: 0}, {Example: 1}, {Example: 0}}
	p := []float64{0.2, 0.6, 0.3, 0.4}
	for rule, want := range map[string][]float64{"": {0.6, 0.3}, AggregateMax: {0.6, 0.3}, AggregateMean: {0.4, 0.3}, AggregateFirst: {0.2, 0.3}} {
		got, count, err := Aggregate(wins, p, 3, rule)
		if err != nil {
			t.Fatalf("%q: %v", rule, err)
		}
		if math.Abs(got[0]-want[0]) > 1e-12 || got[1] != want[1] || got[2] != 0 || count[0] != 3 || count[1] != 1 || count[2] != 0 {
			t.Errorf("%q: %v (counts %v), want %v and 0 for the windowless third", rule, got, count, want)
		}
	}
}

func TestCheckAggregate(t *testing.T) {
	for _, tc := range []struct {
		rule string
		ok   bool
	}{{"", true}, {"max", true}, {"mean", true}, {"first", true}, {"MAX", false}, {"median", false}, {"last", false}} {
		err := CheckAggregate(tc.rule)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAggregate(%q) = %v, want ok=%v", tc.rule, err, tc.ok)
		}
		if _, _, aerr := Aggregate(nil, nil, 0, tc.rule); (aerr == nil) != tc.ok {
			t.Errorf("Aggregate(rule %q) err = %v, want ok=%v", tc.rule, aerr, tc.ok)
		}
	}
}
