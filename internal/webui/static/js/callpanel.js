// callPanel shows one call: its arguments, its live output (stdout, stderr, info)
// as it arrives, and its result. Output comes from the progress stream (server-sent
// events read with fetch); each event carries the byte offset where it starts, so the
// panel shows every byte exactly once, also after a reconnect (Last-Event-ID) and after
// a page reload (it reads again from offset 0). When the call has finished, whatever
// the stream did not deliver is read by offset from GET /v1/tool-calls/{id}/progress.
import { get, sse } from './api.js';
import { h, clear, badge, time, duration, sleep, isAbort, renderResult, jsonBlock, visible } from './dom.js';

const terminal = (s) => s === 'succeeded' || s === 'failed';
// denied: the key is missing, revoked or lacks the role. Asking again every second
// changes nothing until a key is set, which mounts the page anew.
const denied = (err) => err.status === 401 || err.status === 403;
const enc = new TextEncoder();
// A call that waits (for a person, or its turn) prints nothing: its panel opens no
// stream meanwhile, and reads by offset what came while it waited once it runs.
const idle = (s) => s === 'pending' || s === 'waiting';

// A browser opens at most 6 connections to one host (HTTP/1.1), and an event stream
// holds one for as long as it lasts: a page following more calls than that would
// have none left for anything else (records, approvals), and the panels beyond the
// sixth would show nothing. So at most STREAM_SLOTS panels follow an event stream;
// the others read their output by offset once a second until a slot is free.
const STREAM_SLOTS = 3;
let streamsOpen = 0;

