// Runs: the list (one compact row per run, filters, pages), one run's metric
// tables, series charts and artifacts, and the comparison of two runs.
'use strict';

// statusBadge shows any status the API reports; running, done, failed and
// stale have their own colours (a stale run's process died: not in progress).
RF.statusTitles = {
  running: 'in progress', done: 'finished', failed: 'finished with an error',
  stale: 'not finished and its process is gone: it will not progress',
};

RF.statusBadge = function (s) {
  const b = RF.badge(s, 'st-' + String(s).replace(/[^a-z0-9_-]/gi, '_'));
  if (RF.statusTitles[s]) b.title = RF.statusTitles[s];
  return b;
};

// headlineCell shows a run's headline metrics (chosen by the server) on one
// line; the row's title lists how many metrics the run has in all.
RF.headlineCell = function (r) {
  const h = r.headline || [];
  const n = Object.keys(r.final || {}).length;
  if (!h.length) return RF.el('span', { class: 'muted', text: '—' });
  const title = h.map(m => m.name + ' ' + RF.fmtMetric(m.value)).join(', ') + (n > h.length ? ` (${n} metrics in all)` : '');
  return RF.el('div', { class: 'headline', title }, h.map(m => RF.el('span', { class: 'hm' },
    RF.el('span', { class: 'mname', text: m.name }), ' ', RF.el('span', { class: 'mval', text: RF.fmtMetric(m.value) }))),
    n > h.length ? RF.el('span', { class: 'muted small', text: '+' + (n - h.length) }) : null);
};

// runsTable renders run summaries, one compact row each; with select=true
// each row has a checkbox and onSelect receives the checked ids.
RF.runsTable = function (list, select, onSelect) {
  const tbody = RF.el('tbody');
  const checked = new Set();
  for (const r of list) {
    const cb = select ? RF.el('input', {
      type: 'checkbox', 'aria-label': 'select ' + r.id, dataset: { run: r.id },
      onchange: ev => { ev.target.checked ? checked.add(r.id) : checked.delete(r.id); onSelect([...checked]); },
    }) : null;
    tbody.append(RF.el('tr', { dataset: { run: r.id, status: r.status } },
      select ? RF.el('td', {}, cb) : null,
      RF.el('td', {}, RF.el('a', { href: '/runs/' + encodeURIComponent(r.id), class: 'runid', text: r.id })),
      RF.el('td', { text: r.kind }),
      RF.el('td', { class: 'status' }, RF.statusBadge(r.status), r.error ? RF.el('span', { class: 'err small clip', title: r.error, text: ' ' + r.error }) : null),
      RF.el('td', { class: 'c-started', text: RF.fmtTime(r.started_at).replace(/:\d\d(\.\d+)?Z$/, '') }),
      RF.el('td', { class: 'num c-duration', text: RF.fmtDuration(r.started_at, r.finished_at) || '—' }),
      RF.el('td', { class: 'metrics' }, RF.headlineCell(r))));
  }
  // The config is on the run's page and in the comparison; the row stays one line.
  const head = ['id', 'kind', 'status', 'started (UTC)', 'duration', 'metrics'];
  if (select) head.unshift('');
  const cls = { status: 'c-status', 'started (UTC)': 'c-started', duration: 'c-duration' };
  return RF.el('table', { class: 'runs', id: 'runs-table' },
    RF.el('thead', {}, RF.el('tr', {}, head.map(h => RF.el('th', { class: cls[h] || null, text: h })))), tbody);
};

RF.homePage = async function (root) {
  RF.append(root, [RF.el('h1', { text: 'Workbench' }),
    RF.el('ul', { class: 'cards' },
      RF.el('li', {}, RF.el('a', { href: '/runs', text: 'Runs' }), ' — history, metric tables and curves, comparison'),
      RF.el('li', {}, RF.el('a', { href: '/labels', text: 'Label review' }), ' — accept or flip filter labels'),
      RF.el('li', {}, RF.el('a', { href: '/playground', text: 'Playground' }), ' — ask the pipeline a question')),
    RF.el('h2', { text: 'Latest runs' })]);
  const box = RF.el('div', { id: 'latest' });
  root.append(box);
  if (!RF.config.runs) { box.append(RF.el('p', { class: 'muted', text: 'No run store configured.' })); return; }
  const list = await RF.api('/api/runs?limit=5');
  box.append(list.runs.length ? RF.runsTable(list.runs, false) : RF.el('p', { class: 'muted', text: 'No runs yet.' }));
};

RF.runsPageSize = 25;

