// Shared helpers of the ragforge workbench: DOM building (text is always set
// through text nodes, never parsed as HTML), the JSON API client with the
// bearer token kept in sessionStorage, and small formatters.
'use strict';

const RF = {};

RF.tokenKey = 'ragforge.token';
RF.reviewerKey = 'ragforge.reviewer';
RF.config = { pipeline_url: '/v1/pipeline', public_read: false, writes_enabled: false };

RF.token = function () {
  return sessionStorage.getItem(RF.tokenKey) || '';
};

RF.setToken = function (t) {
  if (t) sessionStorage.setItem(RF.tokenKey, t);
  else sessionStorage.removeItem(RF.tokenKey);
  RF.showTokenState();
};

RF.showTokenState = function () {
  const st = document.getElementById('token-state');
  if (st) st.textContent = RF.token() ? 'set' : 'not set';
};

// askToken draws attention to the token field (the page asks for the token
// once; it is then kept for the tab's lifetime).
RF.askToken = function (why) {
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  if (form) form.classList.add('ask');
  if (input) input.focus();
  RF.status(why || 'Enter the bearer token set at server start-up.', 'warn');
};

// el builds an element: attrs keys "class", "text", "dataset" (object),
// "on<event>" (listener) or any attribute; children are nodes or values
// (turned into text nodes); null, undefined and false children are skipped.
RF.el = function (tag, attrs, ...children) {
  const e = document.createElement(tag);
  RF.setAttrs(e, attrs);
  RF.append(e, children);
  return e;
};

RF.setAttrs = function (e, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') e.setAttribute('class', v);
    else if (k === 'text') e.textContent = String(v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
};

RF.append = function (e, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
};

RF.clear = function (e) {
  while (e.firstChild) e.removeChild(e.firstChild);
  return e;
};

RF.status = function (msg, kind) {
  const s = document.getElementById('status');
  if (!s) return;
  RF.clear(s);
  s.className = kind || '';
  if (msg) s.append(document.createTextNode(msg));
};

// api calls the JSON API. It sends the token when one is set, and throws an
// Error carrying .status and the server's {"error"} text on a non-2xx answer.
RF.api = async function (path, opts) {
  opts = opts || {};
  const headers = { Accept: 'application/json' };
  const tok = RF.token();
  if (tok) headers.Authorization = 'Bearer ' + tok;
  let body;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  const res = await fetch(path, { method: opts.method || 'GET', headers, body });
  let data = null;
  const text = await res.text();
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { error: text }; }
  if (!res.ok) {
    const err = new Error((data && data.error) || res.status + ' ' + res.statusText);
    err.status = res.status;
    if (res.status === 401) RF.askToken('The server needs the bearer token: ' + err.message + '.');
    throw err;
  }
  return data;
};

RF.fmtNum = function (v) {
  if (typeof v !== 'number' || !isFinite(v)) return String(v);
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) return v.toExponential(3).replace(/\.?0+e/, 'e');
  return String(Number(v.toPrecision(5)));
};

RF.fmtTime = function (s) {
  if (!s) return '';
  const d = new Date(s);
  if (isNaN(d)) return s;
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
};

RF.fmtDuration = function (start, end) {
  if (!start || !end) return '';
  const ms = new Date(end) - new Date(start);
  if (!isFinite(ms)) return '';
  if (ms < 1000) return ms + ' ms';
  const s = ms / 1000;
  if (s < 120) return s.toFixed(1) + ' s';
  if (s < 7200) return (s / 60).toFixed(1) + ' min';
  return (s / 3600).toFixed(1) + ' h';
};

RF.badge = function (text, cls) {
  return RF.el('span', { class: 'badge ' + (cls || ''), text });
};

RF.labelBadge = function (lab) {
  return RF.badge(lab, lab === '[HELPFUL]' ? 'helpful' : lab === '[NOT_HELPFUL]' ? 'nothelpful' : '');
};

// flatten turns a JSON value into [path, scalar] pairs ("a.b[0]").
RF.flatten = function (v, prefix, out) {
  out = out || [];
  prefix = prefix || '';
  if (v !== null && typeof v === 'object') {
    const entries = Array.isArray(v) ? v.map((x, i) => ['[' + i + ']', x]) : Object.entries(v).map(([k, x]) => [(prefix ? '.' : '') + k, x]);
    if (entries.length === 0) out.push([prefix, Array.isArray(v) ? '[]' : '{}']);
    for (const [k, x] of entries) RF.flatten(x, prefix + k, out);
  } else {
    out.push([prefix, v === null ? 'null' : typeof v === 'string' ? v : JSON.stringify(v)]);
  }
  return out;
};

RF.inEditable = function (ev) {
  const t = ev.target;
  return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
};
