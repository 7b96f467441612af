// Inline SVG charts: line charts of metric series (x = step or round) and
// horizontal bars of stage timings. No library; plain SVG elements.
'use strict';

RF.svgNS = 'http://www.w3.org/2000/svg';

RF.svg = function (tag, attrs, ...children) {
  const e = document.createElementNS(RF.svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === 'text') e.textContent = String(v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c) e.append(c);
  return e;
};

// niceTicks returns about n round tick values covering [lo, hi]; with
// integer set the step is a whole number (steps, rounds).
RF.niceTicks = function (lo, hi, n, integer) {
  if (!(hi > lo)) {
    const pad = integer ? 1 : lo === 0 ? 1 : Math.abs(lo) * 0.1;
    lo -= pad; hi += pad;
  }
  const raw = (hi - lo) / Math.max(1, n);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / mag;
  let step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  if (integer) step = Math.max(1, Math.round(step));
  const start = Math.floor(lo / step) * step;
  const ticks = [];
  // Up to the first tick at or above hi, so the axis holds every point
  // (stopping near hi left the highest points above the plot).
  for (let i = 0; ticks.length < 50; i++) {
    const v = Number((start + i * step).toPrecision(12));
    ticks.push(v);
    if (v >= hi) break;
  }
  return ticks;
};

// logScaled says whether a chart's y axis is logarithmic: a loss-like
// metric (loss, perplexity) whose positive values span 10× or more, where
// an initial spike would flatten the rest on a linear axis.
RF.logScaled = function (title, ys) {
  if (!/loss|perplexity|ppl/i.test(title || '') || ys.length === 0 || ys.some(y => !(y > 0))) return false;
  return Math.max(...ys) / Math.min(...ys) >= 10;
};

RF.seriesColors = ['#1f6feb', '#d1242f', '#1a7f37', '#9a6700', '#8250df', '#0e7490', '#bf3989', '#57606a', '#fb8500', '#2da44e'];