// runsPage lists one page of runs (kind and status filters and the page are
// URL parameters, so a filtered view can be bookmarked).
RF.runsPage = async function (root) {
  const params = new URLSearchParams(location.search);
  const limit = Math.max(1, parseInt(params.get('limit'), 10) || RF.runsPageSize);
  const offset = Math.max(0, parseInt(params.get('offset'), 10) || 0);
  const q = new URLSearchParams();
  if (params.get('kind')) q.set('kind', params.get('kind'));
  if (params.get('status')) q.set('status', params.get('status'));
  q.set('limit', limit);
  q.set('offset', offset);
  const list = await RF.api('/api/runs?' + q);
  const option = (v, label, cur) => RF.el('option', { value: v, text: label, selected: v === cur });
  const kinds = list.kinds.slice();
  if (params.get('kind') && !kinds.includes(params.get('kind'))) kinds.push(params.get('kind'));
  const kind = RF.el('select', { id: 'f-kind', name: 'kind', onchange: ev => ev.target.form.requestSubmit() },
    option('', 'any kind', params.get('kind') || ''), kinds.map(k => option(k, k, params.get('kind') || '')));
  const status = RF.el('select', { id: 'f-status', name: 'status', onchange: ev => ev.target.form.requestSubmit() },
    option('', 'any status', params.get('status') || ''), list.statuses.map(s => option(s, s, params.get('status') || '')));
  const cmp = RF.el('button', { id: 'compare-btn', type: 'button', disabled: true, text: 'Compare selected' });
  let selected = [];
  cmp.addEventListener('click', () => {
    if (selected.length === 2) location.href = '/runs/compare?a=' + encodeURIComponent(selected[0]) + '&b=' + encodeURIComponent(selected[1]);
  });
  const form = RF.el('form', { class: 'filters', id: 'runs-filter', method: 'get', action: '/runs' }, kind, status,
    limit !== RF.runsPageSize ? RF.el('input', { type: 'hidden', name: 'limit', value: limit }) : null,
    RF.el('button', { type: 'submit', text: 'Filter' }), RF.el('span', { class: 'sep' }), cmp,
    RF.el('span', { class: 'muted', text: 'select two runs to compare' }));
  const box = RF.el('div', { id: 'runs' });
  RF.append(root, [RF.el('h1', { text: 'Runs' }), form, box]);
  if (!list.runs.length) {
    box.append(RF.el('p', { class: 'muted', id: 'no-runs', text: list.total ? 'No runs on this page.' : 'No runs match.' }));
  } else {
    box.append(RF.runsTable(list.runs, true, ids => { selected = ids; cmp.disabled = ids.length !== 2; }));
  }
  box.append(RF.pager(list, params));
  if (list.runs.length >= 2) root.append(RF.metricAcrossRuns(list.runs, params.get('metric')));
};

// metricAcrossRuns charts one metric's final value across the listed runs
// (oldest to newest, x = the run's position), one line per run kind, with
// a picker of every metric the runs recorded (?metric= preselects one).
RF.metricAcrossRuns = function (runs, preset) {
  const ordered = runs.slice().reverse(); // the list is newest first
  const names = [...new Set(ordered.flatMap(r => Object.keys(r.final || {})))].sort(RF.metricNameOrder);
  const sec = RF.el('section', { id: 'across' }, RF.el('h2', { text: 'A metric across runs' }));
  if (!names.length) return sec;
  const first = (runs[0].headline || [])[0];
  let cur = names.includes(preset) ? preset : first && names.includes(first.name) ? first.name : names[0];
  const box = RF.el('div', { class: 'charts' });
  const draw = () => {
    const byKind = new Map();
    ordered.forEach((r, i) => {
      const v = (r.final || {})[cur];
      if (typeof v !== 'number') return;
      if (!byKind.has(r.kind)) byKind.set(r.kind, []);
      byKind.get(r.kind).push([i + 1, v]);
    });
    box.replaceChildren(RF.chartFigure([...byKind].map(([k, pts]) => ({ name: k, points: pts, metric: cur })),
      { title: cur, xLabel: 'run (oldest → newest on this page)', integerX: true }));
  };
  const pick = RF.el('select', { id: 'metric-across', onchange: ev => { cur = ev.target.value; draw(); } },
    names.map(n => RF.el('option', { value: n, text: n, selected: n === cur })));
  draw();
  sec.append(RF.el('label', { class: 'small' }, 'metric ', pick), box);
  return sec;
};

// pager links the previous and next pages, keeping the filters.
RF.pager = function (list, params) {
  const link = (off, text, id) => {
    const p = new URLSearchParams(params);
    if (off > 0) p.set('offset', off); else p.delete('offset');
    return RF.el('a', { href: '/runs' + (p.toString() ? '?' + p : ''), id, text });
  };
  const first = list.total ? list.offset + 1 : 0, last = list.offset + list.runs.length;
  return RF.el('nav', { class: 'pager', id: 'pager' },
    list.offset > 0 ? link(Math.max(0, list.offset - list.limit), '← newer', 'page-prev') : RF.el('span', { class: 'muted', text: '← newer' }),
    RF.el('span', { id: 'page-info', text: `${first}–${last} of ${list.total}` }),
    last < list.total ? link(last, 'older →', 'page-next') : RF.el('span', { class: 'muted', text: 'older →' }));
};

