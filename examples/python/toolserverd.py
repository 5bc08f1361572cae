#!/usr/bin/env python3
"""A toolserverd client for agent backends written in Python: standard library only.

    ts = ToolServer("http://127.0.0.1:8080", api_key)
    session = ts.create_session(["execute_command", "read_file"])
    tools = ts.tools(session, "openai")        # give these to the model as tools=
    system += ts.prompt(session)               # tool hints and skills, for the system prompt
    # ... the model answers with an assistant message holding tool_calls ...
    messages += ts.run(session, assistant["tool_calls"], "openai")
    # Anthropic: blocks = [b for b in assistant["content"] if b["type"] == "tool_use"]
    #            messages += turn(ts.run(session, blocks, "anthropic"), "anthropic")

run() forwards the model's calls untouched and returns their messages, one per call,
in the order of the calls; turn() puts them in the shape the provider wants after the
assistant's turn (Anthropic and Gemini want one user message holding every result). A tool that failed (bad
arguments, a denied command, a dead MCP server) is a message too, with is_error set in
the stream, so the model can act on it; only a problem with the request itself (no such
session, a bad key) raises ToolServerError. If the connection breaks before the stream
says "done", the batch is sent again with "resume": true: calls the daemon already has
are not run a second time, their recorded results come back instead. So it is when the
daemon stops (a redeploy) while a call waits for a person's approval: that call's
message is marked goes_on, and the batch is followed again, with growing pauses, until
the restarted daemon answers and the call has its result.

Run as a script, it reads an assistant message on stdin (OpenAI with tool_calls,
Anthropic with tool_use blocks, or a Gemini model Content with functionCall parts), runs
its calls in a new session with the tools they name, and prints, a line each, the
messages to append to the conversation: a tool message per call for OpenAI, one user
message with every tool_result block (or functionResponse part) for Anthropic and Gemini. TOOLSERVER_URL (default http://127.0.0.1:8080) and TOOLSERVER_API_KEY say where
(no key for a daemon serving without keys, TOOLSERVER_AUTH_UNAUTHENTICATED=true).
"""

import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid


