// The official TypeScript SDK's MCP client set up the way OAuth-capable desktop clients
// (mcp-remote, the MCP Inspector) set it up: with an OAuth client provider, so that a
// 401 starts the SDK's OAuth discovery and dynamic client registration instead of
// failing. `node sdk-oauth-client.mjs URL [KEY]` connects (sending Authorization:
// Bearer KEY when given) and prints one JSON line: {"error": the message of what the
// SDK threw} or {"connected": true}. It never opens a browser: a redirect to an
// authorization page is an error here.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key] = process.argv.slice(2);
let clientInfo, tokens, verifier;
const provider = {
  get redirectUrl() { return "http://127.0.0.1:1/oauth/callback"; },
  get clientMetadata() {
    return { redirect_uris: [this.redirectUrl], token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], client_name: "toolserverd-test" };
  },
  clientInformation: () => clientInfo,
  saveClientInformation: (info) => { clientInfo = info; },
  tokens: () => tokens,
  saveTokens: (t) => { tokens = t; },
  redirectToAuthorization: (u) => { throw new Error("the client would open a browser at " + u); },
  saveCodeVerifier: (v) => { verifier = v; },
  codeVerifier: () => verifier,
};
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const client = new Client({ name: "toolserverd-test-oauth", version: "0" });
const out = {};
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, requestInit: { headers } }));
  out.connected = true;
} catch (err) {
  out.error = String(err?.message ?? err);
}
await client.close().catch(() => {});
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
