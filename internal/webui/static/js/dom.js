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

// jsonBlock shows a value as indented JSON, with what would show nothing marked (see
// visible): JSON escapes controls but not bidi overrides or zero-width characters.
export function jsonBlock(v, cls) {
  return h('pre', { class: cls ? `json ${cls}` : 'json' }, visible(pretty(v)));
}

// Characters that show nothing or change how the text after them shows: controls (an
// escape sequence, a carriage return), format characters (bidi overrides and isolates,
// zero-width ones), line and paragraph separators, spaces other than U+0020, and the
// default-ignorable rest (Hangul fillers, variation selectors, tag characters).
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Zs}\p{Default_Ignorable_Code_Point}]/gu;

function codeOf(c) {
  const hex = c.codePointAt(0).toString(16).toUpperCase();
  return hex.length > 4 ? `\\u{${hex}}` : `\\u${hex.padStart(4, '0')}`;
}

// visible gives s as nodes to append, each character INVISIBLE matches (but newline,
// tab and space) shown as a marked \uXXXX: a command that reads as `ls` must not run
// `ls; rm -rf ~` behind a right-to-left override or a run of zero-width characters.
export function visible(s) {
  s = String(s);
  const out = [];
  let last = 0;
  for (const m of s.matchAll(INVISIBLE)) {
    const c = m[0];
    if (c === '\n' || c === '\t' || c === ' ') continue;
    if (m.index > last) out.push(s.slice(last, m.index));
    out.push(h('span', { class: 'invisible', title: `invisible or control character U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}` }, codeOf(c)));
    last = m.index + c.length;
  }
  if (last < s.length) out.push(s.slice(last));
  return out;
}

// visibleText is visible as a plain string (for a title attribute).
export function visibleText(s) {
  return String(s).replace(INVISIBLE, (c) => (c === '\n' || c === '\t' || c === ' ' ? c : codeOf(c)));
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