class ToolServerError(Exception):
    """The daemon refused a request: status is the HTTP status, code its error code."""

    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class ToolServer:
    def __init__(self, url, api_key, timeout=600):
        self.url, self.api_key, self.timeout = url.rstrip("/"), api_key, timeout

    def _open(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if self.api_key:  # none for a daemon serving without keys (auth.unauthenticated)
            req.add_header("Authorization", "Bearer " + self.api_key)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as e:
            try:
                err = json.load(e)["error"]
            except (ValueError, KeyError, TypeError):
                err = {"code": "http_error", "message": e.reason}
            raise ToolServerError(e.code, err.get("code"), err.get("message")) from None

    def _json(self, method, path, body=None):
        with self._open(method, path, body) as resp:
            return json.load(resp)

    def create_session(self, tools, **spec):
        """Creates a session that may use tools; returns its id. Names the daemon does
        not know are dropped and reported as warnings, printed here to stderr."""
        spec["available_tools"] = list(tools)
        session = self._json("POST", "/v1/sessions", spec)
        for w in session.get("warnings") or []:
            print("toolserverd:", w, file=sys.stderr)
        return session["id"]

    def tools(self, session, fmt="openai", query=None, limit=None):
        """The session's tool schemas in a provider's format (openai, openai_responses,
        anthropic, gemini, mcp), sorted by name. With query (the user's latest
        message), the best limit of them (default a dozen) plus tool_expand_tools: the
        turn's calls are held to those until the model expands others; query=""
        lifts that narrowing (every tool the session allows). A tool the format cannot
        carry (a provider's hosted tool, a name Gemini refuses) is left out, and named
        here on stderr with why."""
        params = {"format": fmt}
        if query is not None:
            params["query"] = query
        if limit:
            params["limit"] = str(limit)
        path = f"/v1/sessions/{session}/tools?" + urllib.parse.urlencode(params)
        listing = self._json("GET", path)
        for o in listing.get("omitted") or []:
            why = o.get("reason") or "a tool " + " and ".join(o.get("hosted_by") or ["the provider"]) + " runs"
            print(f"toolserverd: {o['name']} is left out of format {fmt}: {why}", file=sys.stderr)
        return listing["tools"]

    def prompt(self, session):
        """The session's system-prompt fragment (tool hints, and the skills it may open
        with their descriptions) to add to the model's system prompt."""
        return self._json("GET", f"/v1/sessions/{session}/prompt")["prompt"]

    def events(self, session, calls, fmt="openai", resume=False):
        """Runs calls and yields the stream's events (dicts) as they arrive."""
        # on_disconnect continue: calls go on if the connection breaks, so that the
        # resumed request finds them running or done instead of cancelled.
        body = {"calls": calls, "on_disconnect": "continue"}
        if resume:
            body["resume"] = True
        with self._open("POST", f"/v1/sessions/{session}/tool-calls?format={fmt}", body) as resp:
            for line in resp:
                if line.strip():
                    yield json.loads(line)

    def run(self, session, calls, fmt="openai", on_event=None):
        """Runs the model's calls (OpenAI tool_calls, Responses function_call items,
        Anthropic tool_use blocks or Gemini functionCall parts, as the model gave them)
        and returns their messages in the order of the calls.
        on_event, if given, sees every event (tool_progress for a UI, approval_required
        to tell a person, ...)."""
        # Messages come as calls end, named by tool_call_id. A Gemini call the model
        # gave no id is sent with one of the client's, so that its message is found
        # whatever the order; the id is taken out of its functionResponse again.
        calls, own = with_ids(calls, fmt)
        results, resume = {}, False
        for attempt in range(10):
            if attempt > 1:  # the daemon may be restarting (a redeploy): give it time
                time.sleep(min(2 ** (attempt - 2), 10))
            done, goes_on = False, []
            try:
                for ev in self.events(session, calls, fmt, resume):
                    if on_event:
                        on_event(ev)
                    if ev["type"] == "message":
                        results[ev["tool_call_id"]] = ev["message"]
                        if ev.get("goes_on"):
                            goes_on.append(ev["tool_call_id"])
                    elif ev["type"] == "done":
                        done = True
            except (ConnectionError, http.client.HTTPException, urllib.error.URLError, TimeoutError) as e:
                print("toolserverd: the stream broke:", e, file=sys.stderr)
            except ToolServerError as e:
                if e.status not in (502, 503, 504):
                    raise
                print("toolserverd: the daemon is not answering:", e, file=sys.stderr)
            if done and not goes_on:
                break
            if goes_on:
                # The daemon stopped while these calls waited for a person's decision
                # (or an answer); they go on. Their messages only say so: follow them.
                print("toolserverd: the daemon stopped while", ", ".join(goes_on),
                      "waited; following the batch again once it answers", file=sys.stderr)
            else:
                print("toolserverd: the stream ended before done; resuming the batch", file=sys.stderr)
            resume = True
        else:
            raise ToolServerError(0, "incomplete", "the batch has no result after ten tries: its stream "
                                  "broke, or the daemon stopped while a call waited, every time")
        out = []
        for i in map(call_id, calls):
            if i in results:
                msg = results[i]
                if i in own and isinstance(msg.get("functionResponse"), dict):
                    msg["functionResponse"].pop("id", None)
                out.append(msg)
        return out

def call_id(call):
    """The id of a model's call: OpenAI tool_calls, Responses function_call items,
    Anthropic tool_use blocks and Gemini functionCall parts ("" when it has none)."""
    fc = call.get("functionCall")
    if isinstance(fc, dict):
        return fc.get("id") or ""
    if call.get("type") == "function_call":
        # A Responses item's id names the item; it is answered under its call_id.
        return call.get("call_id") or ""
    return call.get("id") or call.get("call_id") or ""


def with_ids(calls, fmt="gemini"):
    """calls with an id of the client's on each Gemini call (a functionCall part, or
    the bare functionCall) that has none, and those ids. The caller's calls are not
    changed."""
    out, own = [], set()
    for c in calls:
        fc = c.get("functionCall") if isinstance(c, dict) else None
        # A bare FunctionCall, as the daemon reads one: args and no arguments, or, in
        # format gemini, no type either (a function without parameters has no args).
        bare = (isinstance(c, dict) and "name" in c and not c.get("id") and "arguments" not in c and "input" not in c
                and ("args" in c or fmt == "gemini" and "type" not in c))
        if isinstance(fc, dict) and not fc.get("id") or bare:
            i = "tsc_" + uuid.uuid4().hex
            c = dict(c, functionCall=dict(fc, id=i)) if isinstance(fc, dict) else dict(c, id=i)
            own.add(i)
        out.append(c)
    return out, own


def turn(messages, fmt="openai"):
    """The messages to append to the conversation after an assistant's turn, from run()'s
    messages for its calls. OpenAI (tool messages) and Responses (function_call_output
    items) take them as they are. Anthropic wants every tool_result block of a turn in
    one user message, and Gemini every functionResponse part in one user Content: the
    results of a turn's calls are merged into that one message, in the calls' order."""
    if fmt == "anthropic":
        return [{"role": "user", "content": [b for m in messages for b in m["content"]]}] if messages else []
    if fmt == "gemini":
        return [{"role": "user", "parts": messages}] if messages else []
    return list(messages)


def calls_of(assistant):
    """The format, calls and tool names of an assistant message: OpenAI's tool_calls,
    Anthropic's tool_use content blocks or a Gemini Content's functionCall parts."""
    if isinstance(assistant.get("tool_calls"), list):
        calls = assistant["tool_calls"]
        return "openai", calls, [c["function"]["name"] for c in calls]
    if isinstance(assistant.get("content"), list):
        calls = [b for b in assistant["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        return "anthropic", calls, [c["name"] for c in calls]
    if isinstance(assistant.get("parts"), list):
        calls = [p for p in assistant["parts"] if isinstance(p, dict) and isinstance(p.get("functionCall"), dict)]
        return "gemini", calls, [c["functionCall"]["name"] for c in calls]
    raise SystemExit("toolserverd.py: stdin holds no OpenAI tool_calls, Anthropic tool_use blocks "
                     "or Gemini functionCall parts")


def main():
    fmt, calls, names = calls_of(json.load(sys.stdin))
    if not calls:
        return
    ts = ToolServer(os.environ.get("TOOLSERVER_URL", "http://127.0.0.1:8080"), os.environ.get("TOOLSERVER_API_KEY", ""))
    session = ts.create_session(sorted(set(names)))

    def show(ev):
        if ev["type"] == "tool_progress" and ev["text"]:
            sys.stderr.write(ev["text"])
        elif ev["type"] == "approval_required":
            print("toolserverd: waiting for approval:", ev["approval"]["reason"], file=sys.stderr)

    for message in turn(ts.run(session, calls, fmt, on_event=show), fmt):
        print(json.dumps(message))


if __name__ == "__main__":
    main()
