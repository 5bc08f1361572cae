// Upstream MCP servers and their health.
import { get, post } from './api.js';
import { h, clear, badge, time, ago, sleep, isAbort } from './dom.js';

export async function mount(main, ctx) {
  const tbody = h('tbody');
  main.append(
    h('div', { class: 'section-title' }, h('h1', {}, 'MCP servers'), h('span', { class: 'meta' }, 'upstream servers whose tools this daemon offers; refreshed every few seconds')),
    h('div', { class: 'table-wrap' }, h('table', { id: 'mcp-servers' },
      h('thead', {}, h('tr', {}, ['Server', 'Transport', 'State', 'Tools', 'Since', 'Restarts', 'Last error / notes', ''].map((t) => h('th', {}, t)))),
      tbody)));
  while (!ctx.signal.aborted) {
    try {
      const { servers } = await get('/v1/mcp/servers', ctx.signal);
      ctx.ok();
      clear(tbody);
      if (servers.length === 0) {
        tbody.append(h('tr', {}, h('td', { colspan: 8, class: 'muted' },
          'No MCP servers: add them under mcp_servers in the config, or with POST /v1/mcp/servers.')));
      }
      for (const s of servers) {
        const restart = h('button', { type: 'button', class: 'ghost small', onclick: async () => {
          restart.disabled = true;
          try { await post(`/v1/mcp/servers/${encodeURIComponent(s.name)}/restart`, {}, ctx.signal); } catch (err) { ctx.error(err); }
        } }, 'Restart');
        tbody.append(h('tr', { dataset: { server: s.name, state: s.state } },
          h('td', { class: 'mono' }, s.name, s.persisted ? h('span', { class: 'meta' }, ' (added at run time)') : '',
            s.trust_annotations === false ? h('div', { class: 'meta', title: 'trust_annotations: false — readOnlyHint does not skip approval' }, 'annotations not trusted') : ''),
          h('td', {}, s.transport),
          h('td', {}, badge(s.state, `st-${s.state}`)),
          h('td', {}, String(s.tools)),
          h('td', {}, time(s.down_since || s.since), h('div', { class: 'meta' }, ago(s.down_since || s.since))),
          h('td', {}, String(s.restarts)),
          h('td', { class: 'wrap' }, s.last_error ? h('div', { class: 'mono' }, s.last_error) : '', (s.notes || []).map((n) => h('div', { class: 'meta' }, n))),
          h('td', {}, s.state === 'disabled' || s.state === 'skipped' ? '' : restart)));
      }
    } catch (err) {
      if (isAbort(err)) return;
      ctx.error(err);
    }
    await sleep(5000, ctx.signal).catch(() => {});
  }
}
