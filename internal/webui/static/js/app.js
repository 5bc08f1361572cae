// The console's shell: navigation by URL fragment (#/approvals, #/live, #/calls/tc_…),
// the API key dialog, the error banner and the connection indicator.
import { apiKey, setAPIKey, onConnection, get } from './api.js';
import { clear, isAbort } from './dom.js';
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

// decodeArg is a fragment part decoded, or null when it is not valid
// percent-encoding (a link cut short, #/calls/tc_%E0%A4): decodeURIComponent throws.
function decodeArg(p) {
  try {
    return decodeURIComponent(p);
  } catch {
    return null;
  }
}

function route() {
  const parts = (location.hash.replace(/^#\/?/, '') || 'approvals').split('/');
  // Only the pages' own names: "#/constructor" or "#/__proto__" names no page.
  const name = Object.hasOwn(pages, parts[0]) ? parts[0] : 'approvals';
  // A bad fragment is ignored: the page shows without its arguments.
  let args = parts.slice(1).map(decodeArg);
  if (args.includes(null)) args = [];
  current?.abort();
  current = new AbortController();
  clear(main);
  clearError();
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === name);
  document.body.dataset.page = name;
  const ctx = { signal: current.signal, args, error: showError, ok: clearError };
  Promise.resolve(pages[name].mount(main, ctx)).catch(showError);
}

onConnection((ok, err) => {
  conn.className = 'conn ' + (ok ? 'ok' : 'bad');
  conn.textContent = ok ? 'connected' : (err?.status === 401 || err?.status === 403 ? 'API key needed' : 'unreachable');
});

// The pending count in the navigation, kept fresh whatever page is shown (the
// approvals page reports its own count at once).
const pendingBadge = document.getElementById('pending-count');
function showPending(n, more = false) {
  pendingBadge.hidden = n === 0;
  pendingBadge.textContent = more ? `${n}+` : String(n);
}
// A page that knows the count says it; one that lists only part of what waits (the
// approvals page shows the newest 200) asks for a poll of the badge's own instead.
let wakeWatch = null;
window.addEventListener('pending-count', (e) => {
  if (typeof e.detail === 'number') showPending(e.detail);
  else if (wakeWatch) wakeWatch();
  else watchPending();
});

let watching = false;
async function watchPending() {
  if (watching) return;
  watching = true;
  for (;;) {
    try {
      const { approvals: list, next_before: more } = await get('/v1/approvals?status=pending&limit=1000');
      showPending(list.length, Boolean(more));
    } catch (err) {
      showPending(0);
      // Approvals are off on this daemon (404), or the key may not see them (401,
      // 403): asking again changes nothing until a key is set.
      if (err.status === 404 || err.status === 401 || err.status === 403) {
        watching = false;
        return;
      }
    }
    await new Promise((r) => { wakeWatch = r; setTimeout(r, 3000); });
    wakeWatch = null;
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
