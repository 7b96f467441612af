// Metric layout of a run page: which recorded metrics are scalars (shown in
// tables) and which are series (shown in charts, one chart per series group).
//
// Names follow what the commands record in the run store:
//   eval retrieval   "P@5", "Recall@10", "nDCG@10", "MRR@10", "R-Prec" (step 0)
//   train filter     "train/loss", "train/learning_rate", "train/grad_norm"
//                    every logging step; "valid/accuracy", "valid/f1", ... at
//                    each validation
//   selflearn        "<variant>/nDCG@10" at step = round; "r<t>/generator/loss"
//                    per generator step of round t; "loss", "learning_rate",
//                    "grad_norm", "epoch" per retriever step (restarting at
//                    each round)
//   others           scalars at step 0 ("accuracy", "labels_helpful",
//                    "rougeL@5", "pearson(length,rougeL)", ...)
'use strict';

// parseMetric splits "prefix/base@k" into its parts (prefix is everything
// before the last "/", k is null without a numeric "@k" suffix).
RF.parseMetric = function (name) {
  const slash = name.lastIndexOf('/');
  const prefix = slash >= 0 ? name.slice(0, slash) : '';
  const last = name.slice(slash + 1);
  const m = /^(.+)@(\d+)$/.exec(last);
  return { name, prefix, last, base: m ? m[1] : last, k: m ? Number(m[2]) : null };
};

// Columns of a cutoff table, in the CLI's order (retrieval/eval Table: P,
// Recall, F1, nDCG; Success, MRR and MAP where recorded per k); other bases
// follow alphabetically.
RF.kColumnOrder = ['p', 'precision', 'recall', 'success', 'f1', 'ndcg', 'mrr', 'map'];

RF.byColumnOrder = function (a, b) {
  const ia = RF.kColumnOrder.indexOf(a.toLowerCase()), ib = RF.kColumnOrder.indexOf(b.toLowerCase());
  if (ia !== ib) return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
  return a.localeCompare(b);
};

RF.splitPrefixes = ['valid', 'validation', 'eval', 'test'];

// seriesKey returns the chart a metric belongs to and its line's name there:
// per-round curves ("r2/generator/loss") share a chart with a line per
// round; "<variant>/<metric>@k" shares one with a line per variant;
// "valid/<metric>" share one chart of validation metrics; "train/<x>" is
// its own chart titled <x>; anything else is a chart of its own.
RF.seriesKey = function (name) {
  const r = /^r(\d+)\/(.+)$/.exec(name);
  if (r) return { group: r[2], line: 'round ' + r[1], perVariant: false };
  const p = RF.parseMetric(name);
  if (p.prefix && p.k !== null) return { group: p.last, line: p.prefix, perVariant: true };
  if (RF.splitPrefixes.includes(p.prefix.toLowerCase())) return { group: p.prefix + ' metrics', line: p.last, perVariant: false };
  if (p.prefix === 'train') return { group: p.last, line: name, perVariant: false };
  return { group: name, line: name, perVariant: false };
};

// restarts splits points (ordered as recorded) where the step stops
// increasing: a series logged by several trainings in one run (selflearn's
// retriever, one training per round) becomes one line per training.
RF.restarts = function (pts) {
  const segs = [];
  let cur = [];
  for (const p of pts) {
    if (cur.length && p[0] <= cur[cur.length - 1][0]) { segs.push(cur); cur = []; }
    cur.push(p);
  }
  if (cur.length) segs.push(cur);
  return segs;
};

