package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ragforge/ragforge/models/filter"
	"github.com/ragforge/ragforge/models/labelstore"
)

// chromiumPath is Debian's chromium (apt-get install chromium; `make setup`).
const chromiumPath = "/usr/bin/chromium"

// browser starts one headless chromium for the calling test, with a fresh
// profile and the background networking of a closed machine switched off, and
// returns its context. It skips the test when chromium is not installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests skipped with -short")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("SKIP browser test: %s not found (apt-get install -y chromium): %v", chromiumPath, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// The browser lives at most 3 minutes (each tab at most 30 s, see tab);
	// its first action must run on its own context, not a shorter one.
	bounded, cancelBounded := context.WithTimeout(alloc, 3*time.Minute)
	ctx, cancel := chromedp.NewContext(bounded)
	t.Cleanup(func() { cancel(); cancelBounded(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	return ctx
}

// tab opens a new tab in the browser, bounded to 30 s.
func tab(t *testing.T, b context.Context) context.Context {
	t.Helper()
	tctx, cancelT := context.WithTimeout(b, 30*time.Second)
	ctx, cancel := chromedp.NewContext(tctx)
	t.Cleanup(func() { cancel(); cancelT() })
	return ctx
}

// open navigates to url and waits until the page's script has drawn it.
func open(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`main#app[data-ready="1"]`))); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	if msg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('page-error') || {}).textContent || ''`)); err != nil || msg != "" {
		t.Fatalf("open %s: page error %q (%v)", url, msg, err)
	}
}

func js[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// screenshot saves a full-page PNG as $WEB_SCREENSHOTS/<name>.png when the
// variable names a directory.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("WEB_SCREENSHOTS")
	if dir == "" {
		return
	}
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakePipeline answers POST /v1/pipeline with a fixed response and records
// the questions it was sent.
type fakePipeline struct {
	mu        sync.Mutex
	questions []string
}

// pipelineAnswer mirrors infer/serve's PipelineResponse: stage outputs as
// fields, stage reports (name, ms, skipped, note) in "stages".
const pipelineAnswer = `{
  "question": "What grade is the tumor?",
  "rationale": "Necrosis and brisk mitoses suggest a high grade.",
  "query": "Necrosis and brisk mitoses suggest a high grade.",
  "retrieved": [
    {"id": "doc1#0", "corpus": "ap", "doc_id": "doc1", "index": 0, "score": 12.5, "text": "Grade 3 tumors show necrosis.", "start": 0, "end": 29},
    {"id": "doc2#3", "corpus": "ap", "doc_id": "doc2", "index": 3, "score": 9.25, "text": "Margins <b>are</b> clear.", "start": 80, "end": 105}
  ],
  "filtered": [
    {"id": "doc1#0", "corpus": "ap", "doc_id": "doc1", "index": 0, "score": 12.5, "text": "Grade 3 tumors show necrosis.", "start": 0, "end": 29, "label": "[HELPFUL]", "p_helpful": 0.91},
    {"id": "doc2#3", "corpus": "ap", "doc_id": "doc2", "index": 3, "score": 9.25, "text": "Margins <b>are</b> clear.", "start": 80, "end": 105, "label": "[NOT_HELPFUL]", "p_helpful": 0.12}
  ],
  "kept": [
    {"id": "doc1#0", "corpus": "ap", "doc_id": "doc1", "index": 0, "score": 12.5, "text": "Grade 3 tumors show necrosis.", "start": 0, "end": 29}
  ],
  "answer": "Grade 3 [1].",
  "citations": [{"n": 1, "id": "doc1#0", "corpus": "ap", "doc_id": "doc1"}],
  "stages": [
    {"name": "rationale", "ms": 120.5},
    {"name": "retrieve", "ms": 8.25, "note": "mode hybrid, k 5"},
    {"name": "rerank", "ms": 0, "skipped": true, "note": "no reranker"},
    {"name": "filter", "ms": 40},
    {"name": "answer", "ms": 210}
  ],
  "took_ms": 379.1
}`

// longAnswer has AP-style hits (metadata with title, document code and page
// number) with long texts, one a 400-character token without spaces, to
// check that the playground wraps them inside a 1280 px window.
var longAnswer = func() string {
	long := strings.Repeat("Grade 3 tumors show necrosis, brisk mitoses and marked nuclear pleomorphism; ", 12)
	token := strings.Repeat("ABCDEFGHIJ", 40)
	hit := func(id, doc string, score float64, title, code string, page int, text string) map[string]any {
		return map[string]any{"id": id, "corpus": "ap", "doc_id": doc, "index": 0, "score": score, "text": text, "start": 0, "end": len(text),
			"meta": map[string]any{"title": title, "document_code": code, "page_number": page, "category": "Coloracoes", "revision": 4}}
	}
	hits := []map[string]any{
		hit("ap-17#2", "ap-17", 12.5, "Fixador de Bouin", "APIN COL 001", 3, long),
		hit("ap-40#0", "ap-40", 9.25, "Coloração de hematoxilina e eosina em cortes de parafina", "APIN COL 014", 12, token),
	}
	filtered := []map[string]any{}
	for i, h := range hits {
		f := map[string]any{"label": []string{"[HELPFUL]", "[NOT_HELPFUL]"}[i], "p_helpful": []float64{0.91, 0.12}[i]}
		for k, v := range h {
			f[k] = v
		}
		filtered = append(filtered, f)
	}
	b, err := json.Marshal(map[string]any{"question": "long", "rationale": long, "query": long, "retrieved": hits,
		"filtered": filtered, "kept": hits[:1], "answer": long + " [1]", "citations": []map[string]any{{"n": 1, "id": "ap-17#2", "corpus": "ap", "doc_id": "ap-17"}},
		"stages":  []map[string]any{{"name": "rationale", "ms": 120.5}, {"name": "retrieve", "ms": 8.25}, {"name": "filter", "ms": 40}, {"name": "answer", "ms": 210}},
		"took_ms": 379.1})
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// genericAnswer is another shape the page reads: timings in "timings_ms".
const genericAnswer = `{"rationale": "r", "snippets": ["s1", "s2"], "answer": "A.", "timings_ms": {"rationale": 1.5, "answer": 3}}`

func (p *fakePipeline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Question string `json:"question"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil || req.Question == "" {
		http.Error(w, `{"error":"want POST {\"question\": ...}"}`, http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.questions = append(p.questions, req.Question)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if req.Question == "long" {
		w.Write([]byte(longAnswer))
		return
	}
	if req.Question == "generic" {
		w.Write([]byte(genericAnswer))
		return
	}
	w.Write([]byte(pipelineAnswer))
}

// serve starts the workbench with a fake pipeline at /v1/pipeline, as the
// inference server mounts them.
func serve(t *testing.T, opt Options) (*httptest.Server, *fakePipeline) {
	t.Helper()
	fp := &fakePipeline{}
	mux := http.NewServeMux()
	mux.Handle("/v1/pipeline", fp)
	mux.Handle("/", Handler(opt))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, fp
}

// TestBrowserPages loads every page in chromium and checks what it drew.
func TestBrowserPages(t *testing.T) {
	b := browser(t)
	f := newFixture(t)
	opt := f.options()
	opt.PublicRead = true
	srv, _ := serve(t, opt)

	t.Run("home", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/")
		if n := js[int](t, ctx, `document.querySelectorAll('#latest tr[data-run]').length`); n != 2 {
			t.Fatalf("latest runs rows %d, want 2", n)
		}
		screenshot(t, ctx, "small-home")
	})
	t.Run("runs", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/runs")
		ids := js[[]string](t, ctx, `[...document.querySelectorAll('#runs-table tbody tr')].map(r => r.dataset.run)`)
		if len(ids) != 2 || ids[0] != f.runB || ids[1] != f.runA {
			t.Fatalf("runs table rows %v, want [%s %s]", ids, f.runB, f.runA)
		}
		text := js[string](t, ctx, `document.querySelector('#runs-table tr[data-run="`+f.runA+`"]').textContent`)
		for _, want := range []string{"train-filter", "done", "loss 1.2000", "acc 0.5000"} {
			if !strings.Contains(text, want) {
				t.Errorf("run A row %q lacks %q", text, want)
			}
		}
		// One chart of a metric across the listed runs; the picker
		// switches it (loss: both runs, oldest first).
		if !js[bool](t, ctx, `(() => { const s = document.getElementById('metric-across'); s.value = 'loss'; return s.dispatchEvent(new Event('change')); })()`) {
			t.Fatal("change event cancelled")
		}
		if m := js[string](t, ctx, `document.querySelector('#across svg.chart').dataset.metric`); m != "loss" {
			t.Fatalf("metric-across-runs chart shows %q, want loss", m)
		}
		pts := js[[]string](t, ctx, `[...document.querySelectorAll('#across svg.chart circle title')].map(t => t.textContent)`)
		if len(pts) != 2 || !strings.HasSuffix(pts[0], " 1: 1.2") || !strings.HasSuffix(pts[1], " 2: 1") {
			t.Fatalf("loss across runs: points %v, want run 1 (A) at 1.2 and run 2 (B)", pts)
		}
		// At 800 px the metrics column keeps its room (the fixed columns
		// took it all): start time and duration give way.
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(800, 700)); err != nil {
			t.Fatal(err)
		}
		if w := js[float64](t, ctx, `document.querySelector('#runs-table tbody td.metrics').getBoundingClientRect().width`); w < 250 {
			t.Errorf("metrics column %.0f px wide at 800 px, want at least 250", w)
		}
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
			t.Fatal(err)
		}
		if n := js[int](t, ctx, `[...document.querySelectorAll('#runs-table th.c-started')].filter(th => th.getBoundingClientRect().width > 0).length`); n != 1 {
			t.Errorf("start time column shown %d times at 1280 px, want 1", n)
		}
		// Selecting two runs enables Compare, which opens the comparison.
		if err := chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(`input[data-run="`+f.runA+`"]`)),
			chromedp.Click(chromedp.CSS(`input[data-run="`+f.runB+`"]`)),
			chromedp.Click(chromedp.ID("compare-btn")),
			chromedp.WaitVisible(chromedp.CSS(`#metric-diff`))); err != nil {
			t.Fatalf("compare from the list: %v", err)
		}
		if u := js[string](t, ctx, `location.pathname + location.search`); u != "/runs/compare?a="+f.runA+"&b="+f.runB {
			t.Fatalf("compare url %s", u)
		}
		screenshot(t, ctx, "small-runs-then-compare")
	})
	t.Run("run detail charts", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/runs/"+f.runA)
		// loss is a series (steps 0..2), acc a scalar (step 2 only): one
		// chart, and acc in the metrics table.
		charts := js[[]string](t, ctx, `[...document.querySelectorAll('#charts svg.chart')].map(s => s.dataset.metric)`)
		if strings.Join(charts, ",") != "loss" {
			t.Fatalf("charts %v, want [loss]", charts)
		}
		if s := js[string](t, ctx, `document.querySelector('#other-metrics tr[data-metric="acc"]').textContent`); s != "acc0.5000" {
			t.Fatalf("acc row %q", s)
		}
		// loss has 3 points: one path with M + 2 L commands, 3 point markers.
		d := js[string](t, ctx, `document.querySelector('svg[data-metric="loss"] path.series').getAttribute('d')`)
		if strings.Count(d, "M") != 1 || strings.Count(d, "L") != 2 {
			t.Fatalf("loss path %q, want 1 M and 2 L", d)
		}
		if n := js[int](t, ctx, `document.querySelectorAll('svg[data-metric="loss"] circle').length`); n != 3 {
			t.Fatalf("loss markers %d, want 3", n)
		}
		// Every point of every chart lies inside its axes (the y axis
		// used to end below the largest value), and a loss whose values
		// span 10× or more is drawn on a log axis.
		const outside = `[...document.querySelectorAll('svg.chart')].flatMap(s => [...s.querySelectorAll('circle')].filter(c => {
			const d = s.dataset, x = +c.getAttribute('cx'), y = +c.getAttribute('cy');
			return x < +d.left - 0.01 || x > +d.right + 0.01 || y < +d.top - 0.01 || y > +d.bottom + 0.01; })).length`
		if n := js[int](t, ctx, outside); n != 0 {
			t.Fatalf("%d chart points outside their axes", n)
		}
		if n := js[int](t, ctx, `(() => { const c = document.createElement('div'); c.id = 'probe-charts'; document.body.append(c);
			c.append(RF.lineChart([{name: 'a', points: [[0, 1.06], [1, 0.2], [2, 0.97]]}], {title: 'acc'}),
				RF.lineChart([{name: 'l', points: [[0, 250], [1, 3], [2, 1.2], [3, 0.9]]}], {title: 'loss'}));
			return c.querySelectorAll('svg[data-scale="log"]').length; })()`); n != 1 {
			t.Fatalf("%d log-scale charts among an accuracy and a spiky loss, want 1 (the loss)", n)
		}
		if n := js[int](t, ctx, outside); n != 0 {
			t.Fatalf("%d points of the probe charts (max 1.06; loss 0.9..250) outside their axes", n)
		}
		if s := js[string](t, ctx, `document.querySelector('table.artifacts').textContent`); !strings.Contains(s, "checkpoint") {
			t.Fatalf("artifacts %q", s)
		}
		screenshot(t, ctx, "small-run")
	})
	t.Run("compare", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/runs/compare?a="+f.runA+"&b="+f.runB)
		rows := js[[][]string](t, ctx, `[...document.querySelectorAll('#metric-diff tbody tr')].map(r => [...r.children].map(c => c.textContent))`)
		// acc went up and loss went down: both better.
		want := [][]string{{"acc", "0.5000", "0.7500", "0.2500 ▲"}, {"f1", "—", "0.6000", "—"}, {"loss", "1.2000", "1", "-0.2000 ▲"}}
		if len(rows) != len(want) {
			t.Fatalf("metric rows %v, want %v", rows, want)
		}
		for i := range want {
			if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
				t.Fatalf("metric row %d %v, want %v", i, rows[i], want[i])
			}
		}
		diff := js[[]string](t, ctx, `[...document.querySelectorAll('#side-by-side tr.diff th')].map(th => th.textContent)`)
		if !contains(diff, "config lr") || !contains(diff, "id") || contains(diff, "config epochs") {
			t.Fatalf("differing rows %v: want config lr and id, not config epochs", diff)
		}
		if n := js[int](t, ctx, `document.querySelectorAll('svg[data-metric="loss"] path.series').length`); n != 2 {
			t.Fatalf("loss overlay has %d paths, want 2", n)
		}
		// Metric names sort with their numbers as numbers.
		if s := js[string](t, ctx, `['F1@10', 'F1@2', 'nDCG@10', 'F1@1', 'acc'].sort(RF.metricNameOrder).join(',')`); s != "acc,F1@1,F1@2,F1@10,nDCG@10" {
			t.Fatalf("metric order %s", s)
		}
		// Runs A and B draw each series in a colour of its own.
		strokes := js[[]string](t, ctx, `[...document.querySelectorAll('#charts path.series')].map(p => p.getAttribute('stroke'))`)
		seen := map[string]bool{}
		for _, c := range strokes {
			seen[c] = true
		}
		if len(strokes) < 2 || len(seen) != len(strokes) {
			t.Fatalf("compare chart strokes %v: want one colour per line", strokes)
		}
		screenshot(t, ctx, "small-compare")
	})
	t.Run("labels", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/labels")
		if n := js[int](t, ctx, `document.querySelectorAll('#queue li').length`); n != 3 {
			t.Fatalf("queue has %d labels, want 3", n)
		}
		if m := js[string](t, ctx, `document.querySelector('#snippet mark').textContent`); m != "Grade 3 with necrosis" {
			t.Fatalf("mark %q", m)
		}
		// The snippet's "<b>" is text, not markup.
		if n := js[int](t, ctx, `document.querySelectorAll('#snippet b').length`); n != 0 {
			t.Fatal("snippet HTML was parsed")
		}
		if s := js[string](t, ctx, `document.getElementById('snippet').textContent`); s != snippet1 {
			t.Fatalf("snippet text %q, want %q", s, snippet1)
		}
		screenshot(t, ctx, "small-labels")
		// j moves to the next label; the question with <script> stays text.
		if err := chromedp.Do(ctx, chromedp.KeyEvent("j"), chromedp.KeyEvent("j")); err != nil {
			t.Fatal(err)
		}
		if q := js[string](t, ctx, `document.getElementById('question').textContent`); q != q2 {
			t.Fatalf("after j j: question %q, want %q", q, q2)
		}
		if n := js[int](t, ctx, `document.querySelectorAll('#card script').length`); n != 0 {
			t.Fatal("question HTML was parsed")
		}
	})
	t.Run("playground", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/playground")
		if n := js[int](t, ctx, `document.querySelectorAll('#ask-form textarea#question').length`); n != 1 {
			t.Fatal("no question box")
		}
		screenshot(t, ctx, "small-playground-empty")
	})
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// waitLabel polls the store until label id satisfies ok (or 10 s pass).
func waitLabel(t *testing.T, s *labelstore.Store, id int64, ok func(labelstore.Record) bool) labelstore.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := s.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("label %d in the store: %+v", id, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBrowserLabelReview enters the token in the page, flips a label with the
// "f" shortcut, undoes it with "u", flips it again with the button, and reads
// each change back from SQLite.
func TestBrowserLabelReview(t *testing.T) {
	b := browser(t)
	f := newFixture(t)
	srv, _ := serve(t, f.options()) // reads need the token too
	ctx := tab(t, b)

	// Without the token the API refuses the queue; the page asks for it.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/labels?method=perplexity"),
		chromedp.WaitVisible(chromedp.CSS(`#page-error`))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token-input"), testToken),
		chromedp.Click(chromedp.ID("token-save")),
		chromedp.WaitVisible(chromedp.CSS(`#queue li`))); err != nil {
		t.Fatalf("enter token: %v", err)
	}
	if tok := js[string](t, ctx, `sessionStorage.getItem('ragforge.token')`); tok != testToken {
		t.Fatalf("sessionStorage token %q", tok)
	}
	if id := js[string](t, ctx, `document.getElementById('label-id').textContent`); id != itoa(f.ids[0]) {
		t.Fatalf("current label %s, want %d", id, f.ids[0])
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("reviewer")), chromedp.SendKeys(chromedp.ID("reviewer"), "ana"),
		chromedp.Click(chromedp.ID("question"))); err != nil { // blur the input so keys go to the page
		t.Fatal(err)
	}

	if err := chromedp.Do(ctx, chromedp.KeyEvent("f")); err != nil {
		t.Fatal(err)
	}
	r := waitLabel(t, f.labels, f.ids[0], func(r labelstore.Record) bool { return r.Reviews == 1 })
	if r.Effective != filter.NotHelpful || r.Provenance != labelstore.ProvenanceHuman || r.Reviewer != "ana" || r.Label.Label != filter.Helpful {
		t.Fatalf("after f: %+v", r)
	}
	// The page moved on to the next perplexity label.
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.getElementById('label-id').textContent === '`+itoa(f.ids[2])+`'`)); err != nil {
		t.Fatalf("after f the page did not advance: %v", err)
	}
	screenshot(t, ctx, "small-labels-flipped")

	if err := chromedp.Do(ctx, chromedp.KeyEvent("u")); err != nil {
		t.Fatal(err)
	}
	r = waitLabel(t, f.labels, f.ids[0], func(r labelstore.Record) bool { return r.Reviews == 0 })
	if r.Effective != filter.Helpful || r.Provenance != labelstore.ProvenanceMachine {
		t.Fatalf("after u: %+v", r)
	}
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.getElementById('label-id').textContent === '`+itoa(f.ids[0])+`'`)); err != nil {
		t.Fatalf("undo did not return to the label: %v", err)
	}

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("btn-flip"))); err != nil {
		t.Fatal(err)
	}
	r = waitLabel(t, f.labels, f.ids[0], func(r labelstore.Record) bool { return r.Reviews == 1 })
	if r.Effective != filter.NotHelpful || r.Provenance != labelstore.ProvenanceHuman {
		t.Fatalf("after the Flip button: %+v", r)
	}
	// The other labels were not touched.
	for _, id := range []int64{f.ids[1], f.ids[2]} {
		if o, _ := f.labels.Get(id); o.Reviews != 0 {
			t.Fatalf("label %d reviewed: %+v", id, o)
		}
	}
}

