package eval

import (
	"reflect"
	"testing"

	"github.com/ragforge/ragforge/data"
)

// Every chunk of a judged document inherits its grade; unjudged documents'
// chunks stay out.
func TestChunkQrels(t *testing.T) {
	chunks := []data.Chunk{{ID: "a#0", DocID: "a"}, {ID: "a#1", DocID: "a"}, {ID: "b#0", DocID: "b"}, {ID: "c#0", DocID: "c"}}
	for _, c := range []struct {
		name  string
		qrels data.Qrels
		want  data.Qrels
	}{
		{"two chunks", data.Qrels{"q1": {"a": 2}}, data.Qrels{"q1": {"a#0": 2, "a#1": 2}}},
		{"grades kept", data.Qrels{"q1": {"a": 1, "b": 2}, "q2": {"c": 1}}, data.Qrels{"q1": {"a#0": 1, "a#1": 1, "b#0": 2}, "q2": {"c#0": 1}}},
		{"unknown document", data.Qrels{"q1": {"z": 1}}, data.Qrels{"q1": {}}},
		{"none", data.Qrels{}, data.Qrels{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ChunkQrels(c.qrels, chunks); !reflect.DeepEqual(got, c.want) {
				t.Errorf("ChunkQrels = %v, want %v", got, c.want)
			}
		})
	}
}
