package filter

import (
	"fmt"
	"strings"
)

// ValidLabel reports whether s is one of the two class tokens.
func ValidLabel(s string) bool { return s == Helpful || s == NotHelpful }

// Example is one record of the RAG² filter data (classifier/run_classifier.py
// reads id, question, answer, dataset_name): Question is the full instruction
// built by Instruction (evidence and question), Answer is Helpful or
// NotHelpful, DatasetName names the source QA set.
type Example struct {
	ID          string `json:"id"`
	Question    string `json:"question"`
	Answer      string `json:"answer"`
	DatasetName string `json:"dataset_name"`
}

// instruction header and separators of the RAG² filter prompt.
const (
	instructionHead = "Given the following evidence, determine whether it helps answer the provided question.\n\nEvidence: "
	questionSep     = "\n\nQuestion: "
)

// Instruction returns the RAG² filter input for a snippet and a question:
//
//	Given the following evidence, determine whether it helps answer the provided question.
//
//	Evidence: <evidence>
//
//	Question: <question>
func Instruction(evidence, question string) string {
	return instructionHead + evidence + questionSep + question
}

// ParseInstruction splits an Instruction back into evidence and question. The
// question is taken after the last "\n\nQuestion: " separator, so evidence may
// itself contain the separator but the question may not. Errors: the header is
// missing, or there is no separator.
func ParseInstruction(s string) (evidence, question string, err error) {
	rest, ok := strings.CutPrefix(s, instructionHead)
	if !ok {
		return "", "", fmt.Errorf("instruction does not start with %q", strings.TrimSuffix(instructionHead, "Evidence: "))
	}
	i := strings.LastIndex(rest, questionSep)
	if i < 0 {
		return "", "", fmt.Errorf("instruction has no %q part", strings.TrimSpace(questionSep))
	}
	return rest[:i], rest[i+len(questionSep):], nil
}
