package web

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ragforge/ragforge/data/tracker"
	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
)

const testToken = "s3cret-token"

// fixture is a run store and a label store sharing one SQLite file, seeded
// with two runs and three labels.
type fixture struct {
	runs   *tracker.Store
	labels *labelstore.Store
	runA   string // older run: loss 2.0, 1.5, 1.2 at steps 0..2; acc 0.5; one artifact
	runB   string // newer run: loss 1.8, 1.0 at steps 0..1; acc 0.75, f1 0.6
	ids    [3]int64
	// evidence is the reference context of each query id.
	evidence map[string]string
}

// Seeded labels (see newFixture):
//
//	ids[0] perplexity, run "lab-ppl", [HELPFUL],     ppl 10 → 8   (|Δ| 2),   key K1
//	ids[1] evidence,   run "lab-ev",  [NOT_HELPFUL], score 7.5,               key K1 (disagrees with ids[0])
//	ids[2] perplexity, run "lab-ppl", [NOT_HELPFUL], ppl 5 → 4.8  (|Δ| 0.2),  key K2
const (
	q1       = "What grade is the tumor?"
	snippet1 = "Histology: the tumor is Grade 3 with necrosis. <b>Margins</b> are clear & wide."
	ev1      = "grade 3 with NECROSIS"
	q2       = "Is there <script>alert(1)</script> invasion?"
	snippet2 = "No lymphovascular invasion is identified in the sections examined."
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rs, err := tracker.Open(filepath.Join(t.TempDir(), "ragforge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	ls, err := labelstore.NewStore(rs.DB())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{runs: rs, labels: ls, evidence: map[string]string{"q1": ev1}}

	a, err := rs.Start("train-filter", map[string]any{"lr": 3e-4, "epochs": 3, "model": "flan-t5-base"}, "v1", "simplego")
	if err != nil {
		t.Fatal(err)
	}
	for step, loss := range []float64{2.0, 1.5, 1.2} {
		if err := a.Metric("loss", step, loss); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Metric("acc", 2, 0.5); err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(t.TempDir(), "ckpt.bin")
	if err := writeFile(art, "abc"); err != nil {
		t.Fatal(err)
	}
	if err := a.Artifact("checkpoint", art); err != nil {
		t.Fatal(err)
	}
	if err := a.Finish(nil); err != nil {
		t.Fatal(err)
	}
	b, err := rs.Start("train-filter", map[string]any{"lr": 1e-4, "epochs": 3, "model": "flan-t5-base"}, "v1", "simplego")
	if err != nil {
		t.Fatal(err)
	}
	for step, loss := range []float64{1.8, 1.0} {
		if err := b.Metric("loss", step, loss); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.LogMetrics(map[string]float64{"acc": 0.75, "f1": 0.6}, 1); err != nil {
		t.Fatal(err)
	}
	// Same-second starts order by id; make B the newest by started_at
	// regardless of the random id suffix.
	if _, err := rs.DB().Exec(`UPDATE runs SET started_at = ? WHERE id = ?`, "2030-01-01T00:00:00Z", b.ID); err != nil {
		t.Fatal(err)
	}
	f.runA, f.runB = a.ID, b.ID

	k1 := labelstore.Key(q1, "doc1#0", snippet1)
	k2 := labelstore.Key(q2, "doc2#4", snippet2)
	labs := []labelstore.Label{
		{RunID: "lab-ppl", Key: k1, ExampleID: "q1#doc1#0", QueryID: "q1", Question: q1, Target: "Grade 3.", Snippet: snippet1,
			ChunkID: "doc1#0", Label: filter.Helpful, Method: labelstore.MethodPerplexity, Scorer: "flan-t5-small", PPLWithout: 10, PPLWith: 8, Score: 2},
		{RunID: "lab-ev", Key: k1, ExampleID: "q1#doc1#0", QueryID: "q1", Question: q1, Target: "Grade 3.", Snippet: snippet1,
			ChunkID: "doc1#0", Label: filter.NotHelpful, Method: labelstore.MethodEvidence, Score: 7.5},
		{RunID: "lab-ppl", Key: k2, ExampleID: "q2#doc2#4", QueryID: "q2", Question: q2, Target: "LYMPHOVASCULAR invasion is identified", Snippet: snippet2,
			ChunkID: "doc2#4", Label: filter.NotHelpful, Method: labelstore.MethodPerplexity, Scorer: "flan-t5-small", PPLWithout: 5, PPLWith: 4.8, Score: 0.2},
	}
	if err := ls.Put(labs); err != nil {
		t.Fatal(err)
	}
	for i := range labs {
		f.ids[i] = labs[i].ID
	}
	return f
}

func (f *fixture) options() Options {
	return Options{Runs: f.runs, Labels: f.labels, Token: testToken, Evidence: func(r labelstore.Record) string {
		if ev, ok := f.evidence[r.QueryID]; ok {
			return ev
		}
		return r.Target
	}}
}

func writeFile(path, s string) error {
	return os.WriteFile(path, []byte(s), 0o644)
}

type apiCase struct {
	name       string
	method     string
	path       string
	body       string
	auth       string // full Authorization header; "" none
	ctype      string
	wantStatus int
	check      func(t *testing.T, body []byte)
}

func do(t *testing.T, h http.Handler, c apiCase) *httptest.ResponseRecorder {
	t.Helper()
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req := httptest.NewRequest(method, c.path, body)
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if c.ctype != "" {
		req.Header.Set("Content-Type", c.ctype)
	} else if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func labelIDs(l LabelList) []int64 {
	var out []int64
	for _, v := range l.Labels {
		out = append(out, v.ID)
	}
	return out
}

func sameIDs(t *testing.T, got, want []int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("label ids %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("label ids %v, want %v", got, want)
		}
	}
}

func wantError(substr string) func(t *testing.T, b []byte) {
	return func(t *testing.T, b []byte) {
		t.Helper()
		e := decode[map[string]string](t, b)
		if !strings.Contains(e["error"], substr) {
			t.Fatalf("error %q does not mention %q", e["error"], substr)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestReadAPI(t *testing.T) {
	f := newFixture(t)
	h := Handler(f.options())
	bearer := "Bearer " + testToken
	cases := []apiCase{
		{name: "config is open", path: "/api/config", wantStatus: 200, check: func(t *testing.T, b []byte) {
			c := decode[map[string]any](t, b)
			if c["pipeline_url"] != DefaultPipelineURL || c["writes_enabled"] != true || c["public_read"] != false {
				t.Fatalf("config %v", c)
			}
		}},
		{name: "runs need the token", path: "/api/runs", wantStatus: 401, check: wantError("missing bearer token")},
		{name: "runs with a wrong token", path: "/api/runs", auth: "Bearer nope", wantStatus: 401, check: wantError("wrong bearer token")},
		{name: "runs newest first with final metrics", path: "/api/runs", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			rl := decode[RunList](t, b)
			l := rl.Runs
			if len(l) != 2 || l[0].ID != f.runB || l[1].ID != f.runA || rl.Total != 2 || rl.Offset != 0 || rl.Limit != 100 {
				t.Fatalf("runs %+v, want [%s %s] of 2", rl, f.runB, f.runA)
			}
			// A: loss at steps 0,1,2 = 2.0,1.5,1.2 → final 1.2; B: loss 1.8,1.0 → 1.0.
			if !near(l[1].Final["loss"], 1.2) || !near(l[1].Final["acc"], 0.5) || len(l[1].Final) != 2 {
				t.Fatalf("run A final %v, want loss 1.2 acc 0.5", l[1].Final)
			}
			if !near(l[0].Final["loss"], 1.0) || !near(l[0].Final["f1"], 0.6) || len(l[0].Final) != 3 {
				t.Fatalf("run B final %v, want loss 1.0 acc 0.75 f1 0.6", l[0].Final)
			}
			// Headline: f1 and loss (preferred, in headlineOrder), then acc.
			if h := l[0].Headline; len(h) != 3 || h[0].Name != "f1" || h[1].Name != "loss" || h[2].Name != "acc" || !near(h[0].Value, 0.6) {
				t.Fatalf("run B headline %+v", h)
			}
			if l[1].Status != tracker.StatusDone || l[0].Status != tracker.StatusRunning {
				t.Fatalf("statuses %s %s", l[1].Status, l[0].Status)
			}
			if strings.Join(rl.Kinds, ",") != "train-filter" || strings.Join(rl.Statuses, ",") != "running,done,failed,stale" {
				t.Fatalf("kinds %v statuses %v", rl.Kinds, rl.Statuses)
			}
		}},
		{name: "runs limit", path: "/api/runs?limit=1", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			if rl := decode[RunList](t, b); len(rl.Runs) != 1 || rl.Runs[0].ID != f.runB || rl.Total != 2 {
				t.Fatalf("runs %+v", rl)
			}
		}},
		{name: "runs second page", path: "/api/runs?limit=1&offset=1", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			if rl := decode[RunList](t, b); len(rl.Runs) != 1 || rl.Runs[0].ID != f.runA || rl.Total != 2 || rl.Offset != 1 {
				t.Fatalf("runs %+v", rl)
			}
		}},
		{name: "runs past the end", path: "/api/runs?offset=5", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			if rl := decode[RunList](t, b); len(rl.Runs) != 0 || rl.Total != 2 || rl.Runs == nil {
				t.Fatalf("runs %+v, want an empty page of 2", rl)
			}
		}},
		{name: "runs bad limit", path: "/api/runs?limit=-2", auth: bearer, wantStatus: 400, check: wantError(`"limit"`)},
		{name: "runs bad offset", path: "/api/runs?offset=x", auth: bearer, wantStatus: 400, check: wantError(`"offset"`)},
		{name: "runs status filter", path: "/api/runs?status=done", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			if rl := decode[RunList](t, b); len(rl.Runs) != 1 || rl.Runs[0].ID != f.runA || rl.Total != 1 {
				t.Fatalf("runs %+v", rl)
			}
		}},
		{name: "runs kind filter", path: "/api/runs?kind=eval-retrieval", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			if rl := decode[RunList](t, b); len(rl.Runs) != 0 || rl.Total != 0 || len(rl.Kinds) != 1 {
				t.Fatalf("runs %+v", rl)
			}
		}},
		{name: "run by full id", path: "/api/runs/" + f.runA, auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			d := decode[tracker.RunDetail](t, b)
			if d.ID != f.runA || len(d.Metrics) != 4 || len(d.Artifacts) != 1 || d.Artifacts[0].Bytes != 3 {
				t.Fatalf("detail %+v", d)
			}
			var cfg map[string]any
			json.Unmarshal(d.Config, &cfg)
			if cfg["lr"] != 3e-4 {
				t.Fatalf("config %v", cfg)
			}
		}},
		{name: "unknown run", path: "/api/runs/nope", auth: bearer, wantStatus: 404, check: wantError("run not found")},
		{name: "compare", path: "/api/compare?a=" + f.runA + "&b=" + f.runB, auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			c := decode[CompareResult](t, b)
			if c.A.ID != f.runA || c.B.ID != f.runB || len(c.Metrics) != 3 {
				t.Fatalf("compare %+v", c)
			}
			// sorted by name: acc (0.5 → 0.75), f1 (only B), loss (1.2 → 1.0)
			acc, f1, loss := c.Metrics[0], c.Metrics[1], c.Metrics[2]
			if acc.Name != "acc" || !near(acc.Diff, 0.25) || f1.Name != "f1" || f1.HasA || !f1.HasB || loss.Name != "loss" || !near(loss.Diff, -0.2) {
				t.Fatalf("metric diffs %+v", c.Metrics)
			}
			// acc went up (higher is better), loss went down (lower is better): both better.
			if acc.Better != HigherIsBetter || acc.Change != ChangeBetter || loss.Better != LowerIsBetter || loss.Change != ChangeBetter || f1.Change != "" {
				t.Fatalf("changes acc %+v loss %+v f1 %+v", acc, loss, f1)
			}
		}},
		{name: "compare needs both ids", path: "/api/compare?a=" + f.runA, auth: bearer, wantStatus: 400, check: wantError(`"b"`)},
		{name: "compare unknown run", path: "/api/compare?a=" + f.runA + "&b=zzz", auth: bearer, wantStatus: 404, check: wantError("run b")},
		{name: "labels all, with highlight", path: "/api/labels", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			l := decode[LabelList](t, b)
			sameIDs(t, labelIDs(l), f.ids[:])
			v := l.Labels[0]
			want := []Segment{{Text: "Histology: the tumor is "}, {Text: "Grade 3 with necrosis", Mark: true}, {Text: ". <b>Margins</b> are clear & wide."}}
			if v.Evidence != ev1 || len(v.Highlight) != 3 || v.Highlight[0] != want[0] || v.Highlight[1] != want[1] || v.Highlight[2] != want[2] {
				t.Fatalf("label 1 evidence %q highlight %#v", v.Evidence, v.Highlight)
			}
			if v.Provenance != labelstore.ProvenanceMachine || v.Effective != filter.Helpful || v.PPLWith != 8 {
				t.Fatalf("label 1 %+v", v.Record)
			}
			if l.Counts != nil {
				t.Fatalf("counts without a run filter: %v", l.Counts)
			}
		}},
		{name: "labels by class", path: "/api/labels?class=%5BHELPFUL%5D", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			sameIDs(t, labelIDs(decode[LabelList](t, b)), []int64{f.ids[0]})
		}},
		{name: "labels by method", path: "/api/labels?method=evidence", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			sameIDs(t, labelIDs(decode[LabelList](t, b)), []int64{f.ids[1]})
		}},
		{name: "labels in disagreement", path: "/api/labels?disagreement=1", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			sameIDs(t, labelIDs(decode[LabelList](t, b)), []int64{f.ids[0], f.ids[1]})
		}},
		{name: "labels of low confidence", path: "/api/labels?low_confidence=0.5", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			sameIDs(t, labelIDs(decode[LabelList](t, b)), []int64{f.ids[2]})
		}},
		{name: "labels of a run, with counts", path: "/api/labels?run=lab-ppl&reviewed=false&limit=1", auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			l := decode[LabelList](t, b)
			sameIDs(t, labelIDs(l), []int64{f.ids[0]})
			if l.Counts[filter.Helpful] != 1 || l.Counts[filter.NotHelpful] != 1 {
				t.Fatalf("counts %v", l.Counts)
			}
		}},
		{name: "labels bad class", path: "/api/labels?class=helpful", auth: bearer, wantStatus: 400, check: wantError(`"class"`)},
		{name: "labels bad low_confidence", path: "/api/labels?low_confidence=abc", auth: bearer, wantStatus: 400, check: wantError(`"low_confidence"`)},
		{name: "labels negative low_confidence", path: "/api/labels?low_confidence=-1", auth: bearer, wantStatus: 400, check: wantError(`"low_confidence"`)},
		{name: "labels bad reviewed", path: "/api/labels?reviewed=maybe", auth: bearer, wantStatus: 400, check: wantError(`"reviewed"`)},
		{name: "labels bad disagreement", path: "/api/labels?disagreement=yes", auth: bearer, wantStatus: 400, check: wantError(`"disagreement"`)},
		{name: "one label", path: "/api/labels/" + itoa(f.ids[2]), auth: bearer, wantStatus: 200, check: func(t *testing.T, b []byte) {
			v := decode[LabelView](t, b)
			// No evidence for q2 in the map: the Target is highlighted.
			if v.ID != f.ids[2] || v.Question != q2 || len(v.Highlight) != 3 || v.Highlight[1] != (Segment{Text: "lymphovascular invasion is identified", Mark: true}) {
				t.Fatalf("label %+v", v)
			}
		}},
		{name: "label id not a number", path: "/api/labels/abc", auth: bearer, wantStatus: 400, check: wantError(`"abc"`)},
		{name: "unknown label", path: "/api/labels/999", auth: bearer, wantStatus: 404, check: wantError("label not found")},
		{name: "review is POST only", path: "/api/labels/" + itoa(f.ids[0]) + "/review", auth: bearer, wantStatus: 405, check: wantError("use POST")},
		{name: "runs are GET only", method: "POST", path: "/api/runs", auth: bearer, wantStatus: 405, check: wantError("use GET")},
		{name: "unknown endpoint", path: "/api/nothing", auth: bearer, wantStatus: 404, check: wantError("/api/nothing")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := do(t, h, c)
			if rec.Code != c.wantStatus {
				t.Fatalf("%s %s: status %d, want %d; body %s", c.method, c.path, rec.Code, c.wantStatus, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("content type %q", ct)
			}
			if c.check != nil {
				c.check(t, rec.Body.Bytes())
			}
		})
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestPublicRead(t *testing.T) {
	f := newFixture(t)
	opt := f.options()
	opt.PublicRead = true
	h := Handler(opt)
	if rec := do(t, h, apiCase{path: "/api/runs"}); rec.Code != 200 {
		t.Fatalf("GET /api/runs with PublicRead: %d %s", rec.Code, rec.Body)
	}
	// Writes still need the token.
	if rec := do(t, h, apiCase{method: "POST", path: "/api/labels/" + itoa(f.ids[0]) + "/review", body: `{"action":"flip"}`}); rec.Code != 401 {
		t.Fatalf("POST review without token under PublicRead: %d %s", rec.Code, rec.Body)
	}
}

