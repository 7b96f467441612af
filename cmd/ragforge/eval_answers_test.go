package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/infer/eval/answers"
)

// A judge nobody listens on fails before any work, naming the URL; no run is
// recorded.
func TestEvalAnswersDeadJudgeFailsFast(t *testing.T) {
	dir, corpus, qa := sampleFiles(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	db := filepath.Join(dir, "runs.db")
	for _, tc := range []struct{ name, judge, want string }{
		{"connection refused", url + "#judge-model", url},
		{"DNS failure", "http://no-such-host.invalid:8000/v1#judge-model", "http://no-such-host.invalid:8000/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runErr("eval", "answers", "--db", db, "--corpus", corpus, "--qa", qa,
				"--answerer", "t5:"+filepath.Join(dir, "no-model"), "--judge", tc.judge, "--limit", "1", "--k", "1")
			if code == 0 || !strings.Contains(stderr, "--judge "+tc.judge) || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "not reachable") {
				t.Errorf("exit %d, stderr %q: want a failure naming %s", code, stderr, tc.want)
			}
			if strings.Contains(stderr, "no-model") || strings.Contains(stderr, "chunk") {
				t.Errorf("work started before the judge check: %q", stderr)
			}
		})
	}
	if out := run(t, "runs", "list", "--db", db, "-q"); strings.TrimSpace(out) != "" {
		t.Errorf("runs recorded for a failed preflight: %q", out)
	}
}

// Judge faults are summarised by cause in the table and in --json.
func TestEvalAnswersJudgeErrorsByCause(t *testing.T) {
	dir, corpus, qa := sampleFiles(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[]}`)
			return
		}
		var req struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		text := "Fix in formalin."
		if req.Messages[0].Content == answers.JudgeSystem {
			if strings.Contains(req.Messages[1].Content, "REFERENCE ANSWER") {
				http.Error(w, "overloaded", http.StatusServiceUnavailable) // recall: HTTP 503
				return
			}
			text = "I cannot evaluate medical content." // faithfulness: a refusal
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, text)
	}))
	defer srv.Close()
	db := filepath.Join(dir, "runs.db")
	args := []string{"eval", "answers", "--db", db, "--corpus", corpus, "--qa", qa, "--answerer", "openai:" + srv.URL + "/v1#gen",
		"--judge", srv.URL + "/v1#judge", "--limit", "2", "--k", "1", "--retries", "-1"}
	var res struct {
		Report answers.Report `json:"report"`
	}
	if err := json.Unmarshal([]byte(run(t, append(args, "--json")...)), &res); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{answers.CauseRefusal: 2, "http_503": 2}
	if got := res.Report.PerK[0].ErrorCauses; !mapsEq(got, want) {
		t.Errorf("--json error_causes %v, want %v", got, want)
	}
	if out := run(t, args...); !strings.Contains(out, "errors at K=1 by cause: http_503 2, refusal 2") {
		t.Errorf("table lacks the causes:\n%s", out)
	}
}

func mapsEq(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
