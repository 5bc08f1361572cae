// End-to-end test of the web console in headless Chromium (the Debian package), driven
// by playwright-core. Run by internal/webui/e2e_test.go against a real daemon:
//
//   node e2e/console.mjs BASE_URL ARTIFACT_DIR
//
// Scenarios:
//   1. A call waiting for approval (started through the REST API) is approved by a
//      click on the approvals page; its result appears on the page.
//   2. A command's output streams into the live calls page: each line is seen before
//      the next is printed (the command waits for a file this script creates after
//      seeing the line), the page is reloaded mid-stream and shows every line once.
//   3. Every page renders without console errors and loads nothing from elsewhere;
//      the audit page lists the denial of scenario 1 and filters by action.
//   4. The key is revoked while a call's panel follows the call: the page says so and
//      stops asking; the command's output, HTML, is shown as text.
//   5. A call with numeric progress (web_fetch of a slow download from SLOW_URL, which
//      holds the second half of its body until SLOW_URL/release is asked) shows a bar
//      part way, then full.
//   7. Two approvers decide the same request: the one who comes second is told that
//      the decision was not applied, and who decided what instead.
//   8. More running calls than the browser opens connections to one host: every
//      panel still shows its output and a call that ends is seen to end.
//   9. In a phone-sized window no page scrolls sideways.
//  10. While the daemon does not answer the page says so in plain words, and
//      recovers by itself when it answers again.
//  11. An approver's key is revoked with the approvals page open: the requests go,
//      the page says why and stops asking.
//  12. A decision the daemon refuses (a denial reason over 4096 bytes) is shown
//      beside the buttons, with the reason's size; the request stays decidable. One
//      that gets no answer says the request is still pending (the page does not
//      send it again).
//      The card says in which folder the command would run.
//  16. (Run first.) Approving a request that a deny rule added since (POLICY_APPROVAL,
//      made before the daemon restarted with the rule) says the policy denied it, not
//      a person. The approver's name typed then is sent with every decision (scenario
//      1 checks it), and is still there after a reload (scenario 7).
//  17. A fragment that is not valid percent-encoding, or names no page
//      (#/constructor), shows a page instead of a blank one.
// A screenshot of each page goes to ARTIFACT_DIR. On success the last line of stdout
// is a JSON summary (call ids) for the Go test to check against the API.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, artifacts] = process.argv.slice(2);
if (!base || !artifacts) {
  console.error('usage: node console.mjs BASE_URL ARTIFACT_DIR');
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });
const origin = new URL(base).origin;
// The daemon requires API keys: the script's own REST calls and the page use this one.
const apiKey = process.env.TOOLSERVER_API_KEY || '';
const auth = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
const LONG = 60_000; // generous: two cores shared with other work

function fail(msg) {
  throw new Error(msg);
}

// within fails instead of waiting forever for promise.
function within(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), LONG); });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

// --- REST helpers (Node's fetch) ---------------------------------------------------

