package postprocess

// Special is a special token a template adds: its text and id.
type Special struct {
	Token string
	ID    int
}

// TemplateJSON returns the TemplateProcessing node transformers' converters
// write (convert_slow_tokenizer.py):
//
//	single: pre $A post
//	pair:   pre $A post mid $B:pairType post:pairType
//
// T5 is pre none, post </s>, mid none, pairType 0; BERT [CLS], [SEP], none,
// 1; XLM-R <s>, </s>, </s>, 0.
func TemplateJSON(pre, post, mid []Special, pairType int) map[string]any {
	specials := map[string]any{}
	tok := func(s Special, typeID int) map[string]any {
		specials[s.Token] = map[string]any{"id": s.Token, "ids": []int{s.ID}, "tokens": []string{s.Token}}
		return map[string]any{"SpecialToken": map[string]any{"id": s.Token, "type_id": typeID}}
	}
	seq := func(id string, typeID int) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": id, "type_id": typeID}}
	}
	var single, pair []any
	for _, s := range pre {
		single = append(single, tok(s, 0))
		pair = append(pair, tok(s, 0))
	}
	single = append(single, seq("A", 0))
	pair = append(pair, seq("A", 0))
	for _, s := range post {
		single = append(single, tok(s, 0))
		pair = append(pair, tok(s, 0))
	}
	for _, s := range mid {
		pair = append(pair, tok(s, pairType))
	}
	pair = append(pair, seq("B", pairType))
	for _, s := range post {
		pair = append(pair, tok(s, pairType))
	}
	return map[string]any{"type": "TemplateProcessing", "single": single, "pair": pair, "special_tokens": specials}
}
