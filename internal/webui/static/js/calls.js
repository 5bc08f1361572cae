// Recent calls across sessions, newest first, with their results and errors; and one
// call by id (#/calls/tc_…) with its output.
import { get } from './api.js';
import { h, clear, badge, jsonBlock, ago, duration, sleep, isAbort, renderResult } from './dom.js';
import { callPanel } from './callpanel.js';

export async function mount(main, ctx) {
  if (ctx.args[0]) return one(main, ctx, ctx.args[0]);
  const status = h('select', { 'aria-label': 'status' },
    ['', 'running', 'pending', 'waiting', 'succeeded', 'failed'].map((s) => h('option', { value: s }, s || 'any status')));
  const filter = h('input', { type: 'search', placeholder: 'filter by tool name', 'aria-label': 'filter by tool name' });
  const tbody = h('tbody');
  const table = h('table', { id: 'recent-calls' },
    h('thead', {}, h('tr', {}, ['When', 'Tool', 'Status', 'Duration', 'Session', 'Call'].map((t) => h('th', {}, t)))),
    tbody);
  main.append(
    h('div', { class: 'section-title' }, h('h1', {}, 'Recent calls'), h('span', { class: 'meta' }, 'every session, newest first; click a row for its result')),
    h('div', { class: 'toolbar' }, status, filter),
    h('div', { class: 'table-wrap' }, table));

  const open = new Set();
  let calls = [];
  const render = () => {
    clear(tbody);
    const q = filter.value.trim().toLowerCase();
    const shown = calls.filter((c) => !q || c.name.toLowerCase().includes(q));
    if (shown.length === 0) tbody.append(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No calls.')));
    for (const c of shown) {
      const row = h('tr', { class: 'clickable', dataset: { callId: c.id }, onclick: () => { open.has(c.id) ? open.delete(c.id) : open.add(c.id); render(); } },
        h('td', { title: c.created_at }, ago(c.created_at)),
        h('td', { class: 'mono' }, c.name),
        h('td', {}, badge(c.status, `st-${c.status}`), c.error_kind ? [' ', h('span', { class: 'meta' }, c.error_kind)] : ''),
        h('td', {}, duration(c.duration_ms)),
        h('td', { class: 'mono meta' }, c.session_id),
        h('td', { class: 'mono' }, h('a', { href: `#/calls/${c.id}`, onclick: (e) => e.stopPropagation() }, c.id)));
      tbody.append(row);
      if (open.has(c.id)) {
        tbody.append(h('tr', { class: 'detail' }, h('td', { colspan: 6 },
          h('div', { class: 'grid2' },
            h('div', {}, h('h3', {}, 'Arguments'), jsonBlock(c.arguments)),
            h('div', {}, h('h3', {}, 'Result'), renderResult(c.result))))));
      }
    }
  };
  filter.addEventListener('input', render);
  let wake = null;
  status.addEventListener('change', () => wake?.abort());
  while (!ctx.signal.aborted) {
    try {
      const q = status.value ? `&status=${status.value}` : '';
      ({ calls } = await get(`/v1/tool-calls?limit=100${q}`, ctx.signal));
      ctx.ok();
      render();
    } catch (err) {
      if (isAbort(err)) return;
      ctx.error(err);
    }
    wake = new AbortController();
    await sleep(4000, AbortSignal.any([ctx.signal, wake.signal])).catch(() => {});
  }
}

async function one(main, ctx, id) {
  main.append(h('p', {}, h('a', { href: '#/calls' }, '← recent calls')));
  try {
    const c = await get(`/v1/tool-calls/${encodeURIComponent(id)}`, ctx.signal);
    main.append(callPanel(c, ctx.signal));
  } catch (err) {
    if (isAbort(err)) return;
    main.append(h('p', { class: 'empty' }, err.status === 404 ? `No call ${id}.` : err.message));
  }
}
