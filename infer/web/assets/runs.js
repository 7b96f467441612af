// Runs: the list (kind, status, config, final metrics), one run's metric
// curves and artifacts, and the side-by-side comparison of two runs.
'use strict';

RF.statusBadge = function (s) {
  return RF.badge(s, 'st-' + s);
};

RF.configCell = function (cfg) {
  const flat = RF.flatten(cfg);
  if (cfg === null || cfg === undefined || (flat.length === 1 && flat[0][0] === '')) {
    return RF.el('code', { text: JSON.stringify(cfg) });
  }
  const summary = flat.slice(0, 3).map(([k, v]) => k + '=' + v).join(', ') + (flat.length > 3 ? ', …' : '');
  return RF.el('details', { class: 'cfg' },
    RF.el('summary', { text: summary }),
    RF.el('pre', { text: JSON.stringify(cfg, null, 2) }));
};

RF.metricsCell = function (final) {
  const names = Object.keys(final || {}).sort();
  if (names.length === 0) return RF.el('span', { class: 'muted', text: '—' });
  return RF.el('ul', { class: 'metrics' }, names.map(n =>
    RF.el('li', {}, RF.el('span', { class: 'mname', text: n }), ' ', RF.el('span', { class: 'mval', text: RF.fmtNum(final[n]) }))));
};

// runsTable renders run summaries; with select=true each row has a checkbox
// and onSelect receives the checked ids.
RF.runsTable = function (list, select, onSelect) {
  const tbody = RF.el('tbody');
  const checked = new Set();
  for (const r of list) {
    const cb = select ? RF.el('input', {
      type: 'checkbox', 'aria-label': 'select ' + r.id, dataset: { run: r.id },
      onchange: ev => { ev.target.checked ? checked.add(r.id) : checked.delete(r.id); onSelect([...checked]); },
    }) : null;
    tbody.append(RF.el('tr', { dataset: { run: r.id } },
      select ? RF.el('td', {}, cb) : null,
      RF.el('td', {}, RF.el('a', { href: '/runs/' + encodeURIComponent(r.id), class: 'runid', text: r.id })),
      RF.el('td', { text: r.kind }),
      RF.el('td', {}, RF.statusBadge(r.status), r.error ? RF.el('div', { class: 'err small', text: r.error }) : null),
      RF.el('td', { text: RF.fmtTime(r.started_at) }),
      RF.el('td', { text: RF.fmtDuration(r.started_at, r.finished_at) }),
      RF.el('td', { text: r.backend }),
      RF.el('td', {}, RF.configCell(r.config)),
      RF.el('td', {}, RF.metricsCell(r.final))));
  }
  const head = ['id', 'kind', 'status', 'started (UTC)', 'duration', 'backend', 'config', 'final metrics'];
  if (select) head.unshift('');
  return RF.el('table', { class: 'runs', id: 'runs-table' },
    RF.el('thead', {}, RF.el('tr', {}, head.map(h => RF.el('th', { text: h })))), tbody);
};

RF.homePage = async function (root) {
  RF.append(root, [RF.el('h1', { text: 'Workbench' }),
    RF.el('ul', { class: 'cards' },
      RF.el('li', {}, RF.el('a', { href: '/runs', text: 'Runs' }), ' — history, metric curves, comparison'),
      RF.el('li', {}, RF.el('a', { href: '/labels', text: 'Label review' }), ' — accept or flip filter labels'),
      RF.el('li', {}, RF.el('a', { href: '/playground', text: 'Playground' }), ' — ask the pipeline a question')),
    RF.el('h2', { text: 'Latest runs' })]);
  const box = RF.el('div', { id: 'latest' });
  root.append(box);
  if (!RF.config.runs) { box.append(RF.el('p', { class: 'muted', text: 'No run store configured.' })); return; }
  const list = await RF.api('/api/runs?limit=5');
  box.append(list.length ? RF.runsTable(list, false) : RF.el('p', { class: 'muted', text: 'No runs yet.' }));
};

RF.runsPage = async function (root) {
  const params = new URLSearchParams(location.search);
  const kind = RF.el('input', { id: 'f-kind', name: 'kind', placeholder: 'kind', value: params.get('kind') || '', size: 12 });
  const status = RF.el('select', { id: 'f-status', name: 'status' },
    ['', 'running', 'done', 'failed'].map(s => RF.el('option', { value: s, text: s || 'any status', selected: s === (params.get('status') || '') })));
  const cmp = RF.el('button', { id: 'compare-btn', type: 'button', disabled: true, text: 'Compare selected' });
  let selected = [];
  cmp.addEventListener('click', () => {
    if (selected.length === 2) location.href = '/runs/compare?a=' + encodeURIComponent(selected[0]) + '&b=' + encodeURIComponent(selected[1]);
  });
  const form = RF.el('form', { class: 'filters', method: 'get', action: '/runs' }, kind, status,
    RF.el('button', { type: 'submit', text: 'Filter' }), cmp, RF.el('span', { class: 'muted', text: 'select two runs to compare' }));
  const box = RF.el('div', { id: 'runs' });
  RF.append(root, [RF.el('h1', { text: 'Runs' }), form, box]);
  const q = new URLSearchParams();
  if (kind.value) q.set('kind', kind.value);
  if (status.value) q.set('status', status.value);
  const list = await RF.api('/api/runs?' + q);
  if (!list.length) { box.append(RF.el('p', { class: 'muted', id: 'no-runs', text: 'No runs match.' })); return; }
  box.append(RF.runsTable(list, true, ids => { selected = ids; cmp.disabled = ids.length !== 2; }));
};

