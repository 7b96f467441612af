package filter

import (
	"strings"
	"testing"
)

func TestInstructionRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, evidence, question string
		want                     string
	}{
		{"plain", "Aspirin inhibits COX-1.", "What does aspirin inhibit?",
			"Given the following evidence, determine whether it helps answer the provided question.\n\nEvidence: Aspirin inhibits COX-1.\n\nQuestion: What does aspirin inhibit?"},
		{"evidence holds the separator", "A\n\nQuestion: B", "C?",
			"Given the following evidence, determine whether it helps answer the provided question.\n\nEvidence: A\n\nQuestion: B\n\nQuestion: C?"},
		{"empty evidence", "", "Q",
			"Given the following evidence, determine whether it helps answer the provided question.\n\nEvidence: \n\nQuestion: Q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Instruction(tc.evidence, tc.question)
			if got != tc.want {
				t.Fatalf("Instruction = %q, want %q", got, tc.want)
			}
			ev, q, err := ParseInstruction(got)
			if err != nil || ev != tc.evidence || q != tc.question {
				t.Fatalf("ParseInstruction = %q, %q, %v", ev, q, err)
			}
		})
	}
}

func TestParseInstructionErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Evidence: x\n\nQuestion: y", "does not start with"},
		{"Given the following evidence, determine whether it helps answer the provided question.\n\nEvidence: x Question: y", "no \"Question:\" part"},
	} {
		_, _, err := ParseInstruction(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseInstruction(%q) error %v, want %q", tc.in, err, tc.want)
		}
	}
}
