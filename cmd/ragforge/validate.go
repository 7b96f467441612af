package main

import (
	"fmt"
	"math"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Flag checks run once, at the edge, before a command does any work
// (root's PersistentPreRunE): a value that makes no sense is an error naming
// the flag, never a silent default.

// minAnnotation holds the smallest value an int flag accepts.
const minAnnotation = "ragforge_min"

// minInt makes each named int flag of f refuse values below min; flags whose
// zero means something ("0 = all") use min 0, flags where zero is nonsense 1.
// It panics on a name f does not define, so a typo fails every test.
func minInt(f *pflag.FlagSet, min int, names ...string) {
	for _, n := range names {
		if f.Lookup(n) == nil {
			panic("minInt: no flag --" + n)
		}
		if err := f.SetAnnotation(n, minAnnotation, []string{strconv.Itoa(min)}); err != nil {
			panic(err)
		}
	}
}

// checkFlags refuses NaN or infinite values of every float flag, and int
// flags below their minInt bound, of cmd (its own and inherited flags).
func checkFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if err != nil {
			return
		}
		switch fl.Value.Type() {
		case "float64", "float32":
			v, perr := strconv.ParseFloat(fl.Value.String(), 64)
			if perr == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
				err = fmt.Errorf("--%s %s: not a finite number", fl.Name, fl.Value.String())
			}
		}
		if ann, ok := fl.Annotations[minAnnotation]; ok && len(ann) == 1 {
			min, _ := strconv.Atoi(ann[0])
			v, perr := strconv.Atoi(fl.Value.String())
			if perr == nil && v < min {
				err = fmt.Errorf("--%s %d: must be at least %d", fl.Name, v, min)
			}
		}
	})
	return err
}
