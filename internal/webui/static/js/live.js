// Live tool calls: every call pending, running or waiting, in any session, and every
// finished call whose output still streams (a background job it started), with its
// output coming in. Calls that finish while shown stay, with their result and output.
import { get } from './api.js';
import { h, sleep, isAbort } from './dom.js';
import { callPanel } from './callpanel.js';

const KEEP_FINISHED = 20;

export async function mount(main, ctx) {
  const list = h('div', { id: 'live-calls' });
  const empty = h('p', { class: 'empty' }, 'Nothing is running.');
  main.append(
    h('div', { class: 'section-title' }, h('h1', {}, 'Live tool calls'),
      h('span', { class: 'meta' }, 'pending, running or waiting in any session, or streaming a background job\'s output; output follows as it arrives')),
    list);
  const shown = new Map(); // call id → panel
  while (!ctx.signal.aborted) {
    try {
      const { calls } = await get('/v1/tool-calls?live=true&limit=100', ctx.signal);
      ctx.ok();
      const listed = new Set(calls.map((c) => c.id));
      for (const [id, p] of shown) if (!listed.has(id)) p.unfeed(); // over: its panel asks
      for (const c of [...calls].reverse()) { // oldest first, each new one on top
        if (shown.has(c.id)) { shown.get(c.id).feed(c); continue; }
        const panel = callPanel(c, ctx.signal);
        panel.feed(c);
        shown.set(c.id, panel);
        list.prepend(panel);
      }
      // Keep a bounded number of finished panels.
      const finished = [...shown].filter(([, p]) => p.dataset.outputComplete === 'true');
      for (const [id, p] of finished.slice(0, Math.max(0, finished.length - KEEP_FINISHED))) {
        p.remove();
        shown.delete(id);
      }
      if (shown.size === 0) list.append(empty); else empty.remove();
      await sleep(1000, ctx.signal);
    } catch (err) {
      if (isAbort(err)) return;
      ctx.error(err);
      await sleep(3000, ctx.signal).catch(() => {});
    }
  }
}
