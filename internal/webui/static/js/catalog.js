// Tools and skills: every registered tool with its flags and JSON Schema, and the
// loaded skills (with the folders that failed to load).
import { get } from './api.js';
import { h, badge, jsonBlock, isAbort } from './dom.js';

export async function mount(main, ctx) {
  const filter = h('input', { type: 'search', placeholder: 'filter tools', 'aria-label': 'filter tools' });
  const tools = h('div', { id: 'tools' });
  const skills = h('div', { id: 'skills' });
  const toolCount = h('span', { class: 'meta' });
  const skillCount = h('span', { class: 'meta' });
  main.append(
    h('div', { class: 'section-title' }, h('h1', {}, 'Tools'), toolCount),
    h('div', { class: 'toolbar' }, filter),
    tools,
    h('div', { class: 'section-title' }, h('h1', {}, 'Skills'), skillCount),
    skills);

  const [t, s] = await Promise.allSettled([get('/v1/tools', ctx.signal), get('/v1/skills', ctx.signal)]);
  if (ctx.signal.aborted) return;
  if (t.status === 'fulfilled') {
    const list = t.value.tools;
    toolCount.textContent = `${list.length} registered`;
    for (const tool of list) tools.append(toolEntry(tool));
    filter.addEventListener('input', () => {
      const q = filter.value.trim().toLowerCase();
      for (const el of tools.children) el.hidden = q !== '' && !el.dataset.search.includes(q);
    });
  } else if (!isAbort(t.reason)) ctx.error(t.reason);
  if (s.status === 'fulfilled') {
    const { skills: list, problems } = s.value;
    skillCount.textContent = `${list.length} loaded`;
    if (list.length === 0 && problems.length === 0) skills.append(h('p', { class: 'empty' }, 'No skills (skills.dirs in the config).'));
    for (const sk of list) skills.append(skillEntry(sk, ctx));
    for (const p of problems) {
      skills.append(h('div', { class: 'card' }, badge('not loaded', 'st-failed'), ' ', h('code', {}, p.dir), h('p', {}, p.error)));
    }
  } else if (!isAbort(s.reason)) ctx.error(s.reason);
}

function toolEntry(t) {
  const flags = ['read_only', 'concurrency_safe', 'external', 'hosted'].filter((f) => t[f]);
  const firstLine = (t.description || '').split('\n')[0];
  return h('details', { class: 'card tool', dataset: { tool: t.name, search: `${t.name} ${t.description || ''}`.toLowerCase() } },
    h('summary', {},
      h('span', { class: 'title mono' }, t.name), ' ',
      badge(`risk: ${t.risk || 'unknown'}`, `risk-${t.risk}`), ' ',
      flags.map((f) => [badge(f.replace('_', ' '), 'st-disabled'), ' ']),
      t.source ? h('span', { class: 'meta' }, t.source, ' · ') : '',
      h('span', { class: 'meta' }, firstLine)),
    h('dl', { class: 'kv' },
      h('dt', {}, 'mode'), h('dd', {}, t.mode || ''),
      t.timeout_ms ? [h('dt', {}, 'timeout'), h('dd', {}, `${t.timeout_ms} ms`)] : ''),
    h('h3', {}, 'Description'), h('pre', {}, t.description || ''),
    h('h3', {}, 'Parameters (JSON Schema)'), jsonBlock(t.parameters));
}

function skillEntry(s, ctx) {
  const body = h('pre', { class: 'json' }, 'loading…');
  const el = h('details', { class: 'card skill', dataset: { skill: s.name } },
    h('summary', {}, h('span', { class: 'title' }, s.name), s.version ? h('span', { class: 'meta' }, ` v${s.version}`) : '', ' ',
      h('span', { class: 'meta' }, s.description)),
    h('dl', { class: 'kv' },
      h('dt', {}, 'allowed tools'), h('dd', { class: 'mono' }, s.allowed_tools.join(', ') || '—'),
      h('dt', {}, 'files'), h('dd', { class: 'mono' }, s.files.join(', ') || '—')),
    h('h3', {}, 'SKILL.md'), body);
  let loaded = false;
  el.addEventListener('toggle', async () => {
    if (!el.open || loaded) return;
    loaded = true;
    try {
      body.textContent = (await get(`/v1/skills/${encodeURIComponent(s.name)}`, ctx.signal)).body || '';
    } catch (err) {
      if (!isAbort(err)) body.textContent = err.message;
    }
  });
  return el;
}