RF.infoTable = function (rows) {
  return RF.el('table', { class: 'kv info' }, RF.el('tbody', {}, rows.filter(r => r).map(([k, v]) =>
    RF.el('tr', {}, RF.el('th', { text: k }), RF.el('td', {}, v)))));
};

RF.runPage = async function (root, id) {
  const d = await RF.api('/api/runs/' + encodeURIComponent(id));
  RF.append(root, [RF.el('h1', {}, 'Run ', RF.el('span', { class: 'runid', id: 'run-id', text: d.id }), ' ', RF.statusBadge(d.status)),
    RF.infoTable([
      ['kind', d.kind], ['status', RF.statusBadge(d.status)],
      ['started', RF.fmtTime(d.started_at)], ['finished', RF.fmtTime(d.finished_at) || '—'],
      ['duration', RF.fmtDuration(d.started_at, d.finished_at) || '—'], ['version', d.version], ['backend', d.backend],
      ['compare', RF.el('a', { href: '/runs/compare?a=' + encodeURIComponent(d.id), text: 'compare with another run…' })],
    ]),
    d.error ? RF.el('p', { class: 'err run-error', id: 'run-error' }, RF.el('b', { text: 'error: ' }), d.error) : null]);
  const lay = RF.metricLayout(d.metrics, d.kind);
  const metrics = RF.el('section', { id: 'metrics' }, RF.el('h2', { text: 'Metrics' }));
  if (!(d.metrics || []).length) metrics.append(RF.el('p', { class: 'muted', text: 'No metrics recorded.' }));
  // eval mcqa: the condition table (accuracy per dataset and MIRAGE's average) first.
  const mcqa = d.kind === 'eval-mcqa' ? RF.mcqaTable(lay.scalars) : null;
  if (mcqa) metrics.append(RF.el('h3', { text: 'Accuracy by condition (Wilson 95% interval)' }), mcqa);
  if (Object.keys(lay.scalars).length) metrics.append(RF.scalarTables(lay.scalars));
  const rounds = RF.roundTable(lay.groups);
  if (rounds) metrics.append(RF.el('h3', { text: 'By round' }), rounds);
  const finals = RF.finalTable(lay.groups);
  if (finals) metrics.append(RF.el('h3', { text: 'Last values of the series' }), finals);
  if (lay.groups.length) metrics.append(RF.el('h3', { text: 'Series' }), RF.seriesCharts(lay.groups));
  root.append(metrics);
  root.append(RF.el('h2', { text: 'Config' }), RF.el('pre', { class: 'config', text: JSON.stringify(d.config, null, 2) }));
  root.append(RF.el('h2', { text: 'Artifacts' }));
  if (!d.artifacts || !d.artifacts.length) { root.append(RF.el('p', { class: 'muted', text: 'No artifacts.' })); return; }
  root.append(RF.el('table', { class: 'artifacts' },
    RF.el('thead', {}, RF.el('tr', {}, ['kind', 'path', 'bytes', 'sha256'].map(h => RF.el('th', { text: h })))),
    RF.el('tbody', {}, d.artifacts.map(a => RF.el('tr', {},
      RF.el('td', { text: a.kind }), RF.el('td', { class: 'path' }, RF.el('code', { text: a.path })),
      RF.el('td', { class: 'num', text: a.bytes }), RF.el('td', {}, RF.el('code', { class: 'small', title: a.sha256, text: a.sha256.slice(0, 16) + '…' })))))));
};

// metricNameOrder orders metric names with their numbers compared as
// numbers: F1@1, F1@2, F1@10 (not F1@1, F1@10, F1@2).
RF.metricNameOrder = (a, b) => a.localeCompare(b, 'en', { numeric: true });

// changeClass maps the server's verdict on a metric change to its colour.
RF.changeClass = function (m) {
  return m.change === 'better' ? 'better' : m.change === 'worse' ? 'worse' : m.change === 'same' ? 'same' : 'neutral';
};

