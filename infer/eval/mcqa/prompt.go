package mcqa

import (
	"fmt"
	"strings"
)

// Prompt is one chat request: a system and a user message.
type Prompt struct {
	System string `json:"system"`
	User   string `json:"user"`
}

// Template is a prompt template with its source; {{question}},
// {{options}} and {{context}} are filled as MedRAG's liquid templates are.
type Template struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	System string `json:"system"`
	User   string `json:"user"`
}

// medragSource is where MedRAG's templates are, at the commit read.
const medragSource = "Teddy-XiongGZ/MedRAG src/template.py (commit 7fdcc5f): "

// CoTTemplate is MedRAG's chain-of-thought template without retrieval
// (general_cot_system, general_cot), the setting "cot" of MIRAGE.
var CoTTemplate = Template{
	Name:   "cot",
	Source: medragSource + "general_cot_system, general_cot",
	System: `You are a helpful medical expert, and your task is to answer a multi-choice medical question. Please first think step-by-step and then choose the answer from the provided options. Organize your output in a json formatted as Dict{"step_by_step_thinking": Str(explanation), "answer_choice": Str{A/B/C/...}}. Your responses will be used for research purposes only, so please have a definite answer.`,
	User:   "\nHere is the question:\n{{question}}\n\nHere are the potential choices:\n{{options}}\n\nPlease think step-by-step and generate your output in json:\n",
}

// RAGTemplate is MedRAG's template with retrieved documents
// (general_medrag_system, general_medrag), used by rag, rag2 and
// rag2-nofilter alike so that only the documents differ.
var RAGTemplate = Template{
	Name:   "rag",
	Source: medragSource + "general_medrag_system, general_medrag",
	System: `You are a helpful medical expert, and your task is to answer a multi-choice medical question using the relevant documents. Please first think step-by-step and then choose the answer from the provided options. Organize your output in a json formatted as Dict{"step_by_step_thinking": Str(explanation), "answer_choice": Str{A/B/C/...}}. Your responses will be used for research purposes only, so please have a definite answer.`,
	User:   "\nHere are the relevant documents:\n{{context}}\n\nHere is the question:\n{{question}}\n\nHere are the potential choices:\n{{options}}\n\nPlease think step-by-step and generate your output in json:\n",
}

// LogLikTemplate is the prompt of option log-likelihood scoring, the
// lm-evaluation-harness MedMCQA/MedQA layout ("Question: …\nChoices:\n…
// \nAnswer:", each option's text the continuation after a space), with
// retrieved documents first when the condition has them.
var LogLikTemplate = Template{
	Name:   "loglik",
	Source: "EleutherAI/lm-evaluation-harness lm_eval/tasks/medmcqa (doc_to_text, doc_to_choice, target_delimiter \" \"); documents as MedRAG's general_medrag",
	User:   "{{context}}Question: {{question}}\nChoices:\n{{options}}\nAnswer:",
}

// Templates are every template a run may use, stored with its config.
func Templates() []Template { return []Template{CoTTemplate, RAGTemplate, LogLikTemplate} }

// OptionsText joins q's options as MedRAG does: "A. text" lines in letter
// order.
func OptionsText(q Question) string {
	lines := make([]string, len(q.Options))
	for i, o := range q.Options {
		lines[i] = o.Letter + ". " + o.Text
	}
	return strings.Join(lines, "\n")
}

// Snippet is one retrieved chunk as the prompts and the store see it.
type Snippet struct {
	ID     string `json:"id"`
	Corpus string `json:"corpus,omitempty"`
	Title  string `json:"title,omitempty"`
	Text   string `json:"text,omitempty"`
	// PHelpful is the filter's P([HELPFUL]) when the filter ran.
	PHelpful *float64 `json:"p_helpful,omitempty"`
}

// ContextText formats snippets as MedRAG does: "Document [i] (Title: t)
// text" lines, i from 0; no snippet gives "" (MedRAG's contexts = [""]).
// MedRAG also cuts the block to the LLM's context length with its
// tokenizer; here the block is whole and --k bounds it.
func ContextText(snips []Snippet) string {
	lines := make([]string, len(snips))
	for i, s := range snips {
		lines[i] = fmt.Sprintf("Document [%d] (Title: %s) %s", i, s.Title, s.Text)
	}
	return strings.Join(lines, "\n")
}

// Fill fills t for q with snippets (nil: the template takes none).
func (t Template) Fill(q Question, snips []Snippet) Prompt {
	ctx := ContextText(snips)
	if t.Name == LogLikTemplate.Name && ctx != "" {
		ctx += "\n\n"
	}
	r := strings.NewReplacer("{{question}}", q.Question, "{{options}}", OptionsText(q), "{{context}}", ctx)
	return Prompt{System: t.System, User: r.Replace(t.User)}
}
