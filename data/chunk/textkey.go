package chunk

import (
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// TextKey is the identity of a passage for duplicate detection: Unicode NFC,
// full case folding (golang.org/x/text/cases.Fold, so "SS" and "ss" agree),
// whitespace collapsed to one space and trimmed (Collapse), NFC again (case
// folding can decompose). Two chunks, or a chunk and a query, whose keys are
// equal are the same text: hard-negative mining excludes such a candidate
// and InfoNCE masks it (FlagEmbedding's hn_mine compares raw strings and so
// keeps copies of the positive as negatives).
func TextKey(s string) string {
	return norm.NFC.String(Collapse(cases.Fold().String(norm.NFC.String(s))))
}
