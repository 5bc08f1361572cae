// Pending approvals: what waits for a person, with the arguments, risk, reason and
// suggested rules; approve, approve for the session, approve with one rule, or deny
// with a reason. The list refreshes as requests arrive (long poll while empty).
import { get, post } from './api.js';
import { h, clear, badge, jsonBlock, ago, time, sleep, isAbort, renderResult, visible, visibleText } from './dom.js';

// The approver's name, typed once on this page and kept in this browser: sent as the
// decision's actor, the model reads it in a denial ("denied by Ada: …") and the audit
// trail records it with the key ("Ada via key ops (key_…)"). Without one nothing is
// sent: the model reads "denied by the approver", the record names the key. The key's
// own name is not sent: a shared key's name says nothing of who decided, and the model
// is never told which key did.
const NAME_STORAGE = 'toolserverd.approverName';
const NAME_MAX = 200; // bytes the daemon takes in an actor
const approverName = () => (localStorage.getItem(NAME_STORAGE) || '').trim();
const PAGE = 200; // requests listed at most
const SETTLE_MS = 1000; // how long the buttons take no clicks after the list moved

export async function mount(main, ctx) {
  const list = h('div', { id: 'approvals' });
  const decided = h('div', { id: 'decided' });
  const decidedSection = h('section', { hidden: true },
    h('div', { class: 'section-title' }, h('h2', {}, 'Decided here'),
      h('span', { class: 'meta' }, 'what became of the requests decided on this page')),
    decided);
  const name = h('input', {
    type: 'text', name: 'approver', maxlength: String(NAME_MAX), autocomplete: 'name', spellcheck: 'false',
    placeholder: 'unnamed: a denial reads "denied by the approver"', 'aria-label': 'your name',
    value: approverName(),
    oninput: () => {
      const v = name.value.trim();
      if (v) localStorage.setItem(NAME_STORAGE, v);
      else localStorage.removeItem(NAME_STORAGE);
    },
  });
  main.append(
    h('div', { class: 'section-title' }, h('h1', {}, 'Pending approvals'),
      h('span', { class: 'meta' }, 'updates as requests arrive')),
    h('p', { class: 'approver meta' }, h('label', {}, 'Deciding as ', name),
      ' — recorded with your decisions (with the API key); the model reads it in a denial. Kept in this browser.'),
    list, decidedSection);

  const cards = new Map(); // approval id → card
  // A request that arrives goes on top and pushes the others down; one that goes pulls
  // them up: the button under the approver's pointer becomes another request's, which
  // the model can time. For a moment after the list moves its buttons take no clicks
  // (CSS: #approvals.settling), so a click aimed at one request never decides another.
  let settle;
  const moved = () => {
    list.classList.add('settling');
    clearTimeout(settle);
    settle = setTimeout(() => list.classList.remove('settling'), SETTLE_MS);
  };
  // Each request's session, asked once per session, for the folder its command runs in.
  const sessions = new Map();
  const sessionOf = (id) => {
    if (!sessions.has(id)) sessions.set(id, get(`/v1/sessions/${encodeURIComponent(id)}`, ctx.signal).catch(() => null));
    return sessions.get(id);
  };
  // More wait than the page lists (it shows the newest 200): the badge's own count,
  // which reads up to 1000, is then the one to show, not the cards here.
  let partial = false;
  const more = h('p', { class: 'more meta', hidden: true },
    `More requests wait than this page lists (the ${PAGE} newest are shown): decide these to see the rest.`);
  const countHere = () => window.dispatchEvent(new CustomEvent('pending-count', { detail: partial ? 'poll' : cards.size }));
  const onDecided = (a, card, result, conflict) => {
    cards.delete(a.id);
    countHere();
    moved();
    card.remove();
    decidedSection.hidden = false;
    decided.prepend(decidedCard(result, ctx.signal, conflict));
    showEmpty();
  };
  const showEmpty = () => {
    list.querySelector('.empty')?.remove();
    if (cards.size === 0) list.append(h('p', { class: 'empty' }, 'No calls are waiting for approval.'));
  };

  for (let first = true; !ctx.signal.aborted; first = false) {
    try {
      // While nothing is pending the daemon holds the request until something is.
      const wait = cards.size === 0 && !first ? '&wait=25s' : '';
      const { approvals, next_before: nextBefore } = await get(`/v1/approvals?status=pending&limit=${PAGE}${wait}`, ctx.signal);
      ctx.ok();
      partial = Boolean(nextBefore);
      const ids = new Set(approvals.map((a) => a.id));
      for (const [id, card] of cards) {
        if (!ids.has(id)) { moved(); card.remove(); cards.delete(id); } // decided elsewhere or expired
      }
      // Newest first: insert unseen ones in order above the ones already shown.
      let anchor = list.firstChild;
      for (const a of approvals) {
        let card = cards.get(a.id);
        if (!card) {
          card = approvalCard(a, ctx, onDecided, sessionOf);
          cards.set(a.id, card);
          moved();
          list.insertBefore(card, anchor);
        }
        anchor = card.nextSibling;
      }
      showEmpty();
      more.hidden = !partial;
      list.append(more); // after the cards
      countHere();
      if (cards.size > 0) await sleep(2000, ctx.signal);
    } catch (err) {
      if (isAbort(err)) return;
      if (err.status === 401 || err.status === 403) {
        // No key, a revoked one, or one without the approver role: what is listed can
        // no longer be decided from here, and asking again changes nothing until a key
        // is set (which mounts the page anew).
        cards.clear();
        clear(list);
        list.append(h('p', { class: 'empty' }, `${err.message}. Pending requests show here again once a key that may decide them is set.`));
        window.dispatchEvent(new CustomEvent('pending-count', { detail: 0 }));
        ctx.error(err);
        return;
      }
      if (err.status === 404) {
        clear(list);
        list.append(h('p', { class: 'empty' }, 'Approvals are not enabled on this daemon (permissions are off).'));
        return;
      }
      ctx.error(err);
      await sleep(3000, ctx.signal).catch(() => {});
    }
  }
}

