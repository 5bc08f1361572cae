// The console's shell: navigation by URL fragment (#/approvals, #/live, #/calls/tc_…),
// the API key dialog, the error banner and the connection indicator.
import { apiKey, setAPIKey, onConnection, get } from './api.js';
import { clear, isAbort, sleep } from './dom.js';
import * as approvals from './approvals.js';
import * as live from './live.js';
import * as calls from './calls.js';
import * as catalog from './catalog.js';
import * as mcp from './mcp.js';
import * as audit from './audit.js';

const pages = { approvals, live, calls, tools: catalog, mcp, audit };

const main = document.getElementById('main');
const banner = document.getElementById('banner');
const conn = document.getElementById('conn');
let current = null; // AbortController of the mounted page

function showError(err) {
  if (isAbort(err)) return;
  banner.textContent = err?.message || String(err);
  banner.hidden = false;
}

function clearError() {
  banner.hidden = true;
  banner.textContent = '';
}

function route() {
  const parts = (location.hash.replace(/^#\/?/, '') || 'approvals').split('/');
  const name = pages[parts[0]] ? parts[0] : 'approvals';
  current?.abort();
  current = new AbortController();
  clear(main);
  clearError();
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === name);
  document.body.dataset.page = name;
  const ctx = { signal: current.signal, args: parts.slice(1).map(decodeURIComponent), error: showError, ok: clearError };
  Promise.resolve(pages[name].mount(main, ctx)).catch(showError);
}

onConnection((ok, err) => {
  conn.className = 'conn ' + (ok ? 'ok' : 'bad');
  conn.textContent = ok ? 'connected' : (err?.status === 401 || err?.status === 403 ? 'API key needed' : 'unreachable');
});

// The pending count in the navigation, kept fresh whatever page is shown (the
// approvals page reports its own count at once).
const pendingBadge = document.getElementById('pending-count');
function showPending(n) {
  pendingBadge.hidden = n === 0;
  pendingBadge.textContent = String(n);
}
window.addEventListener('pending-count', (e) => showPending(e.detail));

let watching = false;
async function watchPending() {
  if (watching) return;
  watching = true;
  for (;;) {
    try {
      const { approvals: list } = await get('/v1/approvals?status=pending&limit=1000');
      showPending(list.length);
    } catch (err) {
      showPending(0);
      // Approvals are off on this daemon (404), or the key may not see them (401,
      // 403): asking again changes nothing until a key is set.
      if (err.status === 404 || err.status === 401 || err.status === 403) {
        watching = false;
        return;
      }
    }
    await sleep(3000);
  }
}

function settings() {
  const dlg = document.getElementById('settings');
  const input = document.getElementById('settings-key');
  document.getElementById('settings-open').addEventListener('click', () => {
    input.value = apiKey();
    dlg.showModal();
  });
  dlg.addEventListener('close', () => {
    if (dlg.returnValue === 'save') setAPIKey(input.value.trim());
    else if (dlg.returnValue === 'clear') setAPIKey('');
    else return;
    route(); // reload the page's data with the new key
    watchPending();
  });
}

settings();
window.addEventListener('hashchange', route);
route();
watchPending();
