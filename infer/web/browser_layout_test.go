package web

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ragforge/ragforge/data/tracker"
)

// layout is what checkLayout measures on a drawn page.
type layout struct {
	ScrollWidth int `json:"scrollWidth"` // document width, px
	ClientWidth int `json:"clientWidth"` // viewport width without the scroll bar, px
	Height      int `json:"height"`      // document height, px
	Charts      int `json:"charts"`
	// Names lists, per chart, the metric names its lines draw.
	Names [][]string `json:"names"`
	// Wide lists elements reaching past the viewport's right edge.
	Wide []string `json:"wide"`
}

const measureJS = `(() => {
  const de = document.documentElement;
  const charts = [...document.querySelectorAll('svg.chart:not(.bars)')];
  // An element past the right edge counts unless an ancestor clips it
  // (overflow hidden or auto, as table cells with an ellipsis do).
  const clipped = e => { for (let a = e.parentElement; a && a !== de; a = a.parentElement) {
    if (getComputedStyle(a).overflowX !== 'visible') return a.getBoundingClientRect().right <= de.clientWidth + 0.5; } return false; };
  const wide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > de.clientWidth + 0.5 && !clipped(e))
    .slice(0, 5).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className);
  return { scrollWidth: de.scrollWidth, clientWidth: de.clientWidth, height: de.scrollHeight, charts: charts.length,
    names: charts.map(c => [...c.querySelectorAll('path.series')].map(p => p.dataset.name)), wide };
})()`

// checkLayout fails the test when the page is wider than the 1280 px
// window or when a metric is drawn in more than one chart (for compare, once
// per run), and returns the measurements.
func checkLayout(t *testing.T, ctx context.Context, page string, perName int) layout {
	t.Helper()
	l := js[layout](t, ctx, measureJS)
	t.Logf("%s: %d×%d px in a %d px viewport, %d charts", page, l.ScrollWidth, l.Height, l.ClientWidth, l.Charts)
	if l.ClientWidth > 1280 || l.ClientWidth < 1200 {
		t.Fatalf("%s: viewport %d px wide, want the 1280 px window", page, l.ClientWidth)
	}
	if l.ScrollWidth > l.ClientWidth || len(l.Wide) > 0 {
		t.Errorf("%s: page is %d px wide in a %d px viewport; elements past the edge: %v", page, l.ScrollWidth, l.ClientWidth, l.Wide)
	}
	seen := map[string]int{}
	for i, names := range l.Names {
		inChart := map[string]bool{} // a series split where its steps restart has several lines in one chart
		for _, n := range names {
			if inChart[n] {
				continue
			}
			inChart[n] = true
			seen[n]++
			if seen[n] > perName {
				t.Errorf("%s: metric %q drawn again in chart %d (charts %v)", page, n, i, l.Names)
			}
		}
	}
	return l
}