// TestWriteAPI checks that label edits need the token, reject malformed
// requests without changing the label, and store reviews with provenance
// "human" that undo removes.
func TestWriteAPI(t *testing.T) {
	f := newFixture(t)
	h := Handler(f.options())
	id := itoa(f.ids[0])
	bearer := "Bearer " + testToken
	unchanged := func(t *testing.T) {
		t.Helper()
		r, err := f.labels.Get(f.ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if r.Reviews != 0 || r.Effective != filter.Helpful || r.Provenance != labelstore.ProvenanceMachine {
			t.Fatalf("label changed: %+v", r)
		}
	}
	bad := []apiCase{
		{name: "no token", path: "/api/labels/" + id + "/review", body: `{"action":"flip"}`, wantStatus: 401, check: wantError("missing bearer token")},
		{name: "wrong token", path: "/api/labels/" + id + "/review", body: `{"action":"flip"}`, auth: "Bearer " + testToken + "x", wantStatus: 401, check: wantError("wrong bearer token")},
		{name: "basic auth is not bearer", path: "/api/labels/" + id + "/review", body: `{"action":"flip"}`, auth: "Basic " + testToken, wantStatus: 401},
		{name: "undo without token", path: "/api/labels/" + id + "/undo", wantStatus: 401},
		{name: "bad JSON", path: "/api/labels/" + id + "/review", body: `{"action":`, auth: bearer, wantStatus: 400, check: wantError("request body")},
		{name: "not an object", path: "/api/labels/" + id + "/review", body: `["flip"]`, auth: bearer, wantStatus: 400, check: wantError("request body")},
		{name: "empty body", path: "/api/labels/" + id + "/review", auth: bearer, wantStatus: 400, check: wantError("empty")},
		{name: "unknown field", path: "/api/labels/" + id + "/review", body: `{"action":"flip","label":"x"}`, auth: bearer, wantStatus: 400, check: wantError(`"label"`)},
		{name: "trailing data", path: "/api/labels/" + id + "/review", body: `{"action":"flip"} {}`, auth: bearer, wantStatus: 400, check: wantError("after the JSON object")},
		{name: "unknown action", path: "/api/labels/" + id + "/review", body: `{"action":"maybe"}`, auth: bearer, wantStatus: 400, check: wantError(`field "action"`)},
		{name: "not JSON content type", path: "/api/labels/" + id + "/review", body: `{"action":"flip"}`, ctype: "text/plain", auth: bearer, wantStatus: 415},
		{name: "too large", path: "/api/labels/" + id + "/review", body: `{"action":"flip","reviewer":"` + strings.Repeat("x", maxBody) + `"}`, auth: bearer, wantStatus: 413},
		{name: "unknown label", path: "/api/labels/999/review", body: `{"action":"flip"}`, auth: bearer, wantStatus: 404},
		{name: "undo without review", path: "/api/labels/" + id + "/undo", auth: bearer, wantStatus: 409, check: wantError("no review")},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			c.method = "POST"
			rec := do(t, h, c)
			if rec.Code != c.wantStatus {
				t.Fatalf("status %d, want %d; body %s", rec.Code, c.wantStatus, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("content type %q", ct)
			}
			if c.wantStatus == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			if c.check != nil {
				c.check(t, rec.Body.Bytes())
			}
			unchanged(t)
		})
	}

	steps := []struct {
		name                 string
		path, body           string
		wantEffective, wProv string
		wantReviews          int
		wantReviewer         string
	}{
		{"flip", "/review", `{"action":"flip","reviewer":"ana"}`, filter.NotHelpful, labelstore.ProvenanceHuman, 1, "ana"},
		{"confirm keeps the flipped label", "/review", `{"action":"confirm"}`, filter.NotHelpful, labelstore.ProvenanceHuman, 2, "web"},
		{"set a class", "/review", `{"action":"[HELPFUL]","reviewer":"bo"}`, filter.Helpful, labelstore.ProvenanceHuman, 3, "bo"},
		{"undo the class", "/undo", "", filter.NotHelpful, labelstore.ProvenanceHuman, 2, "web"},
		{"undo the confirm", "/undo", "", filter.NotHelpful, labelstore.ProvenanceHuman, 1, "ana"},
		{"undo the flip", "/undo", "", filter.Helpful, labelstore.ProvenanceMachine, 0, ""},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			rec := do(t, h, apiCase{method: "POST", path: "/api/labels/" + id + s.path, body: s.body, auth: bearer})
			if rec.Code != 200 {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			v := decode[LabelView](t, rec.Body.Bytes())
			stored, err := f.labels.Get(f.ids[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []labelstore.Record{v.Record, stored} {
				if r.Effective != s.wantEffective || r.Provenance != s.wProv || r.Reviews != s.wantReviews || r.Reviewer != s.wantReviewer {
					t.Fatalf("record effective %s provenance %s reviews %d reviewer %q, want %s %s %d %q",
						r.Effective, r.Provenance, r.Reviews, r.Reviewer, s.wantEffective, s.wProv, s.wantReviews, s.wantReviewer)
				}
				if r.Label.Label != filter.Helpful {
					t.Fatalf("machine label changed to %s", r.Label.Label)
				}
			}
			if len(v.Highlight) == 0 {
				t.Fatal("review answer without highlight")
			}
		})
	}
}

func TestWritesDisabledWithoutToken(t *testing.T) {
	f := newFixture(t)
	opt := f.options()
	opt.Token = ""
	// Without a token reads are open, as in infer/serve.
	if rec := do(t, Handler(opt), apiCase{path: "/api/labels"}); rec.Code != 200 {
		t.Fatalf("GET /api/labels without a server token: %d %s", rec.Code, rec.Body)
	}
	rec := do(t, Handler(opt), apiCase{method: "POST", path: "/api/labels/" + itoa(f.ids[0]) + "/review", body: `{"action":"flip"}`, auth: "Bearer "})
	if rec.Code != 403 {
		t.Fatalf("status %d, want 403: %s", rec.Code, rec.Body)
	}
	if r, _ := f.labels.Get(f.ids[0]); r.Reviews != 0 {
		t.Fatalf("label reviewed: %+v", r)
	}
}

func TestNoStores(t *testing.T) {
	h := Handler(Options{Token: testToken, PublicRead: true})
	for _, p := range []string{"/api/runs", "/api/runs/x", "/api/compare?a=x&b=y", "/api/labels", "/api/labels/1"} {
		if rec := do(t, h, apiCase{path: p}); rec.Code != 503 {
			t.Errorf("GET %s: status %d, want 503: %s", p, rec.Code, rec.Body)
		}
	}
	if rec := do(t, h, apiCase{method: "POST", path: "/api/labels/1/review", body: `{"action":"flip"}`, auth: "Bearer " + testToken}); rec.Code != 503 {
		t.Errorf("POST review: status %d, want 503", rec.Code)
	}
}

func TestPagesAndAssets(t *testing.T) {
	h := Handler(Options{PipelineURL: "http://127.0.0.1:9999/v1/pipeline"})
	for _, c := range []struct {
		path, ctype string
		status      int
	}{
		{"/", "text/html", 200},
		{"/runs", "text/html", 200},
		{"/runs/20250101-000000-x-abcd", "text/html", 200},
		{"/runs/compare?a=1&b=2", "text/html", 200},
		{"/labels", "text/html", 200},
		{"/playground", "text/html", 200},
		{"/assets/app.css", "text/css", 200},
		{"/assets/labels.js", "text/javascript", 200},
		{"/nothing", "text/plain", 404},
		{"/assets/missing.js", "text/plain", 404},
	} {
		rec := do(t, h, apiCase{path: c.path})
		if rec.Code != c.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), c.ctype) {
			t.Errorf("GET %s: %d %q, want %d %s", c.path, rec.Code, rec.Header().Get("Content-Type"), c.status, c.ctype)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self' http://127.0.0.1:9999;") {
			t.Errorf("GET %s: CSP %q", c.path, csp)
		}
	}
	if rec := do(t, h, apiCase{method: "POST", path: "/labels"}); rec.Code != 405 {
		t.Errorf("POST /labels: %d, want 405", rec.Code)
	}
}

// TestAssetsAreLocal checks that no page loads anything from another origin
// and that every script the shell names is embedded.
func TestAssetsAreLocal(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?(https?:)?//|import\s*\(`)
	err := fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetFS.ReadFile(p)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s references another origin: %q", p, m)
		}
		if bytes.Contains(b, []byte("innerHTML")) || bytes.Contains(b, []byte("outerHTML")) || bytes.Contains(b, []byte("insertAdjacentHTML")) {
			t.Errorf("%s builds HTML from strings; use RF.el / text nodes", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	shell, _ := assetFS.ReadFile("assets/index.html")
	for _, m := range regexp.MustCompile(`(?:src|href)="/assets/([^"]+)"`).FindAllSubmatch(shell, -1) {
		if _, err := fs.Stat(assetFS, "assets/"+string(m[1])); err != nil {
			t.Errorf("index.html names %s: %v", m[1], err)
		}
	}
	if n := strings.Count(string(shell), "<script"); n != 7 || strings.Contains(string(shell), "<script>") {
		t.Errorf("index.html: %d script tags or an inline script", n)
	}
}
