package demo

import (
	"strconv"
	"strings"
)

// The summary lists, for every stage, the stand-alone commands that
// reproduce its figures; these functions render them from the settings
// the stage passed to the library.

// command renders an equivalent shell command for the summary.
func (st *state) command(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t\"'") || a == "" {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return "ragforge --db " + st.db + " " + strings.Join(q, " ")
}

func (st *state) chunkArgs() []string {
	return []string{"--corpus", st.corpus, "--chunk-size", strconv.Itoa(st.o.ChunkSize), "--chunk-overlap", strconv.Itoa(st.o.Overlap)}
}

// recipeArgs names an explicit recipe; auto is left to the command.
func (st *state) recipeArgs() []string {
	if st.o.Recipe == "" || st.o.Recipe == "auto" {
		return nil
	}
	return []string{"--recipe", st.o.Recipe}
}

// itoa and ftoa render flag values that parse back to the same numbers.
func itoa[I int | int64](v I) string { return strconv.FormatInt(int64(v), 10) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// floats renders fs as a comma-separated flag value that parses back to
// the same floats.
func floats(fs []float64) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = ftoa(f)
	}
	return strings.Join(parts, ",")
}
