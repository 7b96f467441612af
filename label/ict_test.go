package label

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/models/filter"

	"github.com/ragforge/ragforge/data"
)

func TestICTExamples(t *testing.T) {
	var chunks []data.Chunk
	for d := range 4 {
		chunks = append(chunks, data.Chunk{ID: fmt.Sprintf("d%d#0", d), DocID: fmt.Sprintf("d%d", d),
			Text: fmt.Sprintf("Topic %d first sentence here. Topic %d second sentence here. Topic %d third sentence here.", d, d, d)})
	}
	chunks = append(chunks, data.Chunk{ID: "short#0", DocID: "short", Text: "Too short."})
	ex, err := ICTExamples(context.Background(), chunks, ICTOptions{PerChunk: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) != 4*2*2 {
		t.Fatalf("%d examples, want 16 (4 usable chunks × 2 questions × helpful + not helpful)", len(ex))
	}
	for i := 0; i < len(ex); i += 2 {
		pos, neg := ex[i], ex[i+1]
		ev, q, err := filter.ParseInstruction(pos.Question)
		if err != nil {
			t.Fatal(err)
		}
		nev, nq, _ := filter.ParseInstruction(neg.Question)
		own := strings.Split(strings.TrimPrefix(pos.ID, "ict:"), ":")[0]
		switch {
		case pos.Answer != filter.Helpful || neg.Answer != filter.NotHelpful:
			t.Errorf("%s/%s: answers %s/%s", pos.ID, neg.ID, pos.Answer, neg.Answer)
		case strings.Contains(ev, q):
			t.Errorf("%s: the pseudo-question %q is still in its evidence", pos.ID, q)
		case q != nq:
			t.Errorf("%s: negative has another question", neg.ID)
		case strings.HasPrefix(nev, strings.Fields(q)[0]+" "+strings.Fields(q)[1]) && strings.HasSuffix(neg.ID, "#"+own):
			t.Errorf("%s: negative from the question's own chunk", neg.ID)
		case pos.DatasetName != MethodICT:
			t.Errorf("%s: dataset %q", pos.ID, pos.DatasetName)
		}
	}
	again, _ := ICTExamples(context.Background(), chunks, ICTOptions{PerChunk: 2, Seed: 1})
	if fmt.Sprint(again) != fmt.Sprint(ex) {
		t.Error("not reproducible from the seed")
	}
	if _, err := ICTExamples(context.Background(), chunks[:1], ICTOptions{}); err == nil {
		t.Error("one document: no error")
	}
}

// isSubsequence reports whether the words of q appear in s in order.
func isSubsequence(q, s string) bool {
	w := strings.Fields(s)
	i := 0
	for _, x := range strings.Fields(q) {
		for i < len(w) && w[i] != x {
			i++
		}
		if i == len(w) {
			return false
		}
		i++
	}
	return true
}

func TestICTExamplesOptions(t *testing.T) {
	var chunks []data.Chunk
	for d := range 5 {
		chunks = append(chunks, data.Chunk{ID: fmt.Sprintf("d%d#0", d), DocID: fmt.Sprintf("d%d", d),
			Text: fmt.Sprintf("Alpha %d beta gamma delta epsilon zeta eta theta. Iota %d kappa lambda mu nu xi omicron pi. Rho %d sigma tau upsilon phi chi psi omega.", d, d, d)})
	}
	sentenceOf := func(c data.Chunk, q string) bool {
		for _, s := range strings.Split(c.Text, ". ") {
			if isSubsequence(q, strings.TrimSuffix(s, ".")+".") || isSubsequence(q, strings.TrimSuffix(s, ".")) {
				return true
			}
		}
		return false
	}
	cases := []struct {
		name    string
		opt     ICTOptions
		perQ    int // examples per pseudo-question
		queries int // pseudo-questions in all
		check   func(own data.Chunk, ev, q string) string
	}{
		{"keep: evidence is the chunk as is", ICTOptions{PerChunk: 2, Keep: 1}, 2, 10, func(own data.Chunk, ev, q string) string {
			if ev != own.Text || !strings.Contains(ev, q) {
				return "evidence is not the whole chunk with its sentence"
			}
			return ""
		}},
		{"query words: a span of at most 4 words", ICTOptions{PerChunk: 3, QueryWords: 4}, 2, 15, func(own data.Chunk, ev, q string) string {
			if n := len(strings.Fields(q)); n != 4 || !strings.Contains(own.Text, q) {
				return fmt.Sprintf("%d words, or not a span of the chunk", n)
			}
			return ""
		}},
		{"drop words: a subsequence of at least MinWords", ICTOptions{PerChunk: 3, DropWords: 0.5, Keep: 1}, 2, 15, func(own data.Chunk, ev, q string) string {
			if n := len(strings.Fields(q)); n < 4 || n > 9 || !sentenceOf(own, q) {
				return fmt.Sprintf("%d words, or not a subsequence of one sentence", n)
			}
			return ""
		}},
		{"content words: a wh-word, at most 3 words of 4+ letters in order, ?", ICTOptions{PerChunk: 3, ContentWords: 3, Keep: 1}, 2, 15, func(own data.Chunk, ev, q string) string {
			w := strings.Fields(strings.TrimSuffix(q, "?"))
			if !strings.HasSuffix(q, "?") || len(w) != 4 || !slices.Contains(questionWords, w[0]) {
				return "not a wh-word, 3 words and ?"
			}
			for _, x := range w[1:] {
				if len(x) < 4 || strings.ContainsAny(x, ".,") {
					return fmt.Sprintf("%q is not a content word", x)
				}
			}
			if !sentenceOf(own, strings.Join(w[1:], " ")) {
				return "words not in their sentence's order"
			}
			return ""
		}},
		{"cycles through sentences past their count", ICTOptions{PerChunk: 6, Keep: 0.5}, 2, 30, nil},
		{"two negatives", ICTOptions{PerChunk: 1, NumNegatives: 2}, 3, 5, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opt.Seed = 3
			ex, err := ICTExamples(context.Background(), chunks, tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(ex) != tc.queries*tc.perQ {
				t.Fatalf("%d examples, want %d", len(ex), tc.queries*tc.perQ)
			}
			for i := 0; i < len(ex); i += tc.perQ {
				pos := ex[i]
				ev, q, err := filter.ParseInstruction(pos.Question)
				if err != nil {
					t.Fatal(err)
				}
				own := chunks[int(pos.ID[len("ict:d")]-'0')]
				if pos.Answer != filter.Helpful {
					t.Errorf("%s: answer %s, want %s", pos.ID, pos.Answer, filter.Helpful)
				}
				if tc.check != nil {
					if msg := tc.check(own, ev, q); msg != "" {
						t.Errorf("%s (question %q): %s", pos.ID, q, msg)
					}
				}
				seen := map[string]bool{}
				for _, neg := range ex[i+1 : i+tc.perQ] {
					nev, nq, _ := filter.ParseInstruction(neg.Question)
					switch {
					case neg.Answer != filter.NotHelpful:
						t.Errorf("%s: answer %s, want %s", neg.ID, neg.Answer, filter.NotHelpful)
					case nq != q:
						t.Errorf("%s: negative has another question", neg.ID)
					case nev == own.Text || seen[nev]:
						t.Errorf("%s: negative is the question's own chunk or a repeat", neg.ID)
					}
					seen[nev] = true
				}
			}
		})
	}
}

func TestICTOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opt   ICTOptions
		field string
	}{
		{ICTOptions{PerChunk: -1}, "PerChunk"},
		{ICTOptions{MinWords: -1}, "MinWords"},
		{ICTOptions{MaxChunks: -2}, "MaxChunks"},
		{ICTOptions{Keep: 1.5}, "Keep"},
		{ICTOptions{Keep: -0.1}, "Keep"},
		{ICTOptions{QueryWords: -3}, "QueryWords"},
		{ICTOptions{DropWords: 1}, "DropWords"},
		{ICTOptions{NumNegatives: -1}, "NumNegatives"},
		{ICTOptions{ContentWords: -1}, "ContentWords"},
		{ICTOptions{PerChunk: 8, Keep: 1, QueryWords: 10, DropWords: 0.25, NumNegatives: 2}, ""},
	} {
		err := tc.opt.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.opt, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), `"`+tc.field+`"`) {
			t.Errorf("%+v: error %v, want one naming %s", tc.opt, err, tc.field)
		}
		if _, err := ICTExamples(context.Background(), nil, tc.opt); err == nil {
			t.Errorf("%+v: ICTExamples accepted invalid options", tc.opt)
		}
	}
}
