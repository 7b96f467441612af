package answers

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// scriptedChat answers every request with reply(user).
type scriptedChat struct {
	reply func(user string) (string, error)
}

func (s scriptedChat) ChatText(_ context.Context, _, user string, _ int, _ float64) (string, error) {
	return s.reply(user)
}

func TestParseJSON(t *testing.T) {
	cases := []struct {
		raw  string
		ok   bool
		want int
	}{
		{`{"n": 3}`, true, 3},
		{"```json\n{\"n\": 4}\n```", true, 4},
		{`Sure! Here it is: {"n": 5} Hope this helps.`, true, 5},
		{`{"n": 3`, false, 0},
		{`I'm sorry, I can't help with that.`, false, 0},
		{``, false, 0},
	}
	for _, c := range cases {
		var out struct{ N int }
		err := ParseJSON(c.raw, &out)
		if (err == nil) != c.ok || out.N != c.want {
			t.Errorf("ParseJSON(%q) = %v, %v", c.raw, out.N, err)
		}
	}
}

func TestJudgeMetricsHand(t *testing.T) {
	cases := []struct {
		name, reply string
		metric      string
		want        float64
		kind        string
	}{
		{"faithfulness 2 of 3", `{"statements": [{"statement": "a", "supported": true}, {"statement": "b", "supported": false}, {"statement": "c", "supported": true}]}`, Faithfulness, 2.0 / 3, ""},
		{"faithfulness missing verdict", `{"statements": [{"statement": "a"}]}`, Faithfulness, 0, ErrParse},
		{"faithfulness string verdict", `{"statements": [{"statement": "a", "supported": "yes"}]}`, Faithfulness, 0, ErrParse},
		{"faithfulness empty", `{"statements": []}`, Faithfulness, 0, ErrParse},
		{"recall 1 of 4", `{"statements": [{"attributed": false}, {"attributed": true}, {"attributed": false}, {"attributed": false}]}`, ContextRecall, 0.25, ""},
		{"recall wrong field", `{"statements": [{"supported": true}]}`, ContextRecall, 0, ErrParse},
		{"refusal", `I cannot evaluate medical content.`, ContextRecall, 0, ErrParse},
	}
	for _, c := range cases {
		j := &Judge{Client: scriptedChat{func(string) (string, error) { return c.reply, nil }}}
		var got float64
		var call Call
		var err error
		if c.metric == Faithfulness {
			got, call, err = j.Faithfulness(context.Background(), "q", "a", []string{"ctx"})
		} else {
			got, call, err = j.ContextRecall(context.Background(), "q", "ref", []string{"ctx"})
		}
		var je *JudgeError
		switch {
		case c.kind == "" && (err != nil || !near(got, c.want)):
			t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
		case c.kind != "" && (!errors.As(err, &je) || je.Kind != c.kind || call.ErrorKind != c.kind):
			t.Errorf("%s: err %v, call %+v; want kind %s", c.name, err, call, c.kind)
		}
		if call.Raw != c.reply || !strings.Contains(call.Prompt, "ctx") || call.System != JudgeSystem {
			t.Errorf("%s: call not recorded: %+v", c.name, call)
		}
	}
}

// mapEmbedder returns fixed vectors by text.
type mapEmbedder map[string][]float32

func (m mapEmbedder) EncodeQueries(texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v, ok := m[t]
		if !ok {
			return nil, errors.New("unknown text " + t)
		}
		out[i] = v
	}
	return out, nil
}

// Question (1,0); generated g1 (1,0) cos 1, g2 (0,1) cos 0, g3 (3,4) cos
// 0.6: mean 1.6/3.
func TestAnswerRelevanceHand(t *testing.T) {
	emb := mapEmbedder{"q": {1, 0}, "g1": {1, 0}, "g2": {0, 1}, "g3": {3, 4}}
	reply := `{"questions": ["g1", "g2", "g3"], "noncommittal": false}`
	j := &Judge{Client: scriptedChat{func(u string) (string, error) {
		if !strings.Contains(u, "Write 3 different questions") {
			t.Errorf("prompt %q", u)
		}
		return reply, nil
	}}, Embedder: emb}
	got, _, err := j.AnswerRelevance(context.Background(), "q", "ans")
	if err != nil || !near(got, 1.6/3) {
		t.Errorf("got %v, %v; want %v", got, err, 1.6/3)
	}
	reply = `{"questions": ["g1"], "noncommittal": true}`
	if got, _, err := j.AnswerRelevance(context.Background(), "q", "ans"); err != nil || got != 0 {
		t.Errorf("noncommittal: %v, %v", got, err)
	}
	reply = `{"questions": ["zzz"], "noncommittal": false}`
	_, call, err := j.AnswerRelevance(context.Background(), "q", "ans")
	if je := (*JudgeError)(nil); !errors.As(err, &je) || je.Kind != ErrEncode || call.ErrorKind != ErrEncode {
		t.Errorf("embedder failure: %v %+v", err, call)
	}
	reply = `{"questions": [], "noncommittal": false}`
	if _, call, err := j.AnswerRelevance(context.Background(), "q", "ans"); err == nil || call.ErrorKind != ErrParse {
		t.Errorf("no questions: %v %+v", err, call)
	}
}
