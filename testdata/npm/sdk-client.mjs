// The official TypeScript SDK's MCP client, for the Go tests of the daemon's /mcp
// endpoint: `node sdk-client.mjs URL [TOOL [ARGS_JSON]]` connects over streamable
// HTTP, lists the tools (the SDK compiles their output schemas then) and calls TOOL
// (checking its result against that schema, as the SDK does), and prints one JSON
// line: {"tools":[…],"result":{…}}, with "error" set to the message of whatever the
// SDK threw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, name, args] = process.argv.slice(2);
const client = new Client({ name: "toolserverd-test-sdk", version: "0" });
const out = {};
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  out.tools = (await client.listTools()).tools;
  if (name) {
    out.result = await client.callTool({ name, arguments: JSON.parse(args ?? "{}") });
  }
} catch (err) {
  out.error = String(err?.message ?? err);
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