// seriesByName groups metric points by name: {name: [[step, value], ...]}.
RF.seriesByName = function (metrics) {
  const by = {};
  for (const m of metrics || []) (by[m.name] = by[m.name] || []).push([m.step, m.value]);
  return by;
};

RF.infoTable = function (rows) {
  return RF.el('table', { class: 'kv' }, RF.el('tbody', {}, rows.filter(r => r).map(([k, v]) =>
    RF.el('tr', {}, RF.el('th', { text: k }), RF.el('td', {}, v)))));
};

RF.runPage = async function (root, id) {
  const d = await RF.api('/api/runs/' + encodeURIComponent(id));
  RF.append(root, [RF.el('h1', {}, 'Run ', RF.el('span', { class: 'runid', id: 'run-id', text: d.id })),
    RF.infoTable([
      ['kind', d.kind], ['status', RF.statusBadge(d.status)], d.error ? ['error', RF.el('span', { class: 'err', text: d.error })] : null,
      ['started', RF.fmtTime(d.started_at)], ['finished', RF.fmtTime(d.finished_at)],
      ['duration', RF.fmtDuration(d.started_at, d.finished_at)], ['version', d.version], ['backend', d.backend],
      ['compare', RF.el('a', { href: '/runs/compare?a=' + encodeURIComponent(d.id), text: 'compare with another run…' })],
    ]),
    RF.el('h2', { text: 'Config' }), RF.el('pre', { class: 'config', text: JSON.stringify(d.config, null, 2) }),
    RF.el('h2', { text: 'Metrics' })]);
  const by = RF.seriesByName(d.metrics);
  const names = Object.keys(by).sort();
  const charts = RF.el('div', { class: 'charts', id: 'charts' });
  if (!names.length) charts.append(RF.el('p', { class: 'muted', text: 'No metrics recorded.' }));
  for (const n of names) charts.append(RF.el('figure', {}, RF.lineChart([{ name: n, points: by[n] }], { title: n })));
  root.append(charts);
  root.append(RF.el('h2', { text: 'Artifacts' }));
  if (!d.artifacts || !d.artifacts.length) { root.append(RF.el('p', { class: 'muted', text: 'No artifacts.' })); return; }
  root.append(RF.el('table', { class: 'artifacts' },
    RF.el('thead', {}, RF.el('tr', {}, ['kind', 'path', 'bytes', 'sha256'].map(h => RF.el('th', { text: h })))),
    RF.el('tbody', {}, d.artifacts.map(a => RF.el('tr', {},
      RF.el('td', { text: a.kind }), RF.el('td', {}, RF.el('code', { text: a.path })),
      RF.el('td', { text: a.bytes }), RF.el('td', {}, RF.el('code', { class: 'small', text: a.sha256.slice(0, 16) + '…' })))))));
};

RF.comparePage = async function (root) {
  const params = new URLSearchParams(location.search);
  const list = await RF.api('/api/runs');
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
  out.append(RF.el('table', { class: 'side', id: 'side-by-side' },
    RF.el('thead', {}, RF.el('tr', {}, RF.el('th'), RF.el('th', { text: 'A' }), RF.el('th', { text: 'B' }))),
    RF.el('tbody', {}, rows.map(([k, x, y]) => RF.el('tr', { class: x === y ? '' : 'diff' },
      RF.el('th', { text: k }), RF.el('td', { text: x === undefined ? '—' : x }), RF.el('td', { text: y === undefined ? '—' : y }))))));
  out.append(RF.el('h2', { text: 'Final metrics' }));
  out.append(RF.el('table', { class: 'metricdiff', id: 'metric-diff' },
    RF.el('thead', {}, RF.el('tr', {}, ['metric', 'A', 'B', 'B − A'].map(h => RF.el('th', { text: h })))),
    RF.el('tbody', {}, (c.metrics || []).map(m => RF.el('tr', { dataset: { metric: m.name } },
      RF.el('th', { text: m.name }),
      RF.el('td', { text: m.has_a ? RF.fmtNum(m.a) : '—' }), RF.el('td', { text: m.has_b ? RF.fmtNum(m.b) : '—' }),
      RF.el('td', { class: m.has_a && m.has_b ? (m.diff > 0 ? 'up' : m.diff < 0 ? 'down' : '') : '', text: m.has_a && m.has_b ? RF.fmtNum(m.diff) : '—' }))))));
  const sa = RF.seriesByName(A.metrics), sb = RF.seriesByName(B.metrics);
  const charts = RF.el('div', { class: 'charts', id: 'charts' });
  for (const n of [...new Set([...Object.keys(sa), ...Object.keys(sb)])].sort()) {
    charts.append(RF.el('figure', {}, RF.lineChart([{ name: 'A', points: sa[n] || [] }, { name: 'B', points: sb[n] || [] }], { title: n })));
  }
  out.append(RF.el('h2', { text: 'Curves' }), charts);
};
