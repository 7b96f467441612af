package eval

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data"
	"github.com/ragforge/ragforge/retrieval"
)

type echoRetriever struct{ fail string }

func (e echoRetriever) Search(q string, k int) ([]retrieval.Hit, error) {
	if q == e.fail {
		return nil, errors.New("index down")
	}
	return []retrieval.Hit{{ID: q, Score: float64(k)}}, nil
}

func TestRunQueries(t *testing.T) {
	qs := []data.Query{{ID: "q1", Text: "a"}, {ID: "q2", Text: "b"}}
	var seen []int
	run, err := RunQueries(context.Background(), echoRetriever{}, qs, 7, func(done, total int) { seen = append(seen, done, total) })
	if err != nil {
		t.Fatal(err)
	}
	want := Run{"q1": {{ID: "a", Score: 7}}, "q2": {{ID: "b", Score: 7}}}
	if !reflect.DeepEqual(run, want) || !reflect.DeepEqual(seen, []int{1, 2, 2, 2}) {
		t.Errorf("run %v, progress %v", run, seen)
	}
	if _, err := RunQueries(context.Background(), echoRetriever{fail: "b"}, qs, 7, nil); err == nil || !strings.Contains(err.Error(), "query q2: index down") {
		t.Errorf("failing retriever: err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunQueries(ctx, echoRetriever{}, qs, 7, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestDocRun(t *testing.T) {
	chunks := []data.Chunk{{ID: "d1#0", DocID: "d1"}, {ID: "d1#1", DocID: "d1"}, {ID: "d2#0", DocID: "d2"}}
	run := Run{"q": {{ID: "d1#1", Score: 3}, {ID: "d2#0", Score: 2}, {ID: "d1#0", Score: 1}, {ID: "other", Score: 0.5}}}
	want := Run{"q": {{ID: "d1", Score: 3}, {ID: "d2", Score: 2}, {ID: "other", Score: 0.5}}}
	if got := DocRun(run, chunks); !reflect.DeepEqual(got, want) {
		t.Errorf("DocRun = %v, want %v", got, want)
	}
}
