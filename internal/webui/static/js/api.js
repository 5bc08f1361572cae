// The REST API of the daemon that served this page (same origin). An optional API key
// from local storage goes out as Authorization: Bearer on every request.

const KEY_STORAGE = 'toolserverd.apiKey';

// The API lives beside /ui/ (also behind a proxy that adds a path prefix).
const base = location.pathname.replace(/\/ui\/.*$/, '');

export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || '';
}

export function setAPIKey(key) {
  if (key) localStorage.setItem(KEY_STORAGE, key);
  else localStorage.removeItem(KEY_STORAGE);
}

function headers(extra) {
  const h = { Accept: 'application/json', ...extra };
  const key = apiKey();
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

// Listeners learn whether the daemon answers (for the header's status dot).
const listeners = new Set();
export function onConnection(fn) { listeners.add(fn); }
function report(ok, err) { for (const fn of listeners) fn(ok, err); }

async function request(method, path, body, signal) {
  let resp;
  try {
    resp = await fetch(base + path, {
      method,
      headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: 'no-store',
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    // The browser's own words ("Failed to fetch") say nothing to an approver.
    const down = unreachable(err);
    report(false, down);
    throw down;
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!resp.ok) {
    const code = data?.error?.code || String(resp.status);
    let msg = data?.error?.message || `${method} ${path}: HTTP ${resp.status}`;
    if (resp.status === 401 || resp.status === 403) msg += ' — set an API key (button at the top right)';
    const err = new APIError(resp.status, code, msg);
    report(resp.status < 500 && resp.status !== 401 && resp.status !== 403, err);
    throw err;
  }
  report(true);
  return data;
}

// unreachable is the error of a request that got no answer at all: the daemon is
// down or restarting, or the network is away. The pages keep asking and clear it
// once the daemon answers.
function unreachable(err) {
  const e = new APIError(0, 'unreachable', `The daemon at ${location.origin} does not answer (${err.message}); trying again…`);
  e.cause = err;
  return e;
}

export const get = (path, signal) => request('GET', path, undefined, signal);
export const post = (path, body, signal) => request('POST', path, body ?? {}, signal);

// sse reads a server-sent event stream with fetch (EventSource cannot send the
// Authorization header). onEvent gets {event, id, data}; it resolves when the stream
// ends and rejects on errors (an aborted signal rejects with AbortError).
export async function sse(path, { lastEventId, signal, onEvent }) {
  const h = headers({ Accept: 'text/event-stream' });
  if (lastEventId) h['Last-Event-ID'] = lastEventId;
  let resp;
  try {
    resp = await fetch(base + path, { headers: h, signal, cache: 'no-store' });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw unreachable(err);
  }
  if (!resp.ok) {
    let data = null;
    try { data = await resp.json(); } catch { /* not JSON */ }
    throw new APIError(resp.status, data?.error?.code || String(resp.status),
      data?.error?.message || `GET ${path}: HTTP ${resp.status}`);
  }
  report(true);
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const ev = { event: 'message', id: '', data: '' };
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue; // comment (keep-alive)
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'event') ev.event = val;
        else if (field === 'id') ev.id = val;
        else if (field === 'data') data.push(val);
      }
      if (data.length === 0) continue;
      ev.data = data.join('\n');
      onEvent(ev);
    }
  }
}