function b64bytes(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function callPanel(call, signal) {
  const id = call.id;
  const out = h('pre', { class: 'output', dataset: { callId: id } });
  const statusEl = h('span', { class: 'status' });
  const timing = h('span', { class: 'meta' });
  const note = h('div', { class: 'meta note' });
  const result = h('div', { class: 'call-result' });
  // Numeric progress, when the tool reports it: a bar (of the total, when known) and
  // its numbers. Hidden until the first value.
  const bar = h('progress', { class: 'call-progress' });
  const barText = h('span', { class: 'meta' });
  const meter = h('div', { class: 'call-meter', hidden: true }, bar, ' ', barText);
  const args = call.arguments && typeof call.arguments === 'object' && typeof call.arguments.command === 'string'
    ? h('pre', { class: 'json exact' }, visible('$ ' + call.arguments.command))
    : jsonBlock(call.arguments, 'exact');
  const card = h('article', { class: 'card call', dataset: { callId: id } },
    h('header', {},
      h('span', { class: 'title mono exact' }, visible(call.name)), statusEl, timing,
      h('span', { class: 'meta' }, `session ${call.session_id} · model id ${call.tool_call_id} · `, h('a', { href: `#/calls/${id}` }, id))),
    h('details', { open: true }, h('summary', {}, 'Arguments'), args),
    h('h3', {}, 'Output'), meter, out, note,
    h('h3', {}, 'Result'), result);

  const cursor = {}; // stream → bytes shown
  let known = ['stdout']; // streams the call has (read by offset when not following)
  const decoders = {};
  let last = { stream: null, span: null };

  function append(stream, bytes, offset) {
    const have = cursor[stream] || 0;
    if (offset + bytes.length <= have) return; // already shown
    if (offset < have) bytes = bytes.subarray(have - offset);
    cursor[stream] = Math.max(have, offset) + bytes.length;
    const dec = decoders[stream] || (decoders[stream] = new TextDecoder('utf-8'));
    const text = dec.decode(bytes, { stream: true });
    if (!text) return;
    const follow = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
    if (last.stream !== stream) {
      last = { stream, span: h('span', { class: stream || 'stdout', dataset: { stream } }) };
      out.append(last.span);
    }
    last.span.append(text);
    out.dataset.bytes = String(Object.values(cursor).reduce((a, b) => a + b, 0));
    if (follow) out.scrollTop = out.scrollHeight;
  }

  function showValue(v) {
    if (!v || typeof v.progress !== 'number') return;
    meter.hidden = false;
    if (v.total > 0) {
      bar.max = v.total;
      bar.value = Math.min(v.progress, v.total);
    } else {
      bar.removeAttribute('value'); // indeterminate: how far of an unknown total
    }
    barText.textContent = (v.total > 0 ? `${v.progress} / ${v.total}` : String(v.progress)) + (v.message ? ` · ${v.message}` : '');
    card.dataset.progress = v.total > 0 ? `${v.progress}/${v.total}` : String(v.progress);
  }

  let rec = call;
  function showRecord(c) {
    rec = c;
    clear(statusEl);
    statusEl.append(badge(c.status, `st-${c.status}`));
    if (c.output_open) statusEl.append(' ', badge('output streaming', 'st-running'));
    card.dataset.status = c.status;
    card.dataset.outputOpen = c.output_open ? 'true' : 'false';
    clear(timing);
    timing.append(time(c.created_at), c.duration_ms != null ? ` · ${duration(c.duration_ms)}` : '');
    if (terminal(c.status)) {
      clear(result);
      result.append(renderResult(c.result));
    } else if (!result.firstChild || result.dataset.status !== c.status) {
      clear(result);
      result.append(h('p', { class: 'muted' }, c.status === 'waiting' ? 'waiting for a person (approval or answer)…' : 'running…'));
    }
    result.dataset.status = c.status;
  }
  showRecord(call);

  // Follow the progress stream until it closes or the record says the call is over.
  const streamStop = new AbortController();
  signal.addEventListener('abort', () => streamStop.abort(), { once: true });
  let closed = false;
  const followStream = (async () => {
    let lastId = '';
    while (!closed && !streamStop.signal.aborted) {
      if (idle(rec.status) || streamsOpen >= STREAM_SLOTS) {
        if (!idle(rec.status)) {
          try {
            await readOnce();
          } catch (err) {
            if (isAbort(err)) return;
            if (err.status === 503) { note.textContent = 'Live output is turned off on this daemon (progress.enabled=false).'; return; }
            if (err.status === 404) return;
            if (denied(err)) { note.textContent = err.message; return; }
          }
        }
        if (!closed) await sleep(1000, streamStop.signal).catch(() => {});
        continue;
      }
      streamsOpen++;
      try {
        await sse(`/v1/tool-calls/${encodeURIComponent(id)}/progress/stream`, {
          lastEventId: lastId,
          signal: streamStop.signal,
          onEvent(ev) {
            if (ev.id) lastId = ev.id;
            const d = JSON.parse(ev.data);
            showValue(d.progress);
            if (ev.event === 'closed' || d.closed) { closed = true; return; }
            if (ev.event !== 'tool_progress') return;
            append(d.stream, d.data ? b64bytes(d.data) : enc.encode(d.text), d.offset);
          },
        });
      } catch (err) {
        if (isAbort(err)) return;
        if (err.status === 503) { note.textContent = 'Live output is turned off on this daemon (progress.enabled=false).'; return; }
        if (err.status === 404) return;
        if (denied(err)) { note.textContent = err.message; return; }
      } finally {
        streamsOpen--;
      }
      if (!closed) await sleep(1000, streamStop.signal).catch(() => {});
    }
  })();

  // readOnce reads, by offset, what each of the call's streams has beyond what is
  // shown (one read a stream); when every stream says it is finished the output is over.
  async function readOnce() {
    let over = true;
    for (const st of [...known]) {
      const r = await get(`/v1/tool-calls/${encodeURIComponent(id)}/progress?stream=${encodeURIComponent(st)}&offset=${cursor[st] || 0}&encoding=base64`, streamStop.signal);
      if (r.streams) known = [...new Set([...known, ...r.streams])];
      showValue(r.progress);
      const bytes = b64bytes(r.data);
      if (bytes.length) append(st, bytes, r.offset);
      if (!r.finished || bytes.length) over = false;
    }
    if (over) closed = true;
  }

  // The live page hands the panel each record it lists (card.feed), so that a page of
  // many calls does not ask for each one's record every second; once the list no
  // longer has the call (it ended), card.unfeed makes the panel ask again.
  let fed = false;
  card.feed = (c) => {
    fed = true;
    if (c.status !== rec.status || c.output_open !== rec.output_open || c.duration_ms !== rec.duration_ms) showRecord(c);
  };
  card.unfeed = () => { fed = false; };

  // Poll the record until the call is over; then read what the stream has not shown.
  (async () => {
    try {
      // A finished call whose output is open (its background job runs) is followed
      // until the output closes.
      while (!terminal(rec.status) || (rec.output_open && !closed)) {
        await sleep(1000, signal);
        if (fed) continue;
        showRecord(await get(`/v1/tool-calls/${encodeURIComponent(id)}`, signal).catch((err) => { if (isAbort(err) || denied(err)) throw err; return rec; }));
      }
      if (!closed) {
        streamStop.abort();
        await followStream;
        await drain();
      }
      await followStream;
      if (rec.output_open) showRecord({ ...rec, output_open: false }); // the output has ended
      card.dataset.outputComplete = 'true';
    } catch (err) {
      if (isAbort(err)) return;
      streamStop.abort();
      note.textContent = err.message;
    }
  })();

  async function drain() {
    const first = await get(`/v1/tool-calls/${encodeURIComponent(id)}/progress?stream=stdout&offset=${cursor.stdout || 0}&encoding=base64`, signal);
    const streams = new Set([...first.streams, ...Object.keys(cursor)]);
    for (const st of streams) {
      for (;;) {
        const r = await get(`/v1/tool-calls/${encodeURIComponent(id)}/progress?stream=${encodeURIComponent(st)}&offset=${cursor[st] || 0}&encoding=base64`, signal);
        showValue(r.progress);
        const bytes = b64bytes(r.data);
        if (bytes.length) append(st, bytes, r.offset);
        if (r.finished && !bytes.length) break;
        if (!bytes.length) await sleep(300, signal);
      }
    }
  }

  return card;
}
