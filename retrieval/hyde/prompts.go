package hyde

// The SL-HyDE prompt templates (Li et al., AutoMIR, Eq. 2 and 3), rendered by
// models/generate.Render: {document} and {query} are replaced by the texts.
const (
	// QueryPrompt is Eq. 2's prompt: a medical query that the passage answers.
	QueryPrompt = "Please write a question in the medical domain that the following passage answers. " +
		"Write only the question.\nPassage: {document}\nQuestion:"
	// HypoPrompt is Eq. 3's prompt, HyDE's passage-writing prompt (Gao et al.,
	// 2022, web search / TREC-COVID variant) for the medical domain: the
	// query only, never the true document.
	HypoPrompt = "Please write a medical passage to answer the question.\nQuestion: {query}\nPassage:"
)
