// Label review: a filtered queue of RAG² filter labels; the current label's
// question, snippet (reference evidence in <mark>) and scores; accept (a),
// flip (f), undo (u), next (j), previous (k). Every change is a review stored
// by the server with provenance "human".
'use strict';

RF.labelsPage = async function (root) {
  const params = new URLSearchParams(location.search);
  const f = {
    run: RF.el('input', { id: 'f-run', name: 'run', placeholder: 'run id', value: params.get('run') || '', size: 22 }),
    cls: RF.el('select', { id: 'f-class', name: 'class' }, ['', '[HELPFUL]', '[NOT_HELPFUL]'].map(c =>
      RF.el('option', { value: c, text: c || 'any class', selected: c === (params.get('class') || '') }))),
    method: RF.el('select', { id: 'f-method', name: 'method' }, ['', 'perplexity', 'evidence', 'import'].map(m =>
      RF.el('option', { value: m, text: m || 'any method', selected: m === (params.get('method') || '') }))),
    dis: RF.el('input', { id: 'f-disagreement', name: 'disagreement', type: 'checkbox', value: '1', checked: params.get('disagreement') === '1' }),
    low: RF.el('input', { id: 'f-low', name: 'low_confidence', type: 'number', min: 0, step: 'any', placeholder: '|Δppl| <', value: params.get('low_confidence') || '', size: 6 }),
    rev: RF.el('select', { id: 'f-reviewed', name: 'reviewed' }, [['', 'reviewed or not'], ['false', 'unreviewed'], ['true', 'reviewed']].map(([v, t]) =>
      RF.el('option', { value: v, text: t, selected: v === (params.get('reviewed') || '') }))),
  };
  const reviewer = RF.el('input', { id: 'reviewer', placeholder: 'reviewer', size: 10, value: localStorage.getItem(RF.reviewerKey) || '' });
  reviewer.addEventListener('change', () => localStorage.setItem(RF.reviewerKey, reviewer.value.trim()));
  const form = RF.el('form', { class: 'filters', method: 'get', action: '/labels' },
    f.run, f.cls, f.method, RF.el('label', {}, f.dis, ' disagreement'), RF.el('label', {}, 'low confidence ', f.low), f.rev,
    RF.el('button', { type: 'submit', text: 'Filter' }), RF.el('span', { class: 'sep' }), 'reviewer ', reviewer);
  const counts = RF.el('div', { id: 'counts', class: 'muted' });
  const queue = RF.el('ol', { id: 'queue', class: 'queue' });
  const card = RF.el('section', { id: 'card', class: 'card' });
  RF.append(root, [RF.el('h1', { text: 'Label review' }), form, counts,
    RF.el('p', { class: 'muted small', text: 'Keys: a accept · f flip · u undo · j next · k previous' }),
    RF.el('div', { class: 'review' }, queue, card)]);

  const q = new URLSearchParams();
  for (const [k, v] of new URLSearchParams(new FormData(form))) if (v) q.set(k, v);
  const res = await RF.api('/api/labels?' + q);
  const items = res.labels || [];
  const undoStack = []; // label ids changed in this page, newest last
  let cur = 0;
  let busy = false;

  if (res.counts) {
    counts.textContent = `${res.total} shown · run totals: [HELPFUL] ${res.counts['[HELPFUL]']}, [NOT_HELPFUL] ${res.counts['[NOT_HELPFUL]']}`;
  } else {
    counts.textContent = `${res.total} shown`;
  }

  const queueItem = (l, i) => RF.el('li', {
    dataset: { id: l.label_id }, class: (i === cur ? 'current ' : '') + (l.reviews ? 'reviewed' : ''),
    onclick: () => select(i),
  }, RF.labelBadge(l.effective), ' ', RF.el('span', { class: 'q', text: l.question }));

  const drawQueue = () => {
    RF.clear(queue);
    items.forEach((l, i) => queue.append(queueItem(l, i)));
    const c = queue.children[cur];
    if (c && c.scrollIntoView) c.scrollIntoView({ block: 'nearest' });
  };

  const snippet = l => RF.el('blockquote', { class: 'snippet', id: 'snippet' },
    (l.highlight || [{ text: l.snippet }]).map(s => s.mark ? RF.el('mark', { text: s.text }) : document.createTextNode(s.text)));

  const num = v => (typeof v === 'number' && v !== 0 ? RF.fmtNum(v) : '—');

  const drawCard = () => {
    RF.clear(card);
    if (!items.length) { card.append(RF.el('p', { class: 'muted', id: 'empty', text: 'No labels match the filter.' })); return; }
    const l = items[cur];
    const dppl = l.ppl_with && l.ppl_without ? l.ppl_with - l.ppl_without : null;
    RF.append(card, [
      RF.el('header', {},
        RF.el('h2', {}, 'Label #', RF.el('span', { id: 'label-id', text: l.label_id })),
        RF.el('span', { class: 'pos muted', text: `${cur + 1} / ${items.length}` })),
      RF.el('div', { class: 'badges' },
        'effective ', RF.el('span', { id: 'effective' }, RF.labelBadge(l.effective)),
        ' machine ', RF.labelBadge(l.label),
        ' provenance ', RF.badge(l.provenance, 'prov-' + l.provenance),
        ' method ', RF.badge(l.method, 'method')),
      RF.el('h3', { text: 'Question' }), RF.el('p', { class: 'question', id: 'question', text: l.question }),
      RF.el('h3', { text: 'Snippet' }), snippet(l),
      l.evidence ? RF.el('details', { class: 'evidence' }, RF.el('summary', { text: 'Reference evidence' }), RF.el('p', { text: l.evidence })) : null,
      RF.infoTable([
        ['score', num(l.score)], ['ppl without', num(l.ppl_without)], ['ppl with', num(l.ppl_with)],
        ['Δppl (with − without)', dppl === null ? '—' : RF.fmtNum(dppl)],
        l.scorer ? ['scorer', l.scorer] : null, ['chunk', l.chunk_id || '—'], ['example', l.id], ['run', l.run_id],
        ['reviews', String(l.reviews) + (l.reviewer ? ' (last by ' + l.reviewer + ')' : '')],
      ]),
      RF.el('div', { class: 'actions' },
        RF.el('button', { id: 'btn-accept', type: 'button', onclick: () => act('confirm'), title: 'a' }, 'Accept ', RF.el('kbd', { text: 'a' })),
        RF.el('button', { id: 'btn-flip', type: 'button', onclick: () => act('flip'), title: 'f' }, 'Flip ', RF.el('kbd', { text: 'f' })),
        RF.el('button', { id: 'btn-undo', type: 'button', onclick: () => undo(), title: 'u' }, 'Undo ', RF.el('kbd', { text: 'u' })),
        RF.el('button', { id: 'btn-prev', type: 'button', onclick: () => select(cur - 1), title: 'k' }, 'Prev ', RF.el('kbd', { text: 'k' })),
        RF.el('button', { id: 'btn-next', type: 'button', onclick: () => select(cur + 1), title: 'j' }, 'Next ', RF.el('kbd', { text: 'j' }))),
    ]);
  };

  const select = i => {
    if (!items.length) return;
    cur = Math.max(0, Math.min(items.length - 1, i));
    drawQueue();
    drawCard();
  };

  const replace = rec => {
    const i = items.findIndex(x => x.label_id === rec.label_id);
    if (i >= 0) items[i] = rec;
    return i;
  };

  const needToken = () => {
    if (RF.token()) return false;
    RF.askToken('Enter the bearer token to save reviews.');
    return true;
  };

  const act = async action => {
    if (busy || !items.length || needToken()) return;
    busy = true;
    const l = items[cur];
    try {
      const rec = await RF.api(`/api/labels/${l.label_id}/review`, { method: 'POST', body: { action, reviewer: reviewer.value.trim() } });
      replace(rec);
      undoStack.push(rec.label_id);
      RF.status(`Label #${rec.label_id}: ${action === 'flip' ? 'flipped to' : 'kept'} ${rec.effective}.`, 'ok');
      select(cur + 1 < items.length ? cur + 1 : cur);
    } catch (e) {
      RF.status(`Label #${l.label_id}: ${e.message}`, 'error');
    } finally {
      busy = false;
    }
  };

  const undo = async () => {
    if (busy || !items.length || needToken()) return;
    const id = undoStack.length ? undoStack[undoStack.length - 1] : items[cur].label_id;
    busy = true;
    try {
      const rec = await RF.api(`/api/labels/${id}/undo`, { method: 'POST' });
      if (undoStack.length) undoStack.pop();
      const i = replace(rec);
      RF.status(`Label #${id}: review undone, now ${rec.effective} (${rec.provenance}).`, 'ok');
      select(i >= 0 ? i : cur);
    } catch (e) {
      RF.status(`Label #${id}: ${e.message}`, 'error');
    } finally {
      busy = false;
    }
  };

  document.addEventListener('keydown', ev => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || RF.inEditable(ev)) return;
    const k = ev.key;
    if (k === 'a') act('confirm');
    else if (k === 'f') act('flip');
    else if (k === 'u') undo();
    else if (k === 'j') select(cur + 1);
    else if (k === 'k') select(cur - 1);
    else return;
    ev.preventDefault();
  });

  drawQueue();
  drawCard();
};
