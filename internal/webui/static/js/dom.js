// Small DOM helpers. Text always goes in as text nodes: nothing from the API is
// parsed as HTML.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
}

export function pretty(v) {
  if (v === undefined) return '';
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
  }
  return JSON.stringify(v, null, 2);
}

export function jsonBlock(v) {
  return h('pre', { class: 'json' }, pretty(v));
}

export function badge(text, cls) {
  return h('span', { class: `badge ${cls || ''}` }, text);
}

export function time(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return h('time', { datetime: iso, title: d.toISOString() }, d.toLocaleString());
}

export function ago(iso) {
  if (!iso) return '';
  const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 60) return `${Math.floor(s)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '';
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

// renderResult shows a tool result: its text and other content blocks, the error kind,
// structured output and details.
export function renderResult(res) {
  if (!res) return h('p', { class: 'muted' }, 'no result yet');
  const parts = [];
  parts.push(h('div', { class: 'meta' },
    res.is_error ? badge(`error: ${res.error_kind || 'failed'}`, 'st-failed') : badge('ok', 'st-succeeded'),
    res.truncated ? ' truncated for the model (the record keeps it whole)' : ''));
  for (const c of res.content || []) {
    if (c.type === 'text') parts.push(h('pre', { class: 'result-text' }, c.text));
    else if (c.type === 'image' && /^image\/(png|jpeg|gif|webp)$/.test(c.mime_type || '')) {
      parts.push(h('img', { src: `data:${c.mime_type};base64,${c.data}`, alt: 'image result' }));
    } else parts.push(h('pre', { class: 'result-text' }, `[${c.type}${c.mime_type ? ' ' + c.mime_type : ''}${c.uri ? ' ' + c.uri : ''}]${c.text ? '\n' + c.text : ''}`));
  }
  if (res.structured !== undefined && res.structured !== null) {
    parts.push(h('details', {}, h('summary', {}, 'structured'), jsonBlock(res.structured)));
  }
  if (res.details !== undefined && res.details !== null) {
    parts.push(h('details', {}, h('summary', {}, 'details'), jsonBlock(res.details)));
  }
  return h('div', { class: 'result' }, parts);
}

// sleep resolves after ms, or at once when signal aborts (then rejects with AbortError).
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new DOMException('aborted', 'AbortError'));
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => { clearTimeout(t); reject(new DOMException('aborted', 'AbortError')); }, { once: true });
  });
}

export const isAbort = (err) => err?.name === 'AbortError';