RF.comparePage = async function (root) {
  const params = new URLSearchParams(location.search);
  const list = (await RF.api('/api/runs')).runs;
  const pick = (name, val) => RF.el('select', { id: 'cmp-' + name, name },
    RF.el('option', { value: '', text: 'run ' + name.toUpperCase() + '…' }),
    list.map(r => RF.el('option', { value: r.id, text: r.id + ' (' + r.kind + ')', selected: r.id === val })));
  const a = pick('a', params.get('a') || ''), b = pick('b', params.get('b') || '');
  const out = RF.el('div', { id: 'compare' });
  RF.append(root, [RF.el('h1', { text: 'Compare runs' }),
    RF.el('form', { class: 'filters', method: 'get', action: '/runs/compare' }, a, ' vs ', b, RF.el('button', { type: 'submit', text: 'Compare' })), out]);
  if (!a.value || !b.value) { out.append(RF.el('p', { class: 'muted', text: 'Pick two runs.' })); return; }
  const c = await RF.api('/api/compare?a=' + encodeURIComponent(a.value) + '&b=' + encodeURIComponent(b.value));
  const A = c.a, B = c.b;
  const rows = [['id', A.id, B.id], ['kind', A.kind, B.kind], ['status', A.status, B.status],
    ['started', RF.fmtTime(A.started_at), RF.fmtTime(B.started_at)], ['duration', RF.fmtDuration(A.started_at, A.finished_at), RF.fmtDuration(B.started_at, B.finished_at)],
    ['version', A.version, B.version], ['backend', A.backend, B.backend]];
  const fa = new Map(RF.flatten(A.config)), fb = new Map(RF.flatten(B.config));
  for (const k of [...new Set([...fa.keys(), ...fb.keys()])].sort()) rows.push(['config ' + k, fa.get(k), fb.get(k)]);
  const side = RF.el('table', { class: 'side', id: 'side-by-side' },
    RF.el('thead', {}, RF.el('tr', {}, RF.el('th'), RF.el('th', { text: 'A' }), RF.el('th', { text: 'B' }))),
    RF.el('tbody', {}, rows.map(([k, x, y]) => RF.el('tr', { class: x === y ? (k.startsWith('config ') ? 'same' : '') : 'diff' },
      RF.el('th', { text: k }), RF.el('td', { text: x === undefined ? '—' : x }), RF.el('td', { text: y === undefined ? '—' : y })))));
  const arrow = m => m.change === 'better' ? ' ▲' : m.change === 'worse' ? ' ▼' : '';
  const diff = RF.el('table', { class: 'metricdiff metrics', id: 'metric-diff' },
    RF.el('thead', {}, RF.el('tr', {}, ['metric', 'A', 'B', 'B − A'].map(h => RF.el('th', { text: h })))),
    RF.el('tbody', {}, (c.metrics || []).slice().sort((x, y) => RF.metricNameOrder(x.name, y.name)).map(m => RF.el('tr', { dataset: { metric: m.name, change: m.change || '' } },
      RF.el('th', { text: m.name, title: m.better ? m.better + ' is better' : 'no better direction' }),
      RF.el('td', { class: 'num', text: m.has_a ? RF.fmtMetric(m.a) : '—' }), RF.el('td', { class: 'num', text: m.has_b ? RF.fmtMetric(m.b) : '—' }),
      RF.el('td', { class: 'num ' + RF.changeClass(m), title: m.change || null, text: m.has_a && m.has_b ? RF.fmtMetric(m.diff) + arrow(m) : '—' })))));
  out.append(RF.el('div', { class: 'cols2' },
    RF.el('section', {}, RF.el('h2', { text: 'Runs' }), side,
      RF.el('label', { class: 'small muted' }, RF.el('input', { type: 'checkbox', id: 'show-same', onchange: ev => side.classList.toggle('all', ev.target.checked) }),
        ' show the ' + side.querySelectorAll('tr.same').length + ' settings both runs share')),
    RF.el('section', {}, RF.el('h2', { text: 'Final metrics' }),
      RF.el('p', { class: 'muted small', text: '▲ green: B is better, ▼ red: B is worse (lower is better for loss, perplexity, latency and errors)' }), diff)));
  // Series of both runs: one chart per series group, A solid and B dashed.
  const la = RF.metricLayout(A.metrics, A.kind), lb = RF.metricLayout(B.metrics, B.kind);
  const groups = new Map();
  for (const [tag, lay] of [['A', la], ['B', lb]]) {
    for (const g of lay.groups) {
      if (!groups.has(g.key)) groups.set(g.key, Object.assign({}, g, { lines: [] }));
      for (const l of g.lines) groups.get(g.key).lines.push(Object.assign({}, l, { name: tag + ' ' + l.name, dashed: tag === 'B' }));
    }
  }
  if (groups.size) {
    const charts = RF.el('div', { class: 'charts', id: 'charts' });
    for (const g of groups.values()) {
      // Each line of each run has its own colour (B's lines also dashed),
      // so A and B are told apart without the legend's dash.
      const names = [...new Set(g.lines.map(l => l.name.slice(2)))];
      for (const l of g.lines) l.color = RF.seriesColors[(2 * names.indexOf(l.name.slice(2)) + (l.dashed ? 1 : 0)) % RF.seriesColors.length];
      charts.append(RF.chartFigure(g.lines, g));
    }
    out.append(RF.el('h2', { text: 'Series' }), charts);
  }
};
