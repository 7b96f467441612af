// Router of the single-page workbench: picks the view from the path, loads
// /api/config first, and marks <main> data-ready="1" when the view is drawn
// (browser tests wait for it).
'use strict';

(async function () {
  const root = document.getElementById('app');
  const form = document.getElementById('token-form');
  const input = document.getElementById('token-input');
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    RF.setToken(input.value.trim());
    input.value = '';
    form.classList.remove('ask');
    RF.status(RF.token() ? 'Token saved for this tab.' : 'Token cleared.', 'ok');
    if (root.dataset.needsToken === '1') location.reload();
  });
  RF.showTokenState();

  const path = location.pathname.replace(/\/+$/, '') || '/';
  let view, nav;
  if (path === '/') view = r => RF.homePage(r);
  else if (path === '/runs') { view = r => RF.runsPage(r); nav = 'runs'; }
  else if (path === '/runs/compare') { view = r => RF.comparePage(r); nav = 'compare'; }
  else if (path.startsWith('/runs/')) { view = r => RF.runPage(r, decodeURIComponent(path.slice(6))); nav = 'runs'; }
  else if (path === '/labels') { view = r => RF.labelsPage(r); nav = 'labels'; }
  else if (path === '/playground') { view = r => RF.playgroundPage(r); nav = 'playground'; }
  for (const a of document.querySelectorAll('#nav a')) if (a.dataset.nav === nav) a.classList.add('active');

  RF.clear(root);
  try {
    RF.config = Object.assign(RF.config, await RF.api('/api/config'));
    if (!view) throw new Error('no page at ' + location.pathname);
    await view(root);
  } catch (e) {
    if (e.status === 401) root.dataset.needsToken = '1';
    root.append(RF.el('p', { class: 'err', id: 'page-error', text: e.message }));
  }
  root.dataset.ready = '1';
})();
