// Playground: posts {"question": ...} (plus optional extra fields such as
// k, mode, filter) to the pipeline endpoint and renders its answer stage by
// stage (see RF.renderPipeline for the shapes it reads).
'use strict';

RF.stageOrder = ['question', 'rationale', 'query', 'retrieved', 'snippets', 'hits', 'candidates', 'reranked', 'filter', 'filtered', 'decisions', 'kept', 'answer', 'citations'];
RF.timingKeys = /^(timings?(_ms)?|durations?(_ms)?|latency(_ms)?|elapsed(_ms)?)$/i;

// renderValue renders any JSON value: strings as text, arrays of objects as
// tables, objects as key/value lists, nested to depth 3 (then raw JSON).
// shown, when given, is {ids: Map(hit id → stage), stage}: a hit whose text
// an earlier stage printed refers to it instead of printing it again.
RF.renderValue = function (v, depth, shown) {
  depth = depth || 0;
  if (v === null || v === undefined) return RF.el('em', { class: 'muted', text: 'null' });
  if (typeof v === 'string') return RF.el('div', { class: 'text', text: v });
  if (typeof v === 'number') return RF.el('code', { text: RF.fmtNum(v) });
  if (typeof v === 'boolean') return RF.badge(String(v), v ? 'helpful' : 'nothelpful');
  if (depth >= 3) return RF.el('pre', { text: JSON.stringify(v, null, 2) });
  if (Array.isArray(v)) {
    if (v.length === 0) return RF.el('em', { class: 'muted', text: 'empty' });
    if (RF.isHitList(v)) return RF.hitsTable(v, shown);
    if (v.every(x => x !== null && typeof x === 'object' && !Array.isArray(x))) {
      const cols = [...new Set(v.flatMap(x => Object.keys(x)))];
      return RF.el('table', { class: 'stage-table' },
        RF.el('thead', {}, RF.el('tr', {}, RF.el('th', { text: '#' }), cols.map(c => RF.el('th', { text: c })))),
        RF.el('tbody', {}, v.map((x, i) => RF.el('tr', {}, RF.el('td', { text: i + 1 }),
          cols.map(c => RF.el('td', { class: 'c-' + c.replace(/[^a-z0-9_-]/gi, '') }, RF.renderCell(c, x[c], depth + 1, shown)))))));
    }
    return RF.el('ol', {}, v.map(x => RF.el('li', {}, RF.renderValue(x, depth + 1, shown))));
  }
  return RF.el('dl', { class: 'obj' }, Object.entries(v).map(([k, x]) => [RF.el('dt', { text: k }), RF.el('dd', {}, RF.renderValue(x, depth + 1, shown))]));
};

// isHitList tells retrieved snippets (infer/serve Hit: id, corpus, doc_id,
// index, score, text, start, end, meta; FilteredHit adds label, p_helpful)
// from other arrays of objects.
RF.isHitList = function (v) {
  return v.every(x => x !== null && typeof x === 'object' && typeof x.text === 'string' && ('score' in x || 'doc_id' in x));
};

