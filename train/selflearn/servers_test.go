package selflearn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

// chatServer answers /v1/chat/completions with a function of the last
// message and the request's seed (a sampling server with a fixed seed):
// the prompt's last words and a hash, so the texts share words with the
// chunk they were made from.
func chatServer(t *testing.T, calls *atomic.Int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
			Seed     int64                      `json:"seed"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		calls.Add(1)
		prompt := req.Messages[len(req.Messages)-1].Content
		h := fnv.New32a()
		fmt.Fprintf(h, "%s|%d", prompt, req.Seed)
		words := strings.Fields(prompt)
		text := fmt.Sprintf("%s %x", strings.Join(words[max(0, len(words)-int(4+h.Sum32()%6)):], " "), h.Sum32())
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, text)
	}))
	t.Cleanup(srv.Close)
	return "openai:" + srv.URL + "/v1#toy"
}

// The generation stage split over two servers (--generator A,B) stores the
// queries, candidates and evaluation HyDE documents one server stores (a
// remote generator is not tuned, so there are no triplets), and the round ends
// with the same metrics; both servers are asked.
func TestRunTwoServersEqualsOne(t *testing.T) {
	ret := toyRetriever(t)
	qs, qrels := toyEval()
	var c0, c1, c2 atomic.Int64
	run := func(gen string) (*Report, map[string][]byte) {
		cfg := toyConfig(t, ret)
		cfg.Generator = gen
		store := openStore(t)
		rep, err := Run(context.Background(), cfg, toyCorpus(), qs, qrels, store, nil)
		if err != nil {
			t.Fatalf("generator %s: %v", gen, err)
		}
		items := map[string][]byte{}
		for _, kind := range []string{KindQuery, KindCandidates, KindEvalHypo} {
			its, err := store.Items(rep.RunID, kind)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			for _, it := range its {
				fmt.Fprintf(&b, "%s %s\n", it.Key, it.JSON)
			}
			items[kind] = b.Bytes()
		}
		return rep, items
	}
	repA, itemsA := run(chatServer(t, &c0))
	repB, itemsB := run(chatServer(t, &c1) + "," + chatServer(t, &c2))
	for kind, a := range itemsA {
		if len(a) == 0 {
			t.Errorf("no %s items stored", kind)
		}
		if !bytes.Equal(a, itemsB[kind]) {
			t.Errorf("%s items differ:\none server:\n%s\ntwo servers:\n%s", kind, a, itemsB[kind])
		}
	}
	if len(variants(repA)) == 0 || !reflect.DeepEqual(variants(repA), variants(repB)) {
		t.Errorf("metrics differ:\n one server  %v\n two servers %v", variants(repA), variants(repB))
	}
	if c1.Load() == 0 || c2.Load() == 0 || c1.Load()+c2.Load() != c0.Load() {
		t.Errorf("requests: one server %d, two servers %d + %d (want both asked, the same total)", c0.Load(), c1.Load(), c2.Load())
	}
	if !strings.HasPrefix(repB.Generator, "pool(openai:") {
		t.Errorf("report names generator %q", repB.Generator)
	}
}