// waitPage waits, across the navigation a click or a form starts, until the
// page at a URL whose query contains query has been drawn (the tab's 30 s
// bound stops it otherwise).
func waitPage(t *testing.T, ctx context.Context, query string) {
	t.Helper()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.search.includes(`+strconv.Quote(query)+`) && document.querySelector('main#app[data-ready="1"]') !== null`))
		if err == nil && ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("page with %q in its URL not drawn: %v", query, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBrowserLayout loads every page over a realistic run store at
// 1280×900 and checks the layout: no page wider than the window, metric
// tables for scalar metrics, one chart per series group and none for
// scalars, compact runs list with filters and pages, compare colours by the
// metric's direction, stale runs apart from running ones.
func TestBrowserLayout(t *testing.T) {
	b := browser(t)
	rs, s := seedStore(t)
	f := newFixture(t) // label queue for the review page
	srv, _ := serve(t, Options{Runs: rs, Labels: f.labels, PublicRead: true, Token: testToken})

	t.Run("home", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/")
		checkLayout(t, ctx, "home", 1)
		if n := js[int](t, ctx, `document.querySelectorAll('#latest tr[data-run]').length`); n != 5 {
			t.Fatalf("latest runs rows %d, want 5", n)
		}
		screenshot(t, ctx, "home")
	})
	t.Run("runs list", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/runs")
		l := checkLayout(t, ctx, "runs", 1)
		rows := js[int](t, ctx, `document.querySelectorAll('#runs-table tbody tr').length`)
		if rows != s.total {
			t.Fatalf("runs list shows %d rows, want all %d (one page)", rows, s.total)
		}
		// One compact row per run: every row one text line high.
		if h := js[float64](t, ctx, `Math.max(...[...document.querySelectorAll('#runs-table tbody tr')].map(r => r.getBoundingClientRect().height))`); h > 48 {
			t.Errorf("tallest run row %.0f px, want one line (≤ 48 px)", h)
		}
		if l.Height > 1300 {
			t.Errorf("runs list %d px tall for %d runs, want ≤ 1300", l.Height, s.total)
		}
		if l.Charts != 1 { // the metric across the listed runs, below the table
			t.Errorf("runs list draws %d charts, want 1 (a metric across runs)", l.Charts)
		}
		head := js[string](t, ctx, `document.querySelector('#runs-table tr[data-run="`+s.evalRet+`"] td.metrics').textContent`)
		if !strings.HasPrefix(head, "nDCG@10 ") || !strings.Contains(head, "Recall@10") || !strings.Contains(head, "MRR@10") {
			t.Errorf("eval-retrieval headline %q, want nDCG@10, Recall@10, MRR@10", head)
		}
		opts := js[[]string](t, ctx, `[...document.querySelectorAll('#f-status option')].map(o => o.value)`)
		if strings.Join(opts, ",") != ",running,done,failed,stale" {
			t.Errorf("status filter options %v", opts)
		}
		stale := js[[]string](t, ctx, `(() => { const b = document.querySelector('tr[data-run="`+s.stale+`"] .badge');
			const r = document.querySelector('tr[data-run="`+s.running+`"] .badge');
			return [b.textContent, b.className, getComputedStyle(b).backgroundColor, getComputedStyle(r).backgroundColor]; })()`)
		if stale[0] != "stale" || !strings.Contains(stale[1], "st-stale") || stale[2] == stale[3] {
			t.Errorf("stale badge %v: want text stale, class st-stale, a colour other than running's", stale)
		}
		screenshot(t, ctx, "runs")
	})
	t.Run("runs filters and pages", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/runs?limit=8")
		kinds := func() []string {
			return js[[]string](t, ctx, `[...document.querySelectorAll('#runs-table tbody tr td:nth-child(3)')].map(td => td.textContent)`)
		}
		if n := len(kinds()); n != 8 {
			t.Fatalf("first page has %d rows, want 8", n)
		}
		if p := js[string](t, ctx, `document.getElementById('page-info').textContent`); p != fmt.Sprintf("1–8 of %d", s.total) {
			t.Fatalf("page info %q", p)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("page-next"))); err != nil {
			t.Fatal(err)
		}
		waitPage(t, ctx, "offset=8")
		if p := js[string](t, ctx, `document.getElementById('page-info').textContent`); p != fmt.Sprintf("9–16 of %d", s.total) {
			t.Fatalf("second page info %q", p)
		}
		// Choosing a kind submits the filter; the page size stays.
		// The change event submits the form: dispatch it after this script returns.
		js[bool](t, ctx, `(() => { const k = document.getElementById('f-kind'); k.value = 'train-filter';
			setTimeout(() => k.dispatchEvent(new Event('change')), 0); return true; })()`)
		waitPage(t, ctx, "kind=train-filter")
		if k := kinds(); len(k) != s.kindCounts["train-filter"] || strings.Join(k, ",") != strings.TrimSuffix(strings.Repeat("train-filter,", len(k)), ",") {
			t.Fatalf("kind filter rows %v, want %d train-filter runs", k, s.kindCounts["train-filter"])
		}
		open(t, ctx, srv.URL+"/runs?status=stale")
		ids := js[[]string](t, ctx, `[...document.querySelectorAll('#runs-table tbody tr')].map(r => r.dataset.run)`)
		if len(ids) != 1 || ids[0] != s.stale {
			t.Fatalf("status=stale rows %v, want [%s]", ids, s.stale)
		}
	})
	t.Run("eval-retrieval run", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/runs/"+s.evalRet)
		l := checkLayout(t, ctx, "eval-retrieval run", 1)
		if l.Charts != 0 {
			t.Errorf("eval-retrieval run draws %d charts for scalar metrics, want 0", l.Charts)
		}
		head := js[[]string](t, ctx, `[...document.querySelectorAll('table.cutoffs thead th')].map(th => th.textContent)`)
		if strings.Join(head, ",") != "k,P,Recall,Success,F1,nDCG" {
			t.Fatalf("cutoff table columns %v, want k,P,Recall,Success,F1,nDCG", head)
		}
		ks := js[[]string](t, ctx, `[...document.querySelectorAll('table.cutoffs tbody tr')].map(r => r.dataset.k)`)
		if strings.Join(ks, ",") != "1,3,5,10" {
			t.Fatalf("cutoff rows %v, want 1,3,5,10", ks)
		}
		want := evalRetrievalMetrics(0.7 + 0.07*2)
		cell := js[string](t, ctx, `document.querySelector('table.cutoffs tr[data-k="10"] td:nth-child(6)').textContent`)
		if cell != fmt.Sprintf("%.4f", want["nDCG@10"]) {
			t.Fatalf("nDCG@10 cell %q, want %.4f", cell, want["nDCG@10"])
		}
		other := js[[]string](t, ctx, `[...document.querySelectorAll('#other-metrics tbody tr')].map(r => r.dataset.metric)`)
		if strings.Join(other, ",") != "MAP,MRR@10,R-Prec,Recall@100" {
			t.Fatalf("other metrics %v, want MAP, MRR@10, R-Prec, Recall@100", other)
		}
		if l.Height > 1400 {
			t.Errorf("eval-retrieval run page %d px tall, want ≤ 1400", l.Height)
		}
		screenshot(t, ctx, "run-eval-retrieval")
	})
	t.Run("train-filter run", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/runs/"+s.trainA)
		l := checkLayout(t, ctx, "train-filter run", 1)
		groups := js[[]string](t, ctx, `[...document.querySelectorAll('#charts svg.chart')].map(s => s.dataset.metric)`)
		if strings.Join(groups, ",") != "loss,learning_rate,grad_norm,valid metrics" {
			t.Fatalf("charts %v, want loss, learning_rate, grad_norm, valid metrics", groups)
		}
		// 30 logging steps: one path of 30 points in the loss chart.
		d := js[string](t, ctx, `document.querySelector('svg[data-metric="loss"] path.series').getAttribute('d')`)
		if strings.Count(d, "L") != 29 {
			t.Fatalf("loss path has %d segments, want 29", strings.Count(d, "L"))
		}
		if n := len(l.Names[3]); n != 8 {
			t.Fatalf("valid metrics chart has %d lines, want 8", n)
		}
		if n := js[int](t, ctx, `document.querySelectorAll('#final-table tbody tr').length`); n != 11 {
			t.Fatalf("last-values table has %d rows, want 11", n)
		}
		screenshot(t, ctx, "run-train-filter")
	})
	t.Run("selflearn run", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/runs/"+s.selflearn)
		l := checkLayout(t, ctx, "selflearn run", 1)
		groups := js[[]string](t, ctx, `[...document.querySelectorAll('#charts svg.chart')].map(s => s.dataset.metric + ':' + s.dataset.x)`)
		want := "generator/loss:step,loss:step,learning_rate:step,grad_norm:step,MRR@10:round,nDCG@10:round,Recall@1:round,Recall@10:round,Recall@100:round,epoch:step"
		if strings.Join(groups, ",") != want {
			t.Fatalf("charts %v\nwant %s", groups, want)
		}
		// Rounds 0..2: whole-number ticks only.
		ticks := js[[]string](t, ctx, `[...document.querySelectorAll('svg[data-metric="nDCG@10"] text.xtick')].map(t => t.textContent)`)
		if strings.Join(ticks, ",") != "0,1,2" {
			t.Fatalf("round ticks %v, want 0,1,2", ticks)
		}
		lines := js[[]string](t, ctx, `[...document.querySelectorAll('svg[data-metric="nDCG@10"] path.series')].map(p => p.dataset.series)`)
		if len(lines) != 7 {
			t.Fatalf("nDCG@10 lines %v, want the 7 variants", lines)
		}
		// The retriever's loss restarts at step 1 each round: one line per training.
		if parts := js[[]string](t, ctx, `[...document.querySelectorAll('svg[data-metric="loss"] path.series')].map(p => p.dataset.series)`); strings.Join(parts, ",") != "loss part 1,loss part 2" {
			t.Fatalf("retriever loss lines %v", parts)
		}
		if n := js[int](t, ctx, `document.querySelectorAll('#round-table tbody tr').length`); n != 14 {
			t.Fatalf("round table rows %d, want 4 + 5 + 5", n)
		}
		if l.Charts != 10 {
			t.Fatalf("%d charts", l.Charts)
		}
		screenshot(t, ctx, "run-selflearn")
	})
	t.Run("other runs", func(t *testing.T) {
		for _, kind := range []string{"eval-answers", "eval-sensitivity", "eval-filter", "label-evidence", "eval-mcqa"} {
			list, err := rs.List(tracker.ListOptions{Kind: kind})
			if err != nil || len(list) == 0 {
				t.Fatalf("%s: %v %v", kind, list, err)
			}
			ctx := tab(t, b)
			open(t, ctx, srv.URL+"/runs/"+list[len(list)-1].ID)
			l := checkLayout(t, ctx, kind, 1)
			if l.Charts != 0 {
				t.Errorf("%s run draws %d charts for scalars", kind, l.Charts)
			}
			if n := js[int](t, ctx, `document.querySelectorAll('#scalars table.metrics').length`); n == 0 {
				t.Errorf("%s run: no metrics table", kind)
			}
			if kind == "eval-mcqa" {
				// The condition table: conditions as rows, MIRAGE's datasets then the average as columns.
				rows := js[[]string](t, ctx, `[...document.querySelectorAll('#mcqa-table tr')].map(r => r.textContent)`)
				if len(rows) != 4 || !strings.HasPrefix(rows[0], "conditionmmlumedqamedmcqapubmedqaaverage") || !strings.HasPrefix(rows[3], "rag235.0% [20.0, 55.0]") || !strings.HasSuffix(rows[1], "26.5%") {
					t.Errorf("eval-mcqa condition table %q", rows)
				}
			}
			screenshot(t, ctx, "run-"+kind)
		}
	})
	t.Run("compare", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/runs/compare?a="+s.trainA+"&b="+s.trainB)
		checkLayout(t, ctx, "compare", 2)
		change := func(metric string) []string {
			return js[[]string](t, ctx, `(() => { const r = document.querySelector('#metric-diff tr[data-metric="`+metric+`"]');
				const td = r.querySelector('td:last-child'); return [r.dataset.change, td.className, getComputedStyle(td).color]; })()`)
		}
		red, green := "rgb(209, 36, 47)", "rgb(26, 127, 55)"
		if c := change("train/loss"); c[0] != "worse" || !strings.Contains(c[1], "worse") || c[2] != red {
			t.Errorf("train/loss went up: %v, want worse in red", c)
		}
		if c := change("valid/accuracy"); c[0] != "better" || c[2] != green {
			t.Errorf("valid/accuracy went up: %v, want better in green", c)
		}
		if c := change("train/learning_rate"); c[0] != "" || c[2] == red || c[2] == green {
			t.Errorf("learning rate: %v, want neither better nor worse", c)
		}
		if n := js[int](t, ctx, `document.querySelectorAll('svg[data-metric="loss"] path.series').length`); n != 2 {
			t.Errorf("loss overlay has %d lines, want A and B", n)
		}
		screenshot(t, ctx, "compare")
	})
	t.Run("labels", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/labels")
		checkLayout(t, ctx, "labels", 1)
		screenshot(t, ctx, "labels")
	})
	t.Run("playground", func(t *testing.T) {
		ctx := tab(t, b)
		open(t, ctx, srv.URL+"/playground")
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("question"), "long"), chromedp.Click(chromedp.ID("ask")),
			chromedp.WaitVisible(chromedp.CSS(`#stages`))); err != nil {
			t.Fatal(err)
		}
		checkLayout(t, ctx, "playground", 1)
		row := js[[]string](t, ctx, `[...document.querySelectorAll('section[data-stage="retrieved"] tbody tr:first-child td')].map(td => td.textContent)`)
		if len(row) != 5 || row[1] != "12.5" || !strings.HasPrefix(row[2], "Fixador de Bouin") || row[3] != "3" || !strings.HasPrefix(row[4], "Grade 3") {
			t.Fatalf("first hit row %q: want rank, score 12.5, source title, page 3, text", row)
		}
		if n := js[int](t, ctx, `document.querySelectorAll('section[data-stage="retrieved"] thead th').length`); n != 5 {
			t.Fatalf("hit table has %d columns, want #, score, source, page, text", n)
		}
		screenshot(t, ctx, "playground")
	})
}
