// The audit trail: who requested, approved, denied; keys and MCP servers changed.
// Newest first, a page at a time ("Older" asks for the entries after the last shown).
import { get } from './api.js';
import { h, clear, ago, isAbort } from './dom.js';

export async function mount(main, ctx) {
  const action = h('select', { 'aria-label': 'action' },
    ['', 'approval.requested', 'approval.approved', 'approval.denied', 'approval.expired',
      'key.created', 'key.revoked', 'mcp_server.added', 'mcp_server.removed', 'mcp_server.restarted']
      .map((a) => h('option', { value: a }, a || 'every action')));
  const tbody = h('tbody');
  const older = h('button', { type: 'button', class: 'ghost small', hidden: true }, 'Older');
  main.append(
    h('div', { class: 'section-title' }, h('h1', {}, 'Audit trail'), h('span', { class: 'meta' }, "who did what, newest first (approvers see their tenant's approvals, admins everything)")),
    h('div', { class: 'toolbar' }, action),
    h('div', { class: 'table-wrap' }, h('table', { id: 'audit' },
      h('thead', {}, h('tr', {}, ['When', 'Action', 'Subject', 'Actor', 'Tenant', 'Details'].map((t) => h('th', {}, t)))),
      tbody)),
    h('p', {}, older));

  let last = 0; // id of the last entry shown: the next page's cursor
  let gen = 0; // bumped by each new listing: an older page's late answer is dropped
  const load = async (more) => {
    const mine = more ? gen : ++gen;
    if (!more) {
      clear(tbody);
      last = 0;
    }
    const q = new URLSearchParams({ limit: '100' });
    if (action.value) q.set('action', action.value);
    if (more && last) q.set('before', String(last));
    try {
      const { entries } = await get(`/v1/audit?${q}`, ctx.signal);
      if (mine !== gen) return; // the filter changed while this page was on its way
      ctx.ok();
      if (!more && entries.length === 0) tbody.append(h('tr', {}, h('td', { colspan: 6, class: 'empty muted' }, 'Nothing recorded.')));
      for (const e of entries) {
        tbody.append(h('tr', { dataset: { auditId: String(e.id), action: e.action } },
          h('td', { title: e.ts }, ago(e.ts)),
          h('td', { class: 'mono' }, e.action),
          h('td', { class: 'mono' }, e.action.startsWith('approval.') && e.detail?.call_id
            ? h('a', { href: `#/calls/${e.detail.call_id}` }, e.subject) : e.subject),
          h('td', {}, e.actor),
          h('td', { class: 'meta' }, e.tenant),
          h('td', { class: 'meta wrap' }, summary(e.detail))));
      }
      if (entries.length) last = entries[entries.length - 1].id;
      older.hidden = entries.length < 100;
    } catch (err) {
      if (!isAbort(err)) ctx.error(err);
    }
  };
  action.addEventListener('change', () => load(false));
  older.addEventListener('click', () => load(true));
  await load(false);
}

// summary is an entry's detail in one line: the facts a reader scans for.
function summary(d) {
  if (!d) return '';
  const parts = [];
  for (const k of ['tool', 'risk', 'kind', 'rule', 'reason', 'name', 'tenant', 'transport']) {
    if (d[k] !== undefined && d[k] !== '') parts.push(`${k}: ${d[k]}`);
  }
  if (Array.isArray(d.roles)) parts.push(`roles: ${d.roles.join(', ')}`);
  return parts.join(' · ');
}