function approvalCard(a, ctx, onDecided, sessionOf) {
  const rules = a.suggestions || [];
  const reason = h('input', { type: 'text', name: 'reason', placeholder: 'reason for a denial (the model sees it)', 'aria-label': 'denial reason' });
  const buttons = [];
  const status = h('span', { class: 'meta' });
  // Why the daemon refused a decision, beside the buttons where the approver looks.
  const refused = h('span', { class: 'decision-error', role: 'alert', hidden: true });
  const card = h('article', { class: 'card approval', dataset: { approvalId: a.id, callId: a.call_id } });
  // What `rm -rf build` deletes depends on where it runs: the session's folder.
  const where = h('p', { class: 'workdir meta', hidden: true });
  sessionOf(a.session_id).then((s) => {
    if (!s?.workdir) return;
    where.append('runs in ', h('code', { class: 'exact' }, visible(s.workdir)));
    where.hidden = false;
  });

  async function decide(decision, extra) {
    for (const b of buttons) b.disabled = true;
    status.textContent = 'sending…';
    refused.hidden = true;
    try {
      const by = approverName();
      const res = await post(`/v1/approvals/${encodeURIComponent(a.id)}/decision`, { decision, ...(by ? { actor: by } : {}), ...extra }, ctx.signal);
      onDecided(a, card, res);
    } catch (err) {
      if (isAbort(err)) return;
      if (err.status === 409) { // someone else decided first, or it expired
        const now = await get(`/v1/approvals/${encodeURIComponent(a.id)}`, ctx.signal).catch(() => null);
        if (now && now.status !== 'pending') { onDecided(a, card, now, notApplied(DECISION_WORDS[decision], now)); return; }
      }
      status.textContent = '';
      const not = `Not ${decision === 'deny' ? 'denied' : 'approved'}`;
      // The page asks again for the lists, never for a decision: "trying again…", as
      // the banner says, would have the approver wait for a decision nobody sends.
      refused.textContent = err.code === 'unreachable'
        ? `${not}: the daemon at ${location.origin} does not answer (${err.cause?.message || 'no answer'}); the request is still pending: decide again once it answers.`
        : `${not}: ${err.message}`; // a text too long: the daemon says its size
      refused.hidden = false;
      for (const b of buttons) b.disabled = false;
    }
  }
  const button = (label, cls, fn, title) => {
    const b = h('button', { type: 'button', class: cls, title, onclick: fn }, label);
    buttons.push(b);
    return b;
  };

  card.append(
    h('header', {},
      h('span', { class: 'title mono exact' }, visible(a.tool)),
      badge(`risk: ${a.risk}`, `risk-${a.risk}`),
      h('span', { class: 'meta' }, 'requested ', time(a.created_at), ` (${ago(a.created_at)})`,
        a.expires_at ? [' · expires ', time(a.expires_at)] : '')),
    h('p', { class: 'reason exact' }, a.reason ? visible(a.reason) : h('span', { class: 'muted' }, 'no reason given')),
    where,
    h('h3', {}, 'Arguments'),
    jsonBlock(a.arguments, 'exact'),
    h('h3', {}, 'Suggested rules'),
    rules.length === 0
      ? h('p', { class: 'muted' }, 'None: what this call asks cannot be allowed by a rule, only approved once.')
      : h('ul', { class: 'rules' }, rules.map((r) => h('li', {}, h('code', { class: 'exact' }, visible(r)), ' ',
        button('approve with this rule', 'ghost small', () => decide('approve_with_rule', { rule: r }),
          'approve and allow calls matching this rule for the rest of the session')))),
    h('div', { class: 'actions' },
      button('Approve', 'ok', () => decide('approve'), 'run this call once'),
      (() => {
        const b = button('Approve for session', '', () => decide('approve_for_session'),
          rules.length ? `also allow for the rest of the session: ${visibleText(rules.join(', '))}` : 'no suggested rules');
        b.disabled = rules.length === 0;
        return b;
      })(),
      reason,
      button('Deny', 'danger', () => decide('deny', { reason: reason.value.trim() || 'denied from the web console' })),
      refused),
    h('div', { class: 'meta' }, `session ${a.session_id} · call `, h('a', { href: `#/calls/${a.call_id}` }, a.call_id), ' · ', status),
  );
  return card;
}

