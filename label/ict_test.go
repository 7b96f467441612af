package label

import (
	"context"
	"fmt"
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
		case pos.Answer != Helpful || neg.Answer != NotHelpful:
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
