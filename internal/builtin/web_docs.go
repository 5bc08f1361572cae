package builtin

// The manuals of the web tools, returned on demand (Spec.Documentation).

const webFetchDoc = `web_fetch fetches one URL with HTTP GET and returns its content as text.

Arguments
- url (required): an absolute http:// or https:// URL. Other schemes (file:, ftp:,
  gopher:, data: …) are refused.
- format: what to make of an HTML page. "markdown" (the default) converts it to
  Markdown, with links made absolute and the page title kept; "text" returns only its
  visible text; "raw" returns the HTML source. Plain text, JSON, XML and other text
  types are returned as they are in every format.
- max_bytes: read at most this many bytes of the body (after decompression); the
  schema states the default and the maximum. A longer body is cut, and the result
  says so ("Truncated: …", structured "truncated": true).
- timeout_ms: the time limit for the whole call, redirects and body included.

Result
The text starts with header lines: URL (the final one, after redirects), Requested
(the URL asked for, when there were redirects), Status, Content-Type, Title (HTML),
Truncated (when cut); then a blank line and the content. Structured content (the body
is only in the text):
  {"url","final_url","status","content_type","bytes","truncated","title","format","redirects"}
Text is decoded from its charset (header, byte order mark or <meta>) to UTF-8.

Errors
- denied: the URL or an address its host resolves to is not public: loopback,
  private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local and cloud metadata
  (169.254/16, fe80::/10, metadata.google.internal …), CGNAT (100.64/10), unspecified,
  multicast, broadcast and other reserved ranges, in any spelling (IPv4-mapped IPv6,
  decimal or hexadecimal numbers). The check is made on every address actually
  connected to, on every redirect. The operator may allow some internal hosts.
- failed: an HTTP status other than 2xx (the result shows the status and the start of
  the body); a binary content type (images, PDF, archives, octet streams; the result
  names the type and size); more redirects than the server allows (5 by default);
  a connection or DNS failure.
- timeout: no complete answer within the time limit.
- cancelled: the call was cancelled.

Requests carry the server's User-Agent and no cookies or credentials. Connections are
not shared between calls.`

const webSearchDoc = `web_search sends a query to the web search provider the operator configured
(a SearXNG instance or the Brave Search API) and returns the top results.

Arguments
- query (required): the search terms, at most 400 characters.
- max_results: how many results to return; the schema states the default and the
  maximum.

Result
A numbered list, one result each: title, URL and snippet (HTML removed). Structured
content: {"query","provider","results":[{"title","url","snippet"}]}. No results is not
an error. Read a result's page with web_fetch.

Errors
- unavailable: the provider refused the request (bad API key, rate limit, SearXNG
  without the JSON format enabled), answered with another error status, could not be
  reached, or sent an answer that is not its JSON format.
- timeout: the provider did not answer within the server's time limit.
- cancelled: the call was cancelled.`
