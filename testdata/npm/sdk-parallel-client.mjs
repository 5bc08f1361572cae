// The official TypeScript SDK's MCP client as a desktop assistant that issues several
// calls at once: `node sdk-parallel-client.mjs URL TOOL ARGS_JSON...` connects over
// streamable HTTP and calls TOOL once for each ARGS_JSON, all at the same time, each
// asking for progress, and prints one JSON line:
//   {"capabilities":{…the server's, as its initialize result has them…},
//    "calls":[{"progress":["message",…],"result":{…},"error":"…","ms":…},…],
//    "streams":[{"id":…,"progress_tokens":[…],"response":true},…],
//    "errors":["…"], "ms":…}
// calls are in the order of the arguments, with the messages of the progress
// notifications the SDK handed to that call's onprogress; streams are the event
// streams of the POSTs of the calls (as read off the wire): the JSON-RPC id of the
// request each answers, the progressToken of each notifications/progress it carried
// (the SDK makes a request's progressToken its id), and whether it carried the
// response; errors are what the SDK reported through onerror (a response for an
// unknown message id, say). With CANCEL_AFTER_PROGRESS=1 the first call is cancelled
// (the SDK sends notifications/cancelled) when its first progress notification
// arrives; the client then waits SETTLE_MS (default 1000) for anything the server
// still sends before it closes. With PROGRESS_FILE set, each progress message is
// also appended to that file as it arrives, one JSON line {"call":i,"message":…},
// so that a test can wait for a note while the calls run.
import { appendFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, name, ...argSets] = process.argv.slice(2);
const out = { calls: [], streams: [], errors: [] };

// Reads the SSE stream of each POST that carries a request, next to the SDK.
async function watch(id, body) {
  const s = { id, progress_tokens: [], response: false };
  out.streams.push(s);
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch {
      return;
    }
    if (chunk.done) return;
    buf += chunk.value;
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (!data) continue;
      let msg;
      try {
        msg = JSON.parse(data);
      } catch {
        continue;
      }
      if (msg.method === "notifications/progress") s.progress_tokens.push(msg.params.progressToken);
      if (msg.id === id && msg.method === undefined) s.response = true;
    }
  }
}

async function tappingFetch(input, init) {
  const res = await fetch(input, init);
  let msg;
  try {
    msg = init?.method === "POST" ? JSON.parse(init.body) : undefined;
  } catch {}
  if (msg?.method === "initialize") {
    // The result as sent (the SDK's getServerCapabilities drops what its schema lacks).
    const text = await res.clone().text();
    const data = text.trimStart().startsWith("{") ? text : text.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5)).join("");
    try {
      out.capabilities = JSON.parse(data).result.capabilities;
    } catch {}
  }
  if (msg?.method !== "tools/call" || !res.body || !(res.headers.get("content-type") ?? "").includes("text/event-stream")) {
    return res;
  }
  const [mine, theirs] = res.body.tee();
  watch(msg.id, mine);
  return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
}

const client = new Client({ name: "toolserverd-test-parallel", version: "0" });
client.onerror = (err) => out.errors.push(String(err?.message ?? err));
const began = Date.now();
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: tappingFetch }));
  await Promise.all(argSets.map(async (args, i) => {
    const call = { progress: [] };
    out.calls[i] = call;
    const abort = new AbortController();
    const t0 = Date.now();
    try {
      call.result = await client.callTool({ name, arguments: JSON.parse(args) }, undefined, {
        signal: abort.signal,
        timeout: 120000,
        resetTimeoutOnProgress: true,
        onprogress: (p) => {
          call.progress.push(p.message ?? "");
          if (process.env.PROGRESS_FILE) appendFileSync(process.env.PROGRESS_FILE, JSON.stringify({ call: i, message: p.message ?? "" }) + "\n");
          if (i === 0 && process.env.CANCEL_AFTER_PROGRESS === "1") abort.abort("cancelled by the test");
        },
      });
    } catch (err) {
      call.error = String(err?.message ?? err);
    }
    call.ms = Date.now() - t0;
  }));
  out.ms = Date.now() - began;
  if (process.env.CANCEL_AFTER_PROGRESS === "1") {
    await new Promise((resolve) => setTimeout(resolve, Number(process.env.SETTLE_MS ?? 1000)));
  }
} catch (err) {
  out.error = String(err?.message ?? err);
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