// hitSource names where a hit comes from: the document's title or code from
// the corpus metadata (AP: title, document_code), else its id.
RF.hitSource = function (h) {
  const m = h.meta || {};
  const title = m.title || m.document_title || m.source || '';
  const code = m.document_code || m.code || '';
  const doc = h.doc_id || (h.id || '').replace(/#\d+$/, '');
  // The chunk id ("<doc id>#<index>") already names the document.
  const chunk = h.id && h.id !== doc ? h.id : '';
  return { title: title || code || doc, detail: [title && code ? code : '', chunk || (doc !== (title || code) ? doc : '')].filter(Boolean).join(' · ') };
};

// hitPage is the page number from the metadata (AP: page_number), or ''.
RF.hitPage = function (h) {
  const m = h.meta || {};
  const p = m.page_number ?? m.page ?? m.page_no ?? m.pageNumber;
  return p === undefined || p === null ? '' : String(p);
};

// hitsTable shows each hit's rank, score, source document and page, the
// filter's decision when present, and its text wrapped to the column; with
// shown (see renderValue) a text already printed by an earlier stage is
// named, not repeated, so each passage is read once.
RF.hitsTable = function (hits, shown) {
  const textCell = h => {
    const seen = shown && h.id ? shown.ids.get(h.id) : undefined;
    if (seen !== undefined) return RF.el('td', { class: 'text' }, RF.el('div', { class: 'muted small seen', text: 'text under ' + seen }));
    if (shown && h.id) shown.ids.set(h.id, shown.stage);
    return RF.el('td', { class: 'text' }, RF.el('div', { class: 'text', text: h.text }));
  };
  const filtered = hits.some(h => 'label' in h || 'p_helpful' in h);
  const head = ['#', 'score', 'source', 'page'].concat(filtered ? ['filter'] : [], ['text']);
  return RF.el('table', { class: 'hits stage-table' + (filtered ? ' filtered' : '') },
    RF.el('thead', {}, RF.el('tr', {}, head.map(h => RF.el('th', { text: h })))),
    RF.el('tbody', {}, hits.map((h, i) => {
      const src = RF.hitSource(h);
      return RF.el('tr', { dataset: { id: h.id || '' } },
        RF.el('td', { class: 'num', text: i + 1 }),
        RF.el('td', { class: 'num score', text: typeof h.score === 'number' ? RF.fmtNum(h.score) : '—' }),
        RF.el('td', { class: 'source' }, RF.el('div', { text: src.title }),
          RF.el('div', { class: 'muted small', text: [h.corpus, src.detail].filter(Boolean).join(' · ') })),
        RF.el('td', { class: 'num page', text: RF.hitPage(h) || '—' }),
        filtered ? RF.el('td', { class: 'nowrap' }, h.label ? RF.labelBadge(h.label) : null,
          typeof h.p_helpful === 'number' ? RF.el('div', { class: 'small muted', text: 'p ' + RF.fmtNum(h.p_helpful) }) : null) : null,
        textCell(h));
    })));
};

RF.renderCell = function (key, v, depth, shown) {
  if (typeof v === 'string' && (v === '[HELPFUL]' || v === '[NOT_HELPFUL]')) return RF.labelBadge(v);
  if (v === undefined) return '';
  return RF.renderValue(v, depth, shown);
};

// timingBars reads {stage: ms} or [{name|stage, ms|duration_ms|time_ms}].
RF.timingBars = function (t) {
  const bars = [];
  const ms = x => (typeof x === 'number' ? x : x && typeof x === 'object' ? (x.ms ?? x.duration_ms ?? x.time_ms ?? x.elapsed_ms) : undefined);
  if (Array.isArray(t)) {
    for (const x of t) if (typeof ms(x) === 'number') bars.push({ name: String(x.name ?? x.stage ?? '?'), value: ms(x) });
  } else if (t && typeof t === 'object') {
    for (const [k, x] of Object.entries(t)) if (typeof ms(x) === 'number') bars.push({ name: k, value: ms(x) });
  }
  return bars;
};

RF.stageSection = function (name, value, report, shownIDs) {
  report = report || {};
  return RF.el('section', { class: 'stage' + (report.skipped ? ' skipped' : ''), dataset: { stage: name } },
    RF.el('h3', {}, name,
      typeof report.ms === 'number' ? RF.el('span', { class: 'ms muted', text: ' ' + RF.fmtNum(report.ms) + ' ms' }) : null,
      report.skipped ? RF.el('span', { class: 'muted', text: ' skipped' + (report.note ? ': ' + report.note : '') }) : null),
    RF.renderValue(value, 0, shownIDs ? { ids: shownIDs, stage: name } : undefined));
};

// stageAliases maps a response field to the stage report that produced it
// (infer/serve: "retrieved" comes from stage "retrieve", and so on).
RF.stageAliases = { retrieved: 'retrieve', reranked: 'rerank', filtered: 'filter', snippets: 'retrieve', hits: 'retrieve', decisions: 'filter' };

// renderPipeline draws a pipeline answer. Two shapes are read:
//   - infer/serve's PipelineResponse: one field per stage output (question,
//     rationale, query, retrieved, reranked, filtered, kept, answer,
//     citations) and "stages": [{name, ms, skipped, note}] reports;
//   - stages that carry their own output: "stages": [{name, output, ms}].
// Timings also come from a "timings"/"timings_ms" object {stage: ms}.
RF.renderPipeline = function (res, clientMs) {
  const out = RF.el('div', { id: 'stages' });
  const reports = {}; // stage name → {ms, skipped, note}
  const shownIDs = new Map(); // hit id → the stage that printed its text
  let total;
  if (res && typeof res === 'object' && !Array.isArray(res)) {
    const keys = Object.keys(res);
    const withOutput = Array.isArray(res.stages) && res.stages.some(s => s && typeof s === 'object' && 'output' in s);
    if (Array.isArray(res.stages)) {
      for (const s of res.stages) {
        if (!s || typeof s !== 'object') continue;
        const name = String(s.name ?? s.stage ?? 'stage');
        reports[name] = { ms: s.ms ?? s.duration_ms ?? s.time_ms, skipped: !!s.skipped, note: s.note };
        if (withOutput) out.append(RF.stageSection(name, s.output, reports[name], shownIDs));
      }
    }
    for (const k of keys.filter(k => RF.timingKeys.test(k))) {
      for (const b of RF.timingBars(res[k])) reports[b.name] = Object.assign(reports[b.name] || {}, { ms: b.value });
    }
    if (typeof res.took_ms === 'number') total = res.took_ms;
    const skip = k => k === 'stages' || k === 'took_ms' || RF.timingKeys.test(k);
    const ordered = RF.stageOrder.filter(k => keys.includes(k)).concat(keys.filter(k => !RF.stageOrder.includes(k) && !skip(k)));
    for (const k of ordered) {
      if (skip(k)) continue;
      const rep = reports[k] || (RF.stageAliases[k] ? reports[RF.stageAliases[k]] : undefined);
      out.append(RF.stageSection(k, res[k], rep, shownIDs));
    }
  } else {
    out.append(RF.stageSection('response', res));
  }
  const tsec = RF.el('section', { class: 'stage', dataset: { stage: 'timings' } }, RF.el('h3', { text: 'Timings' }));
  const bars = Object.entries(reports).filter(([, r]) => typeof r.ms === 'number').map(([name, r]) => ({ name, value: r.ms }));
  if (bars.length) tsec.append(RF.barChart(bars, { unit: ' ms', title: 'stage timings' }));
  const notes = Object.entries(reports).filter(([, r]) => r.skipped || r.note);
  if (notes.length) {
    tsec.append(RF.el('ul', { class: 'notes small' }, notes.map(([name, r]) =>
      RF.el('li', {}, RF.el('b', { text: name }), (r.skipped ? ' skipped' : '') + (r.note ? ': ' + r.note : '')))));
  }
  tsec.append(RF.el('p', { class: 'muted', id: 'client-ms' },
    total !== undefined ? 'server ' + RF.fmtNum(total) + ' ms · ' : '', 'round trip ' + Math.round(clientMs) + ' ms (browser)'));
  out.append(tsec);
  return out;
};

RF.playgroundPage = async function (root) {
  const question = RF.el('textarea', { id: 'question', rows: 3, cols: 80, placeholder: 'Ask a medical question…' });
  const extra = RF.el('textarea', { id: 'extra', rows: 3, cols: 80, placeholder: '{"k": 5, "mode": "hybrid", "filter": false}' });
  const run = RF.el('button', { id: 'ask', type: 'submit', text: 'Run pipeline' });
  const result = RF.el('div', { id: 'result' });
  const form = RF.el('form', { id: 'ask-form', class: 'playground' },
    RF.el('label', { for: 'question', text: 'Question' }), question,
    RF.el('details', {}, RF.el('summary', { text: 'Extra request fields (JSON object)' }), extra),
    RF.el('div', {}, run, ' ', RF.el('span', { class: 'muted small', text: 'POST ' + RF.config.pipeline_url })));
  RF.append(root, [RF.el('h1', { text: 'Playground' }), form, result]);
  question.addEventListener('keydown', ev => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); form.requestSubmit(); }
  });
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    const q = question.value.trim();
    if (!q) { RF.status('Type a question first.', 'warn'); return; }
    let body = { question: q };
    if (extra.value.trim()) {
      try {
        const x = JSON.parse(extra.value);
        if (!x || typeof x !== 'object' || Array.isArray(x)) throw new Error('not a JSON object');
        body = Object.assign({}, x, body);
      } catch (e) {
        RF.status('Extra fields: ' + e.message, 'error');
        return;
      }
    }
    run.disabled = true;
    RF.clear(result).append(RF.el('p', { class: 'muted', text: 'Running…' }));
    RF.status('');
    const t0 = performance.now();
    try {
      const headers = { 'Content-Type': 'application/json', Accept: 'application/json' };
      if (RF.token()) headers.Authorization = 'Bearer ' + RF.token();
      const res = await fetch(RF.config.pipeline_url, { method: 'POST', headers, body: JSON.stringify(body) });
      const text = await res.text();
      let data;
      try { data = JSON.parse(text); } catch (e) { data = text; }
      RF.clear(result);
      if (!res.ok) {
        if (res.status === 401) RF.askToken('The pipeline needs the bearer token.');
        result.append(RF.el('p', { class: 'err', id: 'pipeline-error', text: `${res.status} ${res.statusText}: ${(data && data.error) || text}` }));
        return;
      }
      result.append(RF.renderPipeline(data, performance.now() - t0));
    } catch (e) {
      RF.clear(result).append(RF.el('p', { class: 'err', id: 'pipeline-error', text: e.message }));
    } finally {
      run.disabled = false;
    }
  });
};