async function api(method, path, body) {
  const resp = await fetch(base + path, {
    method,
    headers: body === undefined ? { ...auth } : { ...auth, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  if (!resp.ok) fail(`${method} ${path}: ${resp.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// startCalls posts a batch and reads its NDJSON stream in the background.
function startCalls(sessionID, body) {
  const events = [];
  let wake = () => {};
  const done = (async () => {
    const resp = await fetch(`${base}/v1/sessions/${sessionID}/tool-calls`, {
      method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    if (!resp.ok) fail(`tool-calls: ${resp.status} ${await resp.text()}`);
    const dec = new TextDecoder();
    let buf = '';
    for await (const chunk of resp.body) {
      buf += dec.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) events.push(JSON.parse(line));
        wake();
      }
    }
    return events;
  })();
  done.catch(() => {});
  const waitFor = async (pred, what) => {
    const deadline = Date.now() + LONG;
    for (;;) {
      const ev = events.find(pred);
      if (ev) return ev;
      if (Date.now() > deadline) fail(`timed out waiting for ${what}; events: ${JSON.stringify(events)}`);
      await Promise.race([new Promise((r) => { wake = r; }), done.catch(() => {}), new Promise((r) => setTimeout(r, 1000))]);
    }
  };
  return { events, done, waitFor };
}

// --- the browser --------------------------------------------------------------------

const userDataDir = mkdtempSync(join(tmpdir(), 'toolserverd-ui-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 900 },
  timeout: LONG,
});
context.setDefaultTimeout(LONG);

const problems = []; // console errors, page errors, requests to other origins
let currentStep = 'start';
// The key as the console's API key button stores it, before any page script runs.
if (apiKey) await context.addInitScript((k) => localStorage.setItem('toolserverd.apiKey', k), apiKey);
const page = context.pages()[0] || await context.newPage();
page.on('console', (m) => { if (m.type() === 'error') problems.push(`[${currentStep}] console error: ${m.text()}`); });
page.on('pageerror', (e) => problems.push(`[${currentStep}] page error: ${e.message}`));
context.on('request', (r) => {
  const u = r.url();
  if (!u.startsWith('data:') && new URL(u).origin !== origin) problems.push(`[${currentStep}] request to another origin: ${u}`);
});
context.on('response', (r) => {
  if (r.status() >= 400) problems.push(`[${currentStep}] HTTP ${r.status()} for ${r.url()}`);
});

function step(name) {
  currentStep = name;
  console.log(`step: ${name}`);
}

function checkClean() {
  if (problems.length) fail(`problems in the page:\n${problems.join('\n')}`);
}

async function shot(name) {
  // The tools page is long: its first screen (with the opened schema) is enough.
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: name !== 'tools' });
}

const textOf = (sel) => page.evaluate((s) => document.querySelector(s)?.textContent ?? null, sel);

async function waitText(sel, want, what) {
  try {
    await page.waitForFunction(([s, w]) => document.querySelector(s)?.textContent === w, [sel, want], { timeout: LONG, polling: 50 });
  } catch (err) {
    fail(`${what}: ${sel} has ${JSON.stringify(await textOf(sel))}, want ${JSON.stringify(want)} (${err.message.split('\n')[0]})`);
  }
}

const summary = {};
try {
  // --- 1. approve a pending call from the page --------------------------------------
  step('approve');
  const s1 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'] });
  // The page is open (and empty) before the request exists: it must show up unasked.
  const resp = await page.goto(base + '/ui');
  if (!page.url().endsWith('/ui/')) fail(`/ui did not land on /ui/: ${page.url()}`);
  if (!resp.ok()) fail(`/ui/: ${resp.status()}`);
  // --- 16. an approval the policy now denies (first: the page lists it from the start) --
  // The request was made before the operator added a deny rule that covers it (and
  // restarted to load it). The approval is refused and the request denied in the
  // policy's name: the card must say the policy denied it, not that the approver did.
  step('approval the policy now denies');
  const id16 = process.env.POLICY_APPROVAL || fail('POLICY_APPROVAL is not set');
  // The approver names themselves once: the record and a denial's message say who
  // decided, not "web-console".
  await page.locator('input[name=approver]').fill('Ada Lovelace');
  const card16 = page.locator(`article.approval[data-approval-id="${id16}"]`);
  await card16.waitFor();
  await card16.getByRole('button', { name: 'Approve', exact: true }).click();
  const told = page.locator(`article.decided[data-approval-id="${id16}"] .conflict`);
  await told.waitFor({ timeout: 20000 })
    .catch(async () => fail(`no message that the approval was not applied; the page shows: ${await page.locator(`[data-approval-id="${id16}"]`).first().textContent()}`));
  const told16 = await told.textContent();
  for (const want of ['not applied', 'the policy now denies it', 'denied by the rule deny execute_command(echo policy-change:*)', 'denied by the policy, not by a person']) {
    if (!told16.includes(want)) fail(`not-applied message ${JSON.stringify(told16)} lacks ${JSON.stringify(want)}`);
  }
  if (told16.includes('Ada Lovelace')) fail(`not-applied message names the approver as the one who denied: ${JSON.stringify(told16)}`);
  const header16 = await page.locator(`article.decided[data-approval-id="${id16}"] header`).textContent();
  if (!header16.includes('by the policy (approved by Ada Lovelace via key ')) fail(`decided card header: ${JSON.stringify(header16)}`);
  problems.length = 0; // the 409 was the point
  console.log('scenario 16 ok: an approval the policy now denies is said to be denied by the policy');

  await page.locator('#approvals .empty').waitFor();
  const pending = startCalls(s1.id, { calls: [{ id: 'needs_ok', name: 'execute_command', arguments: { command: 'touch approved.txt && echo approved-result' } }] });
  const asked = await pending.waitFor((e) => e.type === 'approval_required', 'approval_required');
  summary.approvedCall = asked.call_id;
  summary.approval = asked.approval.id;

  const card = page.locator(`article.approval[data-approval-id="${asked.approval.id}"]`);
  await card.waitFor();
  const cardText = await card.textContent();
  for (const want of ['execute_command', 'touch approved.txt && echo approved-result', `risk: ${asked.approval.risk}`, asked.approval.reason]) {
    if (!cardText.includes(want)) fail(`approval card lacks ${JSON.stringify(want)}: ${cardText}`);
  }
  // Arguments are pretty-printed JSON.
  const args = await card.locator('pre.json').first().textContent();
  if (args !== JSON.stringify({ command: 'touch approved.txt && echo approved-result' }, null, 2)) fail(`arguments shown as ${args}`);
  for (const rule of asked.approval.suggestions) {
    if (!cardText.includes(rule)) fail(`suggested rule ${rule} not shown`);
  }
  await page.locator('#pending-count:not([hidden])').waitFor();
  await shot('approve-pending');
  await card.getByRole('button', { name: 'Approve', exact: true }).click();
  const decided = page.locator(`article.decided[data-approval-id="${asked.approval.id}"][data-call-status="succeeded"]`);
  await decided.waitFor();
  const decidedText = await decided.textContent();
  if (!decidedText.includes('approved-result') || !decidedText.includes('by Ada Lovelace via key ')) fail(`decided card: ${decidedText}`);
  if (await card.count() !== 0) fail('the approved request is still listed as pending');
  await within(pending.done, 'the approved call\'s stream');
  const msg = pending.events.find((e) => e.type === 'message');
  if (!msg || msg.is_error || !JSON.stringify(msg).includes('approved-result')) fail(`the agent's stream got ${JSON.stringify(msg)}`);
  await page.locator('#pending-count[hidden]').waitFor({ state: 'attached' }); // the count follows the decision

  // A denial with a reason reaches the agent as a denied result quoting it. The
  // reason is worded as the daemon words a policy denial: the card still says the
  // approver denied it (the decision's by_policy, not its reason, says which).
  step('deny');
  const refused = startCalls(s1.id, { calls: [{ id: 'refuse_me', name: 'execute_command', arguments: { command: 'touch denied.txt' } }] });
  const asked2 = await refused.waitFor((e) => e.type === 'approval_required', 'second approval_required');
  const card2 = page.locator(`article.approval[data-approval-id="${asked2.approval.id}"]`);
  await card2.locator('input[name=reason]').fill('the policy now denies it (not on a Friday)');
  await card2.getByRole('button', { name: 'Deny' }).click();
  const denied = page.locator(`article.decided[data-approval-id="${asked2.approval.id}"][data-call-status="failed"]`);
  await denied.waitFor();
  const deniedText = await denied.textContent();
  if (!deniedText.includes('not on a Friday') || !deniedText.includes('denied')) fail(`denied card: ${deniedText}`);
  const header2 = await denied.locator('header').textContent();
  if (!header2.includes('by Ada Lovelace') || header2.includes('by the policy')) fail(`a person's denial in the policy's words is shown as the policy's: ${JSON.stringify(header2)}`);
  await within(refused.done, 'the denied call\'s stream');
  const msg2 = refused.events.find((e) => e.type === 'message');
  if (!msg2?.is_error || msg2.error_kind !== 'denied' || !JSON.stringify(msg2).includes('denied by Ada Lovelace: the policy now denies it (not on a Friday)')) fail(`the agent's stream got ${JSON.stringify(msg2)}`);
  summary.deniedCall = asked2.call_id;

  // Approve for session: the suggested rules join the session, so the next such
  // command runs without asking.
  step('approve for session');
  const third = startCalls(s1.id, { calls: [{ id: 'for_session', name: 'execute_command', arguments: { command: 'touch one.txt' } }] });
  const asked3 = await third.waitFor((e) => e.type === 'approval_required', 'third approval_required');
  if (!asked3.approval.suggestions.length) fail('no suggested rules to approve for the session');
  await page.locator(`article.approval[data-approval-id="${asked3.approval.id}"]`).getByRole('button', { name: 'Approve for session' }).click();
  await page.locator(`article.decided[data-approval-id="${asked3.approval.id}"][data-call-status="succeeded"]`).waitFor();
  await within(third.done, 'the call approved for the session');
  const fourth = startCalls(s1.id, { calls: [{ id: 'after_rule', name: 'execute_command', arguments: { command: 'touch two.txt' } }] });
  await within(fourth.done, 'a call covered by the new session rule');
  if (fourth.events.some((e) => e.type === 'approval_required') || fourth.events.find((e) => e.type === 'message')?.is_error) {
    fail(`after approve for session the same kind of call still asked: ${JSON.stringify(fourth.events)}`);
  }
  await shot('approve-decided');
  checkClean();
  console.log('scenario 1 ok: approved, denied and approved for the session from the page, results shown');

  // --- 2. watch a command's output stream in, reload mid-stream ----------------------
  step('stream');
  const s2 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'], permission_mode: 'bypass' });
  const waitFile = (f) => `while [ ! -e ${f} ]; do sleep 0.05; done`;
  const command = ['echo line 1', waitFile('go2'), 'echo line 2', waitFile('go3'), 'echo line 3 >&2', waitFile('go4'), 'echo line 4'].join('; ');
  const running = startCalls(s2.id, { calls: [{ id: 'stream_me', name: 'execute_command', arguments: { command } }], timeout_ms: 170000 });
  const started = await running.waitFor((e) => e.type === 'tool_start', 'tool_start');
  const id = started.call_id;
  summary.streamedCall = id;
  const release = (f) => writeFileSync(join(s2.workdir, f), '');

  await page.goto(base + '/ui/#/live');
  const out = `pre.output[data-call-id="${id}"]`;
  const panel = `article.call[data-call-id="${id}"]`;
  const increments = [];
  await waitText(out, 'line 1\n', 'first line');
  increments.push(await textOf(out));
  release('go2');
  await waitText(out, 'line 1\nline 2\n', 'second line');
  increments.push(await textOf(out));
  const statusNow = await page.getAttribute(panel, 'data-status');
  if (statusNow === 'succeeded' || statusNow === 'failed') fail(`call already ${statusNow} while blocked`);
  await shot('stream-midway');

  step('reload');
  await page.reload();
  await waitText(out, 'line 1\nline 2\n', 'after reload (nothing lost, nothing repeated)');
  release('go3');
  await waitText(out, 'line 1\nline 2\nline 3\n', 'third line (stderr)');
  increments.push(await textOf(out));
  const stderr = await page.locator(`${out} span.stderr`).allTextContents();
  if (stderr.join('') !== 'line 3\n') fail(`stderr spans: ${JSON.stringify(stderr)}`);
  const stdout = await page.locator(`${out} span.stdout`).allTextContents();
  if (stdout.join('') !== 'line 1\nline 2\n') fail(`stdout spans before the last line: ${JSON.stringify(stdout)}`);
  release('go4');
  await page.locator(`${panel}[data-status="succeeded"][data-output-complete="true"]`).waitFor();
  const final = await textOf(out);
  if (final !== 'line 1\nline 2\nline 3\nline 4\n') fail(`final output ${JSON.stringify(final)}`);
  const result = await page.locator(`${panel} .call-result`).textContent();
  if (!result.includes('line 4')) fail(`result not shown: ${result}`);
  await within(running.done, 'the streamed call\'s stream');
  summary.increments = increments;
  await shot('stream-finished');
  checkClean();
  console.log(`scenario 2 ok: ${increments.length} increments seen before completion, reload showed each line once`);

  // --- 3. every page renders cleanly ---------------------------------------------------
  // A call the model got wrong, so the recent calls show an error too.
  await within(startCalls(s2.id, { calls: [{ id: 'bad_args', name: 'execute_command', arguments: { command: '' } }] }).done, 'the invalid call');
  const pages = [
    ['approvals', '#/approvals', '#approvals .empty'],
    ['live', '#/live', '#live-calls .empty'],
    ['calls', '#/calls', `#recent-calls tr[data-call-id="${summary.approvedCall}"]`],
    ['call', `#/calls/${id}`, `article.call[data-call-id="${id}"][data-output-complete="true"]`],
    ['tools', '#/tools', '#tools details.tool[data-tool="execute_command"]'],
    ['mcp', '#/mcp', '#mcp-servers tr[data-server]'],
    ['audit', '#/audit', `#audit tr[data-action="approval.denied"]`],
  ];
  for (const [name, hash, ready] of pages) {
    step(`page ${name}`);
    await page.goto(`${base}/ui/${hash}`);
    await page.locator(ready).first().waitFor();
    if (name === 'calls') {
      await page.locator(`#recent-calls tr[data-call-id="${summary.approvedCall}"]`).click();
      const detail = await page.locator('#recent-calls tr.detail').textContent();
      if (!detail.includes('approved-result')) fail(`call detail: ${detail}`);
      if (await page.locator(`#recent-calls tr[data-call-id="${id}"]`).count() !== 1) fail('streamed call not listed');
      const bad = await page.locator('#recent-calls tbody tr').first().textContent();
      if (!bad.includes('failed') || !bad.includes('invalid_args')) fail(`newest call row: ${bad}`);
    }
    if (name === 'tools') {
      await page.locator('#tools details.tool[data-tool="execute_command"] summary').click();
      const schema = await page.locator('#tools details.tool[data-tool="execute_command"] pre.json').textContent();
      if (!JSON.parse(schema).properties?.command) fail(`schema shown: ${schema}`);
      const skill = page.locator('#skills details.skill').first();
      await skill.locator('summary').click();
      await page.waitForFunction(() => !document.querySelector('#skills details.skill pre.json')?.textContent.startsWith('loading'));
    }
    if (name === 'audit') {
      // The denial of scenario 1, with its reason; the filter narrows to denials.
      const row = await page.locator('#audit tr[data-action="approval.denied"]').first().textContent();
      if (!row.includes('not on a Friday')) fail(`audit row of the denial: ${row}`);
      await page.locator('#main select[aria-label="action"]').selectOption('approval.approved');
      await page.locator('#audit tr[data-action="approval.approved"]').first().waitFor();
      if (await page.locator('#audit tr[data-action="approval.denied"]').count() !== 0) fail('the action filter showed denials');
    }
    if (name === 'mcp') {
      const state = await page.locator('#mcp-servers tr[data-server]').first().getAttribute('data-state');
      if (!state) fail('no MCP server state shown');
    }
    const navActive = await page.locator('#nav a.active').getAttribute('data-page');
    if (navActive !== name.replace('call', 'calls').replace('callss', 'calls')) fail(`nav shows ${navActive} on ${name}`);
    await shot(name);
    checkClean();
    console.log(`page ${name} ok`);
  }
  console.log('scenario 3 ok: every page rendered without console errors');

  // --- 4. the key is revoked while a call's panel follows it ------------------------
  // The page says so and stops asking for that call; text from the command (here
  // HTML) stays text.
  step('revoked key');
  const revokedKey = await api('POST', '/v1/keys', { name: 'console-revoked', roles: ['agent', 'approver'] });
  const hostile = '<img src=x onerror=window.__xss=1>';
  const slow = startCalls(s2.id, { calls: [{ id: 'revoked', name: 'execute_command', arguments: { command: `echo '${hostile}'; ${waitFile('go5')}` } }], timeout_ms: 170000 });
  const slowID = (await slow.waitFor((e) => e.type === 'tool_start', 'tool_start')).call_id;
  await page.goto(`${base}/ui/#/calls`); // the init script stores the admin key on every load
  await page.evaluate((k) => { localStorage.setItem('toolserverd.apiKey', k); location.hash = '#/live'; }, revokedKey.key);
  await waitText(`pre.output[data-call-id="${slowID}"]`, hostile + '\n', 'the hostile line, as text');
  if (await page.evaluate(() => window.__xss !== undefined || document.querySelector('img[src="x"]') !== null)) fail('command output was rendered as HTML');
  let requests = 0;
  const count = (r) => { if (r.url().includes(`/v1/tool-calls/${slowID}`)) requests++; };
  await api('POST', `/v1/keys/${revokedKey.id}/revoke`);
  await page.locator(`article.call[data-call-id="${slowID}"] .note`, { hasText: 'revoked' }).waitFor();
  page.on('response', count);
  await page.waitForTimeout(4000);
  page.off('response', count);
  if (requests > 0) fail(`the panel asked ${requests} times in 4 s after the page learnt the key was revoked`);
  if (!(await textOf('#banner')).includes('revoked')) fail(`banner: ${await textOf('#banner')}`);
  release('go5');
  await within(slow.done, 'the revoked scenario\'s call');
  problems.length = 0; // the 401s were the point
  console.log('scenario 4 ok: a revoked key is reported and the call panel stops asking');

  // --- 5. numeric progress as a bar --------------------------------------------------
  step('numeric progress');
  const slowURL = process.env.SLOW_URL || fail('SLOW_URL is not set');
  const size = Number(process.env.SLOW_SIZE);
  const s5 = await api('POST', '/v1/sessions', { available_tools: ['web_fetch'], permission_mode: 'bypass' });
  const download = startCalls(s5.id, { calls: [{ id: 'dl', name: 'web_fetch', arguments: { url: slowURL + '/body', format: 'raw' } }], timeout_ms: 170000 });
  const dlID = (await download.waitFor((e) => e.type === 'tool_start', 'tool_start')).call_id;
  // Only the fragment changes, so reload: the init script stores the admin key again.
  await page.goto(`${base}/ui/#/calls/${dlID}`);
  await page.reload();
  problems.length = 0; // the revoked key's 401s until the reload
  const dlPanel = `article.call[data-call-id="${dlID}"]`;
  await page.locator(`${dlPanel}[data-progress$="/${size}"] .call-meter progress`).waitFor({ timeout: LONG });
  const midway = await page.locator(`${dlPanel} .call-meter progress`).evaluate((b) => [b.value, b.max]);
  if (!(midway[0] > 0 && midway[0] <= size / 2 && midway[1] === size)) fail(`bar part way: value ${midway[0]} of ${midway[1]}, want at most half of ${size}`);
  if (!(await textOf(`${dlPanel} .call-meter`)).includes('bytes received')) fail(`meter text: ${await textOf(`${dlPanel} .call-meter`)}`);
  await shot('progress-midway');
  const released = await fetch(slowURL + '/release');
  if (!released.ok) fail(`release: ${released.status}`);
  await page.locator(`${dlPanel}[data-progress="${size}/${size}"][data-status="succeeded"]`).waitFor({ timeout: LONG });
  const full = await page.locator(`${dlPanel} .call-meter progress`).evaluate((b) => [b.value, b.max]);
  if (full[0] !== size || full[1] !== size) fail(`bar at the end: ${full}`);
  await within(download.done, 'the download\'s stream');
  checkClean();
  console.log('scenario 5 ok: numeric progress shows as a bar, part way then full');

  // --- 6. a background job's output on the live page ----------------------------------
  // Its call answered at once (succeeded, with a job id); the page lists it all the
  // same and shows the job's output as it comes, then keeps it once the job ends.
  step('background job');
  const s6 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'], permission_mode: 'bypass' });
  const bg = startCalls(s6.id, { calls: [{ id: 'bg', name: 'execute_command',
    arguments: { command: ['echo job 1', waitFile('go6'), 'echo job 2'].join('; '), background: true } }] });
  const bgID = (await bg.waitFor((e) => e.type === 'tool_start', 'tool_start')).call_id;
  summary.backgroundCall = bgID;
  await within(bg.done, 'the background call\'s stream'); // the call has answered
  await page.goto(`${base}/ui/#/live`);
  await page.reload();
  const bgPanel = `article.call[data-call-id="${bgID}"]`;
  const bgOut = `pre.output[data-call-id="${bgID}"]`;
  await waitText(bgOut, 'job 1\n', 'the job\'s first line');
  await page.locator(`${bgPanel}[data-status="succeeded"][data-output-open="true"]`).waitFor({ timeout: LONG });
  if (await page.getAttribute(bgPanel, 'data-output-complete') === 'true') fail('output complete while the job runs');
  await shot('live-job');
  writeFileSync(join(s6.workdir, 'go6'), '');
  await waitText(bgOut, 'job 1\njob 2\n', 'the job\'s last line');
  await page.locator(`${bgPanel}[data-output-complete="true"][data-output-open="false"]`).waitFor({ timeout: LONG });
  checkClean();
  console.log('scenario 6 ok: a background job\'s call is live, its output streaming until the job ends');

  // Scenarios 7 to 9 report each failure and go on, so that one run shows them all.
  const failures = [];
  const scenario = async (n, name, fn) => {
    step(name);
    try {
      await fn();
      console.log(`scenario ${n} ok: ${name}`);
    } catch (err) {
      await page.screenshot({ path: join(artifacts, `failure-${n}.png`), fullPage: true }).catch(() => {});
      failures.push(`scenario ${n} (${name}): ${err.message}`);
    }
    problems.length = 0;
  };

  // --- 7. two approvers decide the same request --------------------------------------
  // Another approver denies it while this page shows it; the click on Approve here
  // comes too late: the page must say that this decision was not applied, and who
  // decided instead, rather than list it as decided here.
  await scenario(7, 'two approvers, the loser told', async () => {
    const s7 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'] });
    const raced = startCalls(s7.id, { calls: [{ id: 'raced', name: 'execute_command', arguments: { command: 'rm -rf build && git push --force' } }] });
    const asked7 = await raced.waitFor((e) => e.type === 'approval_required', 'approval_required (race)');
    await page.goto(`${base}/ui/#/approvals`);
    await page.reload();
    const typed = await page.locator('input[name=approver]').inputValue();
    if (typed !== 'Ada Lovelace') fail(`the approver's name after a reload: ${JSON.stringify(typed)}`);
    const card7 = page.locator(`article.approval[data-approval-id="${asked7.approval.id}"]`);
    await card7.waitFor();
    // The page must not learn of the other decision by refreshing its list first.
    await page.route('**/v1/approvals?status=pending*', () => {});
    await api('POST', `/v1/approvals/${asked7.approval.id}/decision`, { decision: 'deny', actor: 'alice', reason: `not today: ${'x'.repeat(600)}` });
    await card7.getByRole('button', { name: 'Approve', exact: true }).click();
    const lost = page.locator(`article.decided[data-approval-id="${asked7.approval.id}"] .conflict`);
    try {
      await lost.waitFor({ timeout: 20000 });
    } catch {
      fail(`no message that the decision was not applied; the page shows: ${await page.locator(`[data-approval-id="${asked7.approval.id}"]`).first().textContent()}`);
    }
    const text = await lost.textContent();
    for (const want of ['not applied', 'denied', 'alice']) {
      if (!text.includes(want)) fail(`conflict message ${JSON.stringify(text)} lacks ${JSON.stringify(want)}`);
    }
    await page.unroute('**/v1/approvals?status=pending*');
    await within(raced.done, 'the raced call');
    await shot('approve-conflict');
  });

  // --- 8. many calls on the live page -------------------------------------------------
  // More running calls than a browser opens connections to one host (6 over HTTP/1.1):
  // their progress streams must not take every connection, or the page stops seeing
  // anything (a call that ends stays "running", a new call's output never shows).
  await scenario(8, 'live page with more calls than connections', async () => {
    // A session each: a session runs its commands one at a time.
    const waitFile8 = (f) => `while [ ! -e ${f} ]; do sleep 0.1; done`;
    const many = [];
    const sessions8 = [];
    for (let i = 0; i < 8; i++) {
      const s8 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'], permission_mode: 'bypass' });
      sessions8.push(s8);
      many.push(startCalls(s8.id, { calls: [{ id: `many_${i}`, name: 'execute_command', arguments: { command: `echo many ${i}; ${waitFile8('stop8')}` } }], timeout_ms: 170000 }));
    }
    const ids = [];
    for (const m of many) ids.push((await m.waitFor((e) => e.type === 'tool_start', 'tool_start (many)')).call_id);
    try {
      await page.goto(`${base}/ui/#/live`);
      await page.reload();
      for (let i = 0; i < ids.length; i++) {
        await page.locator(`article.call[data-call-id="${ids[i]}"]`).waitFor();
      }
      // Each panel shows its own output, the last started too.
      for (let i = 0; i < ids.length; i++) {
        await waitText(`pre.output[data-call-id="${ids[i]}"]`, `many ${i}\n`, `output of call ${i} of ${ids.length}`);
      }
      // The live list brings every shown call's record: no panel asks for its own.
      let own = 0;
      const ownRecord = (r) => { if (/\/v1\/tool-calls\/tc_[a-z0-9]+$/.test(new URL(r.url()).pathname)) own++; };
      page.on('request', ownRecord);
      await page.waitForTimeout(3000);
      page.off('request', ownRecord);
      if (own > 0) fail(`the panels asked for their own records ${own} times in 3 s while the live list brought them`);
      // A call that ends is seen to end.
      const s8b = await api('POST', '/v1/sessions', { available_tools: ['execute_command'], permission_mode: 'bypass' });
      const quick = startCalls(s8b.id, { calls: [{ id: 'quick', name: 'execute_command', arguments: { command: `echo quick; ${waitFile8('go8')}` } }], timeout_ms: 170000 });
      const quickID = (await quick.waitFor((e) => e.type === 'tool_start', 'tool_start (quick)')).call_id;
      await waitText(`pre.output[data-call-id="${quickID}"]`, 'quick\n', 'output of a call started while 8 run');
      writeFileSync(join(s8b.workdir, 'go8'), '');
      await page.locator(`article.call[data-call-id="${quickID}"][data-status="succeeded"]`).waitFor();
      await shot('live-many');
    } finally {
      for (const s8 of sessions8) writeFileSync(join(s8.workdir, 'stop8'), ''); // the calls end whatever happened
    }
    for (const m of many) await within(m.done, 'the many calls');
    for (const id8 of ids) await page.locator(`article.call[data-call-id="${id8}"][data-output-complete="true"]`).waitFor();
  });

  // --- 9. a narrow window ---------------------------------------------------------------
  // On a phone-sized window no page scrolls sideways: wide tables scroll in their box.
  await scenario(9, 'narrow window', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    try {
      for (const [hash, ready] of [['#/approvals', '#approvals'], ['#/calls', '#recent-calls tbody tr'], ['#/mcp', '#mcp-servers tr[data-server]'], ['#/audit', '#audit tbody tr'], ['#/live', '#live-calls']]) {
        await page.goto(`${base}/ui/${hash}`);
        await page.locator(ready).first().waitFor({ state: 'attached' });
        await page.waitForTimeout(300);
        const wide = await page.evaluate(() => document.documentElement.scrollWidth);
        if (wide > 375) {
          await shot(`narrow-${hash.slice(2)}`);
          fail(`${hash} is ${wide} px wide in a 375 px window`);
        }
      }
      await shot('narrow');
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
    // On a wide window a long word (scenario 7's denial reason) wraps in its cell
    // instead of pushing the table out of its box.
    await page.goto(`${base}/ui/#/audit`);
    await page.locator('#audit tr[data-action="approval.denied"]').first().waitFor();
    const [scroll, client] = await page.locator('.table-wrap').evaluate((w) => [w.scrollWidth, w.clientWidth]);
    if (scroll > client) {
      await shot('wide-audit');
      fail(`the audit table is ${scroll} px wide in a ${client} px box at 1280 px`);
    }
  });

  // --- 10. the daemon does not answer --------------------------------------------------
  // Every request of the page fails as when the daemon is down or restarting: the
  // banner says the daemon does not answer (not the browser's "Failed to fetch") and
  // goes once it answers again, the page working without a reload.
  await scenario(10, 'daemon unreachable, then back', async () => {
    await page.goto(`${base}/ui/#/approvals`);
    await page.reload();
    await page.locator('#approvals .empty, #approvals article').first().waitFor();
    await page.route('**/v1/**', (r) => r.abort('connectionrefused'));
    try {
      await page.locator('#banner:not([hidden])').waitFor();
      const said = await textOf('#banner');
      if (!said.includes('does not answer') || !said.includes('trying again')) fail(`banner while the daemon is away: ${JSON.stringify(said)}`);
      if (await textOf('#conn') !== 'unreachable') fail(`connection indicator: ${await textOf('#conn')}`);
    } finally {
      await page.unroute('**/v1/**');
    }
    await page.locator('#banner[hidden]').waitFor({ state: 'attached' });
    await waitText('#conn', 'connected', 'the indicator once the daemon answers');
  });

  // --- 11. an approver's key is revoked while the approvals page is open -----------------
  // The requests it showed go (their buttons could only fail) with a message saying
  // why, and the page stops asking until a key is set.
  await scenario(11, 'approver key revoked on the approvals page', async () => {
    const approver = await api('POST', '/v1/keys', { name: 'console-approver', roles: ['approver'] });
    const s11 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'] });
    const held = startCalls(s11.id, { calls: [{ id: 'held', name: 'execute_command', arguments: { command: 'rm -rf build' } }] });
    const asked11 = await held.waitFor((e) => e.type === 'approval_required', 'approval_required (revoked approver)');
    try {
      await page.goto(`${base}/ui/#/calls`);
      await page.evaluate((k) => { localStorage.setItem('toolserverd.apiKey', k); location.hash = '#/approvals'; }, approver.key);
      await page.locator(`article.approval[data-approval-id="${asked11.approval.id}"]`).waitFor();
      await api('POST', `/v1/keys/${approver.id}/revoke`);
      await page.locator('#approvals .empty', { hasText: 'revoked' }).waitFor({ timeout: 20000 });
      if (await page.locator('article.approval').count() !== 0) fail('requests still offered for a decision with a revoked key');
      let asking = 0;
      const countAPI = (r) => { if (new URL(r.url()).pathname.startsWith('/v1/')) asking++; };
      page.on('request', countAPI);
      await page.waitForTimeout(4000);
      page.off('request', countAPI);
      if (asking > 0) fail(`the page asked the daemon ${asking} times in 4 s after it learnt the key was revoked`);
    } finally {
      await api('POST', `/v1/approvals/${asked11.approval.id}/decision`, { decision: 'deny', reason: 'end of scenario 11' });
      await within(held.done, 'the held call');
      await page.reload(); // the init script puts the admin key back
    }
  });

  // --- 12. a decision the daemon refuses ---------------------------------------------------
  // A denial reason over 4096 bytes is refused (400): the card says so where the
  // approver looks (beside the buttons, as an alert) with the reason's size, and the
  // request stays pending with its buttons usable.
  await scenario(12, 'a refused decision is shown plainly', async () => {
    const s12 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'] });
    const held = startCalls(s12.id, { calls: [{ id: 'long_reason', name: 'execute_command', arguments: { command: 'rm -rf build' } }] });
    const asked12 = await held.waitFor((e) => e.type === 'approval_required', 'approval_required (long reason)');
    try {
      await page.goto(`${base}/ui/#/approvals`);
      const card12 = page.locator(`article.approval[data-approval-id="${asked12.approval.id}"]`);
      await card12.waitFor();
      // Where the command would run: what `rm -rf build` deletes depends on it.
      await card12.locator('.workdir', { hasText: s12.workdir }).waitFor({ timeout: 20000 })
        .catch(() => fail(`the card does not say where the command runs (${s12.workdir})`));
      const reason = 'ü'.repeat(2500); // 5000 bytes
      await card12.locator('input[name=reason]').fill(reason);
      await card12.getByRole('button', { name: 'Deny' }).click();
      const said = card12.locator('.actions [role=alert]');
      await said.waitFor({ timeout: 20000 });
      const text = await said.textContent();
      if (!text.includes('4096') || !text.includes('5000 bytes')) fail(`refusal shown as ${JSON.stringify(text)}`);
      if (await card12.getByRole('button', { name: 'Deny' }).isDisabled()) fail('Deny stays disabled after the refusal');
      // A decision that gets no answer (the daemon restarting) is not sent again by the
      // page: the card must say the request is still pending, not "trying again", which
      // an approver reads as the page retrying the decision for them.
      await page.route('**/v1/approvals/*/decision', (r) => r.abort('connectionrefused'));
      try {
        await card12.getByRole('button', { name: 'Approve', exact: true }).click();
        await page.waitForFunction((el) => el.textContent.includes('does not answer'), await said.elementHandle(), { timeout: 20000 });
        const lost = await said.textContent();
        if (lost.includes('trying again') || !lost.includes('still pending')) fail(`an unanswered decision shown as ${JSON.stringify(lost)}`);
        if (await card12.getByRole('button', { name: 'Approve', exact: true }).isDisabled()) fail('Approve stays disabled after an unanswered decision');
      } finally {
        await page.unroute('**/v1/approvals/*/decision');
      }
    } finally {
      await api('POST', `/v1/approvals/${asked12.approval.id}/decision`, { decision: 'deny', reason: 'end of scenario 12' });
      await within(held.done, 'the long-reason call');
    }
  });
  // --- 13. more requests pending than the approvals page lists ---------------------------
  // The page lists the newest 200; the badge counts up to 1000. The page set the badge
  // to its 200 after each refresh and the badge's own poll set it back, so it flipped.
  await scenario(13, 'more pending than the page lists', async () => {
    const s13 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'] });
    const n = 205;
    const many = startCalls(s13.id, {
      calls: Array.from({ length: n }, (_, i) => ({ id: `many_${i}`, name: 'execute_command', arguments: { command: `rm -rf build${i}` } })),
    });
    const pendingOf = async () => {
      let all = [];
      let before = '';
      for (;;) {
        const r = await api('GET', `/v1/approvals?status=pending&session_id=${s13.id}&limit=200${before}`);
        all = all.concat(r.approvals);
        if (!r.next_before) return all;
        before = `&before=${encodeURIComponent(r.next_before)}`;
      }
    };
    try {
      const deadline = Date.now() + LONG;
      while ((await pendingOf()).length < n) {
        if (Date.now() > deadline) fail(`the ${n} calls did not all wait for approval`);
        await new Promise((r) => setTimeout(r, 500));
      }
      await page.goto(`${base}/ui/#/approvals`);
      await page.locator('#approvals .more:not([hidden])').waitFor({ timeout: 20000 })
        .catch(() => fail('the page does not say that more requests wait than it lists'));
      // The badge counts with a poll of its own once the page says it lists only part:
      // until that answer comes it may still show an earlier count.
      await page.waitForFunction((want) => Number.parseInt(document.getElementById('pending-count').textContent, 10) >= want, n, { timeout: 20000 })
        .catch(async () => fail(`the badge never counted the ${n} requests pending (it says ${await page.locator('#pending-count').textContent()})`));
      const seen = new Set();
      for (let i = 0; i < 10; i++) {
        const text = await page.locator('#pending-count').textContent();
        seen.add(text);
        if (Number.parseInt(text, 10) < n) fail(`the badge says ${text} with at least ${n} requests pending (seen: ${[...seen].join(', ')})`);
        await page.waitForTimeout(700);
      }
    } finally {
      for (const a of await pendingOf()) {
        await api('POST', `/v1/approvals/${a.id}/decision`, { decision: 'deny', reason: 'end of scenario 13' }).catch(() => {});
      }
      await within(many.done, 'the many calls');
    }
  });
  // --- 14. hostile text in a request for approval ----------------------------------------
  // The model (or a prompt injection) writes the command: markup in it must stay text,
  // and characters that show nothing or reorder what follows (bidi overrides, zero-width
  // and filler characters, escape sequences) must show as markers on the card where the
  // approver decides, and in the call's panel: otherwise `rm -rf build` can hide behind
  // what reads as something else.
  await scenario(14, 'hostile text in an approval', async () => {
    const s14 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'] });
    const hidden = ['\u202E', '\u2066', '\u200B', '\u3164', '\u001B', '\u2028', '\uFEFF'];
    const command = 'ls \u200B-la \u202E; rm -rf build\u2066 \u001B[8m\u2028\uFEFF<img src=x onerror="window.__pwned=1"></script>\u3164';
    const held = startCalls(s14.id, { calls: [{ id: 'hostile', name: 'execute_command', arguments: { command } }] });
    const asked14 = await held.waitFor((e) => e.type === 'approval_required', 'approval_required (hostile)');
    try {
      await page.goto(`${base}/ui/#/approvals`);
      const card14 = page.locator(`article.approval[data-approval-id="${asked14.approval.id}"]`);
      await card14.waitFor();
      if (await page.evaluate(() => window.__pwned !== undefined || document.querySelector('#main img') !== null)) fail('markup in the command became an element');
      const shown = async (loc, what) => {
        const text = await loc.textContent();
        for (const c of hidden) {
          if (text.includes(c)) fail(`${what} shows U+${c.codePointAt(0).toString(16).toUpperCase()} as is: ${JSON.stringify(text)}`);
        }
        for (const m of ['\\u202E', '\\u200B', '\\u2066', '\\u3164', '\\u2028', '\\uFEFF']) {
          if (!text.includes(m)) fail(`${what} has no marker ${m}: ${JSON.stringify(text)}`);
        }
        if (!text.includes('rm -rf build') || !text.includes('<img src=x onerror=')) fail(`${what} lacks part of the command: ${JSON.stringify(text)}`);
      };
      await shown(card14.locator('pre.json').first(), 'the arguments on the approval card');
      // What is shown for a decision reads in the order it runs: no reordering by the
      // text's own direction.
      // The reason quotes the command too.
      for (const [sel, what] of [['pre.json', 'the arguments'], ['.reason', 'the reason'], ['header .title', 'the tool name'], ['ul.rules code', 'a suggested rule']]) {
        if (sel === 'ul.rules code' && asked14.approval.suggestions.length === 0) continue;
        const bidi = await card14.locator(sel).first().evaluate((el) => getComputedStyle(el).unicodeBidi);
        if (bidi !== 'bidi-override') fail(`${what} is shown with unicode-bidi ${bidi}, not bidi-override`);
      }
      for (const rule of asked14.approval.suggestions) {
        if (hidden.some((c) => rule.includes(c))) {
          const li = card14.locator('ul.rules li code').nth(asked14.approval.suggestions.indexOf(rule));
          const t = await li.textContent();
          if (hidden.some((c) => t.includes(c))) fail(`a suggested rule shows an invisible character as is: ${JSON.stringify(t)}`);
        }
      }
      await page.goto(`${base}/ui/#/calls/${asked14.call_id}`);
      const panel = page.locator(`article.call[data-call-id="${asked14.call_id}"]`);
      await panel.waitFor();
      await shown(panel.locator('details pre.json'), 'the arguments in the call panel');
      if (await page.evaluate(() => window.__pwned !== undefined || document.querySelector('#main img') !== null)) fail('markup in the command became an element');
    } finally {
      await api('POST', `/v1/approvals/${asked14.approval.id}/decision`, { decision: 'deny', reason: 'end of scenario 14' });
      await within(held.done, 'the hostile call');
    }
  });
  // --- 15. a request that arrives under the approver's pointer ---------------------------
  // New requests go on top and push the others down: a request the model sends while
  // the approver aims at Approve on another one takes that place, and the click decides
  // it. For a moment after the list moves its buttons must take no clicks.
  await scenario(15, 'a new request does not take a click aimed at another', async () => {
    const s15 = await api('POST', '/v1/sessions', { available_tools: ['execute_command'] });
    const first = startCalls(s15.id, { calls: [{ id: 'aimed', name: 'execute_command', arguments: { command: 'rm -rf build1' } }] });
    const askedA = await first.waitFor((e) => e.type === 'approval_required', 'approval_required (aimed)');
    let second;
    let askedB;
    try {
      await page.goto(`${base}/ui/#/approvals`);
      const cardA = page.locator(`article.approval[data-approval-id="${askedA.approval.id}"]`);
      await cardA.waitFor();
      const approveA = cardA.getByRole('button', { name: 'Approve', exact: true });
      await approveA.waitFor();
      const box = await approveA.boundingBox();
      // Whether a new card's Approve takes a click the moment the card is inserted.
      await page.evaluate(() => {
        window.__arrivals = [];
        new MutationObserver((records) => {
          for (const r of records) {
            for (const n of r.addedNodes) {
              if (n.matches?.('article.approval')) {
                const b = [...n.querySelectorAll('button')].find((x) => x.textContent === 'Approve');
                window.__arrivals.push({ id: n.dataset.approvalId, pointerEvents: getComputedStyle(b).pointerEvents });
              }
            }
          }
        }).observe(document.getElementById('approvals'), { childList: true });
      });
      second = startCalls(s15.id, { calls: [{ id: 'sneaky', name: 'execute_command', arguments: { command: 'rm -rf build2' } }] });
      askedB = await second.waitFor((e) => e.type === 'approval_required', 'approval_required (sneaky)');
      await page.waitForFunction((id) => window.__arrivals.some((a) => a.id === id), askedB.approval.id, { timeout: 20000 });
      await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
      const arrival = (await page.evaluate(() => window.__arrivals)).find((a) => a.id === askedB.approval.id);
      // A decision goes out on the click: a short wait shows one if the click was taken.
      await page.waitForTimeout(500);
      const b = await api('GET', `/v1/approvals/${askedB.approval.id}`);
      const wrong = [];
      if (b.status !== 'pending') wrong.push(`a click aimed at one request decided the one that arrived under it (${b.status})`);
      if (arrival.pointerEvents !== 'none') wrong.push(`a request that just arrived takes clicks at once (pointer-events ${arrival.pointerEvents})`);
      if (wrong.length) fail(wrong.join('; '));
      // Once the list is still, the buttons work.
      await page.locator(`article.approval[data-approval-id="${askedB.approval.id}"]`).getByRole('button', { name: 'Deny' }).click();
      await page.locator(`article.decided[data-approval-id="${askedB.approval.id}"]`).waitFor();
    } finally {
      for (const asked of [askedA, askedB]) {
        if (asked) await api('POST', `/v1/approvals/${asked.approval.id}/decision`, { decision: 'deny', reason: 'end of scenario 15' }).catch(() => {});
      }
      await within(first.done, 'the aimed call');
      if (second) await within(second.done, 'the sneaky call');
    }
  });
  // --- 17. a bad fragment --------------------------------------------------------------
  // decodeURIComponent throws on a malformed % escape, and a fragment naming an
  // Object property (#/constructor) found a "page" with no mount: either left a blank
  // page with an error. The fragment is ignored and a page shows.
  await scenario(17, 'a bad fragment shows a page', async () => {
    for (const [hash, ready, navPage] of [
      ['#/calls/tc_%E0%A4%A', '#recent-calls', 'calls'],
      ['#/calls/%', '#recent-calls', 'calls'],
      ['#/%E0%A4%A', '#approvals', 'approvals'],
      ['#/constructor', '#approvals', 'approvals'],
      ['#/__proto__/x', '#approvals', 'approvals'],
    ]) {
      await page.goto(`${base}/ui/${hash}`);
      await page.reload();
      await page.locator(ready).waitFor({ timeout: 20000 })
        .catch(() => fail(`${hash}: the page shows no ${ready}; problems: ${problems.join('; ')}`));
      const nav = await page.locator('#nav a.active').getAttribute('data-page');
      if (nav !== navPage) fail(`${hash}: the navigation shows ${nav}, want ${navPage}`);
      checkClean();
    }
  });
  if (failures.length) fail(failures.join('\n'));
  console.log(JSON.stringify(summary));
} catch (err) {
  await page.screenshot({ path: join(artifacts, 'failure.png'), fullPage: true }).catch(() => {});
  console.error(`FAIL at ${currentStep}: ${err.stack || err}`);
  if (problems.length) console.error(problems.join('\n'));
  process.exitCode = 1;
} finally {
  await context.close().catch(() => {});
  rmSync(userDataDir, { recursive: true, force: true });
}