// metricLayout reads a run's metric points ({name, step, value, created})
// and returns {scalars: {name: final value}, groups: [{key, title, xLabel,
// integerX, perVariant, lines: [{name, metric, points: [[x, y], ...]}]}]}.
// A group is a series when one of its metrics has points at two or more
// steps; otherwise its metrics are scalars (their value at the highest step).
RF.metricLayout = function (points, kind) {
  const byName = new Map();
  (points || []).forEach((m, i) => {
    if (!byName.has(m.name)) byName.set(m.name, []);
    byName.get(m.name).push({ step: m.step, value: m.value, t: m.created || '', i });
  });
  const groups = new Map();
  for (const [name, pts] of byName) {
    const key = RF.seriesKey(name);
    if (!groups.has(key.group)) groups.set(key.group, { key: key.group, perVariant: key.perVariant, metrics: [] });
    groups.get(key.group).metrics.push({ name, line: key.line, pts });
  }
  const scalars = {};
  const out = [];
  for (const g of groups.values()) {
    const series = g.metrics.some(m => new Set(m.pts.map(p => p.step)).size > 1);
    if (!series) {
      // Points come ordered by step then insertion: the last is the final value.
      for (const m of g.metrics) scalars[m.name] = m.pts[m.pts.length - 1].value;
      continue;
    }
    const lines = [];
    for (const m of g.metrics.sort((a, b) => a.line.localeCompare(b.line))) {
      const ordered = m.pts.slice().sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : a.i - b.i)).map(p => [p.step, p.value]);
      const segs = RF.restarts(ordered);
      if (segs.length === 1) lines.push({ name: m.line, metric: m.name, points: segs[0] });
      else segs.forEach((s, i) => lines.push({ name: m.line + ' part ' + (i + 1), metric: m.name, points: s }));
    }
    const rounds = g.perVariant && kind === 'selflearn';
    out.push({ key: g.key, title: g.key, xLabel: rounds ? 'round' : 'step', integerX: true, perVariant: g.perVariant, lines });
  }
  out.sort((a, b) => RF.groupRank(a) - RF.groupRank(b) || a.key.localeCompare(b.key));
  return { scalars, groups: out };
};

// groupRank orders charts: losses, then learning rate and gradient norm,
// then evaluation metrics, then the rest.
RF.groupRank = function (g) {
  const k = g.key.toLowerCase();
  if (/loss/.test(k)) return 0;
  if (/learning_rate|^lr$/.test(k)) return 1;
  if (/grad_norm/.test(k)) return 2;
  if (/epoch/.test(k)) return 9;
  return g.perVariant ? 3 : 4;
};

// fmtMetric formats a table cell: integers as integers (counts), other
// values with 4 decimals as the CLI prints them, very large or small ones
// in exponent form.
RF.fmtMetric = function (v) {
  if (typeof v !== 'number' || !isFinite(v)) return v === undefined ? '—' : String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-4) return v.toExponential(3);
  return v.toFixed(4);
};

// cutoffTable lays out names {base@k: value} of one prefix as the CLI's
// table: one row per cutoff k, one column per metric base. A base is a
// column when recorded at two or more cutoffs; a cutoff is a row when two
// columns have it (or the only column does). It returns {rows, cols, cell(base,
// k), used} or null when that leaves fewer than two cells.
RF.cutoffTable = function (entries) {
  const byBase = new Map();
  for (const [name, v] of entries) {
    const p = RF.parseMetric(name);
    if (p.k === null) continue;
    if (!byBase.has(p.base)) byBase.set(p.base, new Map());
    byBase.get(p.base).set(p.k, { name, v });
  }
  const cols = [...byBase.keys()].filter(b => byBase.get(b).size > 1).sort(RF.byColumnOrder);
  const kCount = new Map();
  for (const b of cols) for (const k of byBase.get(b).keys()) kCount.set(k, (kCount.get(k) || 0) + 1);
  const rows = [...kCount.keys()].filter(k => cols.length === 1 || kCount.get(k) > 1).sort((a, b) => a - b);
  const used = new Set();
  let cells = 0;
  for (const b of cols) for (const k of rows) if (byBase.get(b).has(k)) { used.add(byBase.get(b).get(k).name); cells++; }
  if (cells < 2) return null;
  return { rows, cols, cell: (b, k) => byBase.get(b).get(k), used };
};

RF.tableEl = function (attrs, head, rows) {
  return RF.el('table', attrs,
    RF.el('thead', {}, RF.el('tr', {}, head.map(h => RF.el('th', { text: h })))),
    RF.el('tbody', {}, rows));
};