// lineChart draws series [{name, points: [[x, y], ...], metric, dashed,
// color}] as one SVG line chart with axes, ticks and point tooltips. The
// SVG scales to its container's width (viewBox W×H). opts: title, xLabel,
// integerX (whole-number x ticks), width, height, logY (default: logScaled).
// The axes end at round ticks at or beyond the extreme points.
RF.lineChart = function (series, opts) {
  opts = opts || {};
  const W = opts.width || 420, H = opts.height || 220;
  const m = { l: 56, r: 12, t: 24, b: 34 };
  const all = series.flatMap(s => s.points);
  const svg = RF.svg('svg', {
    class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', preserveAspectRatio: 'xMidYMid meet',
    'aria-label': opts.title || 'chart', 'data-metric': opts.title || '', 'data-x': opts.xLabel || 'step',
  });
  svg.append(RF.svg('text', { x: 8, y: 15, class: 'chart-title', text: opts.title || '' }));
  if (all.length === 0) {
    svg.append(RF.svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'muted', text: 'no data' }));
    return svg;
  }
  const xs = all.map(p => p[0]), ys = all.map(p => p[1]);
  const log = opts.logY ?? RF.logScaled(opts.title, ys);
  const ty = log ? Math.log10 : y => y; // y as plotted
  const xt = RF.niceTicks(Math.min(...xs), Math.max(...xs), 6, !!opts.integerX);
  const yt = RF.niceTicks(Math.min(...ys.map(ty)), Math.max(...ys.map(ty)), 5, log); // log: powers of ten
  const x0 = xt[0], x1 = xt[xt.length - 1], y0 = yt[0], y1 = yt[yt.length - 1];
  const sx = x => m.l + (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0)) * (W - m.l - m.r);
  const sy = y => H - m.b - (y1 === y0 ? 0.5 : (ty(y) - y0) / (y1 - y0)) * (H - m.t - m.b);
  // The plot area, for checks that every point lies inside it.
  Object.assign(svg.dataset, { scale: log ? 'log' : 'linear', left: m.l, right: W - m.r, top: m.t, bottom: H - m.b });
  const axes = RF.svg('g', { class: 'axes' });
  for (const t of yt) {
    const v = log ? Math.pow(10, t) : t;
    axes.append(RF.svg('line', { x1: m.l, x2: W - m.r, y1: sy(v), y2: sy(v), class: 'grid' }));
    axes.append(RF.svg('text', { x: m.l - 6, y: sy(v) + 4, 'text-anchor': 'end', text: RF.fmtNum(v) }));
  }
  for (const t of xt) {
    axes.append(RF.svg('line', { x1: sx(t), x2: sx(t), y1: H - m.b, y2: H - m.b + 4, class: 'tick' }));
    axes.append(RF.svg('text', { x: sx(t), y: H - m.b + 16, 'text-anchor': 'middle', class: 'xtick', text: RF.fmtNum(t) }));
  }
  axes.append(RF.svg('line', { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, class: 'axis' }));
  axes.append(RF.svg('line', { x1: m.l, x2: m.l, y1: m.t, y2: H - m.b, class: 'axis' }));
  axes.append(RF.svg('text', { x: W - m.r, y: H - 4, 'text-anchor': 'end', class: 'muted', text: opts.xLabel || 'step' }));
  svg.append(axes);
  const xName = opts.xLabel || 'step';
  series.forEach((s, i) => {
    const color = s.color || RF.seriesColors[i % RF.seriesColors.length];
    const pts = s.points.slice().sort((a, b) => a[0] - b[0]);
    const d = pts.length === 0 ? '' : pts.map((p, j) => (j ? 'L' : 'M') + sx(p[0]).toFixed(1) + ' ' + sy(p[1]).toFixed(1)).join(' ');
    if (d) {
      svg.append(RF.svg('path', {
        d, fill: 'none', stroke: color, 'stroke-width': 1.8, class: 'series', 'stroke-dasharray': s.dashed ? '5 3' : null,
        'data-series': s.name, 'data-name': s.metric || s.name,
      }));
    }
    if (pts.length <= 60) {
      for (const p of pts) {
        svg.append(RF.svg('circle', { cx: sx(p[0]), cy: sy(p[1]), r: 2.6, fill: color },
          RF.svg('title', { text: `${s.name} ${xName} ${p[0]}: ${RF.fmtNum(p[1])}` })));
      }
    }
  });
  return svg;
};

// chartFigure wraps lineChart in a figure with an HTML legend (which wraps,
// however many lines there are) when it has more than one line.
RF.chartFigure = function (lines, opts) {
  lines = lines.map((l, i) => Object.assign({ color: l.color || RF.seriesColors[i % RF.seriesColors.length] }, l));
  const fig = RF.el('figure', { class: 'chart', dataset: { group: opts.title || '' } }, RF.lineChart(lines, opts));
  if (lines.length > 1) {
    fig.append(RF.el('figcaption', { class: 'legend' }, lines.map(l =>
      RF.el('span', { class: 'key' + (l.dashed ? ' dashed' : '') }, RF.el('i', { style: null, dataset: { color: l.color } }), l.name))));
    for (const i of fig.querySelectorAll('figcaption i')) i.style.borderColor = i.dataset.color;
  }
  return fig;
};

// barChart draws [{name, value}] as horizontal bars labelled with value+unit.
RF.barChart = function (bars, opts) {
  opts = opts || {};
  const W = opts.width || 520, row = 22, m = { l: 140, r: 80, t: 8 };
  const H = m.t * 2 + row * bars.length;
  const max = Math.max(...bars.map(b => b.value), 0) || 1;
  const svg = RF.svg('svg', { class: 'chart bars', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.title || 'bars' });
  bars.forEach((b, i) => {
    const y = m.t + i * row;
    const w = Math.max(1, (b.value / max) * (W - m.l - m.r));
    svg.append(RF.svg('text', { x: m.l - 6, y: y + 15, 'text-anchor': 'end', text: b.name }));
    svg.append(RF.svg('rect', { x: m.l, y: y + 4, width: w, height: row - 8, class: 'bar', 'data-stage': b.name }));
    svg.append(RF.svg('text', { x: m.l + w + 6, y: y + 15, text: RF.fmtNum(b.value) + (opts.unit || '') }));
  });
  return svg;
};
