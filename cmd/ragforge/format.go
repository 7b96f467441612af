package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// fmtNum prints a metric value: integers (counts, steps, sizes) without a
// fraction ("72", not "72.000"), anything else with prec decimals. sign
// prefixes "+" to non-negative values (for differences).
func fmtNum(v float64, prec int, sign bool) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		if sign {
			return fmt.Sprintf("%+d", int64(v))
		}
		return strconv.FormatInt(int64(v), 10)
	}
	if sign {
		return fmt.Sprintf("%+.*f", prec, v)
	}
	return fmt.Sprintf("%.*f", prec, v)
}

// formatCounts writes a count map as "a 3, b 1", largest first, then by name.
func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