// scalarTables renders the scalar metrics: a cutoff table per prefix (rows
// k), a variant table when several prefixes record the same metrics (rows
// variant, as selflearn's report), and the remaining metrics as name/value
// pairs.
RF.scalarTables = function (scalars) {
  const box = RF.el('div', { class: 'scalars', id: 'scalars' });
  const byPrefix = new Map();
  for (const [name, v] of Object.entries(scalars).sort((a, b) => a[0].localeCompare(b[0]))) {
    const p = RF.parseMetric(name).prefix;
    if (!byPrefix.has(p)) byPrefix.set(p, []);
    byPrefix.get(p).push([name, v]);
  }
  const rest = [];
  const variants = [...byPrefix.keys()].filter(p => p !== '' && byPrefix.get(p).some(([n]) => RF.parseMetric(n).k !== null));
  if (variants.length > 1) {
    const metricSet = new Set();
    for (const p of variants) for (const [n] of byPrefix.get(p)) metricSet.add(RF.parseMetric(n).last);
    const metrics = [...metricSet].sort((a, b) => RF.byColumnOrder(RF.parseMetric(a).base, RF.parseMetric(b).base) || RF.parseMetric(a).k - RF.parseMetric(b).k);
    const val = new Map();
    for (const p of variants) for (const [n, v] of byPrefix.get(p)) val.set(n, v);
    box.append(RF.tableEl({ class: 'metrics variants', id: 'variant-table' }, ['variant', ...metrics],
      variants.map(p => RF.el('tr', { dataset: { variant: p } }, RF.el('th', { text: p }),
        metrics.map(m => RF.el('td', { class: 'num', text: RF.fmtMetric(val.get(p + '/' + m)) }))))));
    for (const p of variants) byPrefix.delete(p);
  }
  for (const [prefix, entries] of byPrefix) {
    const t = RF.cutoffTable(entries);
    if (t) {
      const fig = RF.el('figure', { class: 'table' });
      if (prefix) fig.append(RF.el('figcaption', { text: prefix }));
      fig.append(RF.tableEl({ class: 'metrics cutoffs', dataset: { prefix } }, ['k', ...t.cols],
        t.rows.map(k => RF.el('tr', { dataset: { k } }, RF.el('th', { text: k }),
          t.cols.map(b => { const c = t.cell(b, k); return RF.el('td', { class: 'num', title: c ? c.name : null, text: c ? RF.fmtMetric(c.v) : '—' }); })))));
      box.append(fig);
    }
    for (const e of entries) if (!t || !t.used.has(e[0])) rest.push(e);
  }
  if (rest.length) {
    box.append(RF.tableEl({ class: 'metrics kv' + (rest.length > 8 ? ' cols' : ''), id: 'other-metrics' }, ['metric', 'value'],
      rest.map(([n, v]) => RF.el('tr', { dataset: { metric: n } }, RF.el('th', { text: n }), RF.el('td', { class: 'num', text: RF.fmtMetric(v) })))));
  }
  return box;
};

// roundTable renders per-variant series over rounds (selflearn) as its
// report: one row per (round, variant), one column per metric.
RF.roundTable = function (groups) {
  const vg = groups.filter(g => g.perVariant && g.xLabel === 'round');
  if (!vg.length) return null;
  const cols = vg.map(g => g.key);
  const rows = new Map(); // "round\u0000variant" → {round, variant, values}
  for (const g of vg) {
    for (const l of g.lines) {
      for (const [x, y] of l.points) {
        const key = String(x).padStart(6, '0') + '\u0000' + l.name;
        if (!rows.has(key)) rows.set(key, { round: x, variant: l.name, values: {} });
        rows.get(key).values[g.key] = y;
      }
    }
  }
  return RF.tableEl({ class: 'metrics rounds', id: 'round-table' }, ['round', 'variant', ...cols],
    [...rows.keys()].sort().map(k => rows.get(k)).map(r => RF.el('tr', { dataset: { round: r.round, variant: r.variant } },
      RF.el('td', { class: 'num', text: r.round }), RF.el('th', { text: r.variant }),
      cols.map(c => RF.el('td', { class: 'num', text: RF.fmtMetric(r.values[c]) })))));
};