// TestBrowserPlayground asks a question and checks every stage of the fake
// pipeline's answer on the page.
func TestBrowserPlayground(t *testing.T) {
	b := browser(t)
	srv, fp := serve(t, Options{PublicRead: true})
	ctx := tab(t, b)
	open(t, ctx, srv.URL+"/playground")
	const question = "What grade is the tumor?"
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("question"), question),
		chromedp.Click(chromedp.ID("ask")),
		chromedp.WaitVisible(chromedp.CSS(`#stages`))); err != nil {
		t.Fatalf("ask: %v", err)
	}
	fp.mu.Lock()
	got := append([]string(nil), fp.questions...)
	fp.mu.Unlock()
	if len(got) != 1 || got[0] != question {
		t.Fatalf("pipeline received %q, want [%q]", got, question)
	}
	stageNames := func() string {
		return strings.Join(js[[]string](t, ctx, `[...document.querySelectorAll('#stages > section.stage')].map(s => s.dataset.stage)`), ",")
	}
	if want := "question,rationale,query,retrieved,filtered,kept,answer,citations,timings"; stageNames() != want {
		t.Fatalf("stages %s, want %s", stageNames(), want)
	}
	text := func(stage string) string {
		return js[string](t, ctx, `document.querySelector('section[data-stage="`+stage+`"]').textContent`)
	}
	if s := text("rationale"); !strings.Contains(s, "Necrosis and brisk mitoses suggest a high grade.") || !strings.Contains(s, "120.5 ms") {
		t.Fatalf("rationale stage %q", s)
	}
	if s := text("answer"); !strings.Contains(s, "Grade 3 [1].") || !strings.Contains(s, "210 ms") {
		t.Fatalf("answer stage %q", s)
	}
	if s := text("retrieved"); !strings.Contains(s, "Margins <b>are</b> clear.") || !strings.Contains(s, "8.25 ms") {
		t.Fatalf("retrieved stage %q: want its time and the snippet HTML as text", s)
	}
	if n := js[int](t, ctx, `document.querySelectorAll('section[data-stage="retrieved"] tbody tr').length`); n != 2 {
		t.Fatalf("retrieved rows %d, want 2", n)
	}
	// Each passage's text is printed once (retrieved, filtered and kept
	// hold the same two); later stages name the stage that shows it.
	if n := js[int](t, ctx, `[...document.querySelectorAll('#stages td.text div.text')].filter(d => d.textContent === 'Grade 3 tumors show necrosis.').length`); n != 1 {
		t.Fatalf("passage doc1#0 printed %d times, want once", n)
	}
	if s := text("kept"); strings.Contains(s, "Grade 3 tumors show necrosis.") || !strings.Contains(s, "text under retrieved") {
		t.Fatalf("kept stage %q: want a reference to the retrieved text, not the text again", s)
	}
	labels := js[[]string](t, ctx, `[...document.querySelectorAll('section[data-stage="filtered"] .badge')].map(b => b.textContent)`)
	if strings.Join(labels, ",") != "[HELPFUL],[NOT_HELPFUL]" {
		t.Fatalf("filter decisions %v", labels)
	}
	bars := js[[]string](t, ctx, `[...document.querySelectorAll('section[data-stage="timings"] rect.bar')].map(r => r.dataset.stage)`)
	if strings.Join(bars, ",") != "rationale,retrieve,rerank,filter,answer" {
		t.Fatalf("timing bars %v", bars)
	}
	if s := text("timings"); !strings.Contains(s, "rerank skipped: no reranker") || !strings.Contains(s, "server 379.1 ms") {
		t.Fatalf("timings stage %q", s)
	}
	screenshot(t, ctx, "small-playground")

	// A second query with the generic shape replaces the first answer.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("question"), "generic"),
		chromedp.Click(chromedp.ID("ask")),
		chromedp.Poll[chromedp.Void](`document.querySelector('section[data-stage="snippets"]') !== null`)); err != nil {
		t.Fatalf("second query: %v", err)
	}
	if want := "rationale,snippets,answer,timings"; stageNames() != want {
		t.Fatalf("stages %s, want %s", stageNames(), want)
	}
	if s := text("answer"); !strings.Contains(s, "A.") || !strings.Contains(s, "3 ms") {
		t.Fatalf("generic answer stage %q", s)
	}
}
