// The official TypeScript SDK's MCP client, for the Go tests of the daemon's /mcp
// endpoint: `node sdk-client.mjs URL [TOOL [ARGS_JSON]]` connects over streamable
// HTTP, lists the tools (the SDK compiles their output schemas then) and calls TOOL
// (checking its result against that schema, as the SDK does), and prints one JSON
// line: {"tools":[…],"result":{…}}, with "error" set to the message of whatever the
// SDK threw. With the environment variable SDK_PROGRESS=1 the call asks for progress
// (the SDK then sends a progressToken) and "progress" counts the notifications.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, name, args] = process.argv.slice(2);
const client = new Client({ name: "toolserverd-test-sdk", version: "0" });
const out = {};
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  out.tools = (await client.listTools()).tools;
  if (name) {
    const opts = process.env.SDK_PROGRESS === "1"
      ? { onprogress: () => { out.progress = (out.progress ?? 0) + 1; }, resetTimeoutOnProgress: true }
      : undefined;
    out.result = await client.callTool({ name, arguments: JSON.parse(args ?? "{}") }, undefined, opts);
  }
} catch (err) {
  out.error = String(err?.message ?? err);
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