// finalTable lists the last value of each series line outside the round
// table (the final training loss, the last validation accuracy).
RF.finalTable = function (groups) {
  const rows = [];
  for (const g of groups) {
    if (g.perVariant && g.xLabel === 'round') continue;
    for (const l of g.lines) {
      const last = l.points.reduce((a, p) => (p[0] >= a[0] ? p : a), l.points[0]);
      const name = g.lines.length === 1 ? l.metric : l.name.startsWith(g.key) ? l.name : g.key + ' · ' + l.name;
      rows.push(RF.el('tr', { dataset: { metric: l.metric } }, RF.el('th', { text: name }),
        RF.el('td', { class: 'num', text: RF.fmtMetric(last[1]) }), RF.el('td', { class: 'num muted', text: 'step ' + last[0] })));
    }
  }
  if (!rows.length) return null;
  return RF.tableEl({ class: 'metrics kv final' + (rows.length > 6 ? ' cols' : ''), id: 'final-table' }, ['series', 'last', 'at'], rows);
};

// seriesCharts draws one chart per series group.
RF.seriesCharts = function (groups) {
  const charts = RF.el('div', { class: 'charts', id: 'charts' });
  for (const g of groups) charts.append(RF.chartFigure(g.lines, g));
  return charts;
};

// mcqaRows reads eval mcqa's condition table from its scalar metrics
// "<condition>/<dataset>/accuracy" (with _ci_low/_ci_high, the Wilson 95%
// interval) and "<condition>/average/accuracy": {cols: datasets in MIRAGE's
// order then "average", rows: [[condition, cell, ...]]}, cells "41.2% [30.1,
// 52.9]" or "—"; null when there is no such metric.
RF.mcqaRows = function (scalars) {
  const order = ['mmlu', 'medqa', 'medmcqa', 'pubmedqa', 'bioasq'];
  const condOrder = ['cot', 'rag', 'rag2', 'rag2-nofilter'];
  const rank = (list, x) => (list.includes(x) ? list.indexOf(x) : list.length);
  const conds = [], sets = [];
  for (const name of Object.keys(scalars)) {
    const m = /^(.+)\/([^/]+)\/accuracy$/.exec(name);
    if (!m || m[1] === 'mcnemar') continue;
    if (!conds.includes(m[1])) conds.push(m[1]);
    if (m[2] !== 'average' && !sets.includes(m[2])) sets.push(m[2]);
  }
  if (!conds.length) return null;
  conds.sort((a, b) => rank(condOrder, a) - rank(condOrder, b) || a.localeCompare(b));
  sets.sort((a, b) => rank(order, a) - rank(order, b) || a.localeCompare(b));
  const pct = v => (100 * v).toFixed(1);
  const cell = (c, d) => {
    const p = c + '/' + d + '/accuracy', v = scalars[p];
    if (v === undefined) return '—';
    const lo = scalars[p + '_ci_low'], hi = scalars[p + '_ci_high'];
    return pct(v) + '%' + (lo === undefined ? '' : ' [' + pct(lo) + ', ' + pct(hi) + ']');
  };
  const cols = sets.concat(['average']);
  return { cols, rows: conds.map(c => [c].concat(cols.map(d => cell(c, d)))) };
};

// mcqaTable renders RF.mcqaRows as a table (null when there are none).
RF.mcqaTable = function (scalars) {
  const t = RF.mcqaRows(scalars);
  if (!t) return null;
  return RF.el('table', { class: 'metrics mcqa', id: 'mcqa-table' },
    RF.el('thead', {}, RF.el('tr', {}, ['condition'].concat(t.cols).map(h => RF.el('th', { text: h })))),
    RF.el('tbody', {}, t.rows.map(r => RF.el('tr', {}, r.map((v, i) => RF.el(i ? 'td' : 'th', { class: i ? 'num' : null, text: v }))))));
};
