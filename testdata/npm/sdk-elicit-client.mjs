// The official TypeScript SDK's MCP client as a desktop assistant that asks its user
// when the server elicits: `node sdk-elicit-client.mjs URL KEY TOOL ARGS_JSON` connects
// with form elicitation declared, calls TOOL, and prints a JSON line for each thing
// that happens: {"event":"elicit","message":…} when the server asks (the "dialog"
// stays open: nobody answers), {"event":"elicit_cancelled"} when the server cancels
// that request (notifications/cancelled), {"event":"result","result":…} or
// {"event":"error","error":…} for the call, and {"event":"done"} once the call is over
// and no dialog is open, or ELICIT_WAIT_MS (default 30000) after the call ended with one
// still open.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, key, name, args] = process.argv.slice(2);
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");
let open = 0;
let closed = () => {};
const client = new Client({ name: "toolserverd-test-elicit", version: "0" }, { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, (req, extra) => new Promise((resolve) => {
  open++;
  emit({ event: "elicit", message: req.params.message });
  extra.signal.addEventListener("abort", () => {
    open--;
    emit({ event: "elicit_cancelled" });
    resolve({ action: "cancel" });
    closed();
  });
}));
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
  const result = await client.callTool({ name, arguments: JSON.parse(args ?? "{}") }, undefined,
    { timeout: 600000, resetTimeoutOnProgress: true });
  emit({ event: "result", result });
} catch (err) {
  emit({ event: "error", error: String(err?.message ?? err) });
}
if (open > 0) {
  await new Promise((resolve) => { closed = () => open === 0 && resolve(); setTimeout(resolve, Number(process.env.ELICIT_WAIT_MS ?? 30000)); });
}
emit({ event: "done" });
process.exit(0);