const DECISION_WORDS = {
  approve: 'approval', approve_for_session: 'approval for the session',
  approve_with_rule: 'approval with a rule', deny: 'denial',
};

// deniedByPolicy: the daemon denied the request in the policy's name when it was
// approved (a deny rule loaded since it was made). The decision says so itself
// (by_policy); a person's reason, however worded, never does.
const deniedByPolicy = (a) => a.status === 'denied' && a.decision?.by_policy === true;

// notApplied says why a decision made here did not take: the policy now denies the
// call, another approver decided first (who, what and when), or the request expired.
function notApplied(what, now) {
  const d = now.decision || {};
  if (deniedByPolicy(now)) {
    return `Your ${what} was not applied: ${d.reason}. The request is denied by the policy, not by a person.`;
  }
  if (now.status === 'expired' || !d.actor) {
    return `Your ${what} was not applied: the request had already ${now.status === 'expired' ? 'expired' : 'been ' + now.status}` +
      (now.decided_at ? ` (${new Date(now.decided_at).toLocaleString()})` : '') + '.';
  }
  return `Your ${what} was not applied: ${d.actor} had already ${now.status === 'denied' ? 'denied' : 'approved'} this request` +
    (now.decided_at ? ` at ${new Date(now.decided_at).toLocaleString()}` : '') + '.';
}

// decidedCard shows a decision and, once the call has run (or was denied), its result.
// conflict, when set, says that the decision made on this page was not the one taken.
function decidedCard(a, signal, conflict) {
  const d = a.decision || {};
  const result = h('div', { class: 'call-result' }, h('p', { class: 'muted' }, 'waiting for the result…'));
  const st = h('span', {}, badge(a.status, `st-${a.status}`));
  const card = h('article', { class: 'card decided', dataset: { approvalId: a.id, callId: a.call_id } },
    h('header', {},
      h('span', { class: 'title mono exact' }, visible(a.tool)), st,
      h('span', { class: 'meta' }, visible(`decision: ${d.kind || a.status}${d.rule ? ' ' + d.rule : ''} · by ` +
        (deniedByPolicy(a) ? `the policy (approved by ${d.actor || '?'})` : d.actor || '?')),
        d.reason ? ` — “${d.reason}”` : '')),
    conflict ? h('p', { class: 'conflict', role: 'alert' }, conflict) : '',
    h('div', { class: 'meta' }, 'call ', h('a', { href: `#/calls/${a.call_id}` }, a.call_id)),
    result);
  if (conflict) card.dataset.conflict = 'true';
  (async () => {
    for (;;) {
      try {
        const c = await get(`/v1/tool-calls/${encodeURIComponent(a.call_id)}`, signal);
        if (c.status === 'succeeded' || c.status === 'failed') {
          clear(result);
          result.append(renderResult(c.result));
          card.dataset.callStatus = c.status;
          return;
        }
      } catch (err) {
        if (isAbort(err)) return;
      }
      await sleep(700, signal).catch(() => {});
      if (signal.aborted) return;
    }
  })();
  return card;
}
