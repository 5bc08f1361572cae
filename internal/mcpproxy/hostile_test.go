package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

const hostileServerEnv = "TOOLSERVERD_TEST_HOSTILE_MCP"

// serveHostileStdio is a stdio MCP server written by hand (raw JSON-RPC lines, no
// SDK) that misbehaves as its mode says. Tests start the test binary itself as it.
//
//   - banner: writes a line on stderr as it starts.
//   - deaf: answers the handshake and tools/list, then never reads its stdin again.
//   - bigline: answers tools/call "big" with one line of 200 MiB.
func serveHostileStdio(mode string) {
	in := bufio.NewReader(os.Stdin)
	pages, lists := 0, 0
	var hung, cancelled []string // ids of the calls of "hang", and the ids cancelled
	var writeMu sync.Mutex
	if mode == "banner" {
		// As many servers do: a line on stderr at start, then quiet.
		fmt.Fprintln(os.Stderr, "hostile MCP server v1.0 listening on stdio")
	}
	if mode == "stderrflood" {
		// Lines, and then a line without end, as fast as the pipe takes them.
		go func() {
			line := []byte(strings.Repeat("noise ", 20) + "\n")
			for range 200000 {
				if _, err := os.Stderr.Write(line); err != nil {
					return
				}
			}
			chunk := []byte(strings.Repeat("z", 64<<10))
			for {
				if _, err := os.Stderr.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		writeMu.Lock()
		defer writeMu.Unlock()
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	tools := []map[string]any{
		{"name": "echo", "inputSchema": map[string]any{"type": "object"}},
		{"name": "big", "inputSchema": map[string]any{"type": "object"}},
		{"name": "lists", "inputSchema": map[string]any{"type": "object"}},
		{"name": "asks_client", "inputSchema": map[string]any{"type": "object"}},
		{"name": "wrong_id", "inputSchema": map[string]any{"type": "object"}},
		{"name": "progress_flood", "inputSchema": map[string]any{"type": "object"}},
		{"name": "hang", "inputSchema": map[string]any{"type": "object"}},
		{"name": "cancelled", "inputSchema": map[string]any{"type": "object"}},
	}
	for name := range hostileResults {
		tools = append(tools, map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}})
	}
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			os.Exit(0)
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
				Meta      struct {
					ProgressToken any `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(line), &req) != nil {
			continue
		}
		if req.Method == "notifications/cancelled" {
			var n struct {
				Params struct {
					RequestID json.RawMessage `json:"requestId"`
				} `json:"params"`
			}
			_ = json.Unmarshal([]byte(line), &n)
			cancelled = append(cancelled, string(n.Params.RequestID))
			continue
		}
		if len(req.ID) == 0 {
			continue
		}
		answer := func(result any) {
			send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		}
		switch req.Method {
		case "initialize":
			if mode == "initerr" {
				send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32000, "message": "no: " + strings.Repeat("e", 1<<20)}})
				continue
			}
			answer(map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "hostile-" + mode, "version": "1"}})
		case "tools/list":
			if mode == "oddlines" {
				// Lines that are JSON but odd JSON-RPC, before the answer.
				writeMu.Lock()
				for _, l := range oddLines() {
					out.WriteString(l + "\n")
				}
				out.Flush()
				writeMu.Unlock()
			}
			lists++
			if mode == "storm" && lists == 1 {
				go func() {
					for {
						writeMu.Lock()
						out.WriteString(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n")
						out.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"spam"}}` + "\n")
						err := out.Flush()
						writeMu.Unlock()
						if err != nil {
							os.Exit(0)
						}
					}
				}()
			}
			switch mode {
			case "tools":
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"tools":` + hostileTools() + "}}\n")
				out.Flush()
				continue
			case "fatpages":
				// Pages of one tool with a description of 8 MiB, without end.
				pages++
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"tools":[{"name":"t` + strconv.Itoa(pages) + `","description":"` +
					strings.Repeat("d", 8<<20) + `","inputSchema":{"type":"object"}}],"nextCursor":"c` + strconv.Itoa(pages) + `"}}` + "\n")
				out.Flush()
				continue
			case "pages":
				// Pages of 1,000 tools, each with a cursor never seen before.
				pages++
				var page []string
				for i := range 1000 {
					page = append(page, `{"name":"t`+strconv.Itoa(pages)+`_`+strconv.Itoa(i)+`","inputSchema":{"type":"object"}}`)
				}
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"tools":[` + strings.Join(page, ",") + `],"nextCursor":"c` + strconv.Itoa(pages) + `"}}` + "\n")
				out.Flush()
				continue
			}
			answer(map[string]any{"tools": tools})
			switch mode {
			case "crashsoon":
				// Up a moment after each connect, then dead: a crash loop.
				go func() {
					time.Sleep(300 * time.Millisecond)
					os.Exit(2)
				}()
			case "deaf":
				select {}
			case "reqflood":
				// Requests without end, and never a read of the answers.
				for i := 0; ; i++ {
					writeMu.Lock()
					out.WriteString(`{"jsonrpc":"2.0","id":"f` + strconv.Itoa(i) + `","method":"ping"}` + "\n")
					err := out.Flush()
					writeMu.Unlock()
					if err != nil {
						os.Exit(0)
					}
				}
			}
		case "ping":
			answer(map[string]any{})
		case "tools/call":
			switch req.Params.Name {
			case "big":
				out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"content":[{"type":"text","text":"`)
				chunk := strings.Repeat("x", 1<<20)
				for range 200 {
					out.WriteString(chunk)
				}
				out.WriteString(`"}]}}` + "\n")
				out.Flush()
			case "progress_flood":
				// 16 MiB of progress for its own call, then the answer.
				msg := strings.Repeat("p", 16<<10)
				for range 1000 {
					send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
						"params": map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "message": msg}})
				}
				answer(map[string]any{"content": []map[string]any{{"type": "text", "text": "flooded"}}})
			case "asks_client":
				// Requests of its own before answering; it answers once the client
				// answered them all.
				asked := map[string]bool{}
				for i, m := range []string{"sampling/createMessage", "elicitation/create", "roots/list", "ping", "bogus/method"} {
					id := "srv-" + strconv.Itoa(i)
					asked[id] = true
					send(map[string]any{"jsonrpc": "2.0", "id": id, "method": m, "params": map[string]any{"messages": []any{}, "maxTokens": 10, "message": "?", "requestedSchema": map[string]any{"type": "object"}}})
				}
				var got []string
				for len(asked) > 0 {
					l, err := in.ReadString('\n')
					if err != nil {
						os.Exit(0)
					}
					var r struct {
						ID     string          `json:"id"`
						Result json.RawMessage `json:"result"`
						Error  *struct {
							Message string `json:"message"`
						} `json:"error"`
					}
					if json.Unmarshal([]byte(l), &r) != nil || !asked[r.ID] {
						continue
					}
					delete(asked, r.ID)
					if r.Error != nil {
						got = append(got, r.ID+": error "+r.Error.Message)
					} else {
						got = append(got, r.ID+": "+string(r.Result))
					}
				}
				answer(map[string]any{"content": []map[string]any{{"type": "text", "text": strings.Join(got, "\n")}}})
			case "wrong_id":
				send(map[string]any{"jsonrpc": "2.0", "id": "not-yours", "result": map[string]any{"content": []any{}}})
			case "hang":
				// Never answered; the id is kept for "cancelled".
				hung = append(hung, string(req.ID))
			case "cancelled":
				answer(map[string]any{"content": []map[string]any{{"type": "text", "text": "hung " + strings.Join(hung, ",") + "; cancelled " + strings.Join(cancelled, ",")}}})
			case "lists":
				answer(map[string]any{"content": []map[string]any{{"type": "text", "text": strconv.Itoa(lists)}}})
			default:
				if raw, ok := hostileResults[req.Params.Name]; ok {
					out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,` + raw + "}\n")
					out.Flush()
					continue
				}
				b, _ := json.Marshal(req.Params.Arguments)
				answer(map[string]any{"content": []map[string]any{{"type": "text", "text": "echo " + string(b)}}})
			}
		}
	}
}

func hostileServer(t *testing.T, name, mode string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Name: name, Transport: TransportStdio, Command: exe, Enabled: true,
		Env: map[string]string{hostileServerEnv: mode}}
}

// TestStdioServerStopsReading: a server that stops reading its stdin blocks the
// write of a call's arguments once the pipe is full. The call ends at its deadline,
// the health check still runs (and finds the server dead), and Stop returns.
func TestStdioServerStopsReading(t *testing.T) {
	t.Parallel()
	cfg := hostileServer(t, "deaf", "deaf")
	cfg.CallTimeout = time.Second
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: 300 * time.Millisecond, MaxBackoff: time.Hour, MinBackoff: time.Hour})
	h.start(t)
	h.waitState(t, "deaf", StateReady, 30*time.Second)
	pid := h.stdioPid(t, "deaf")

	// More than a pipe holds.
	args := `{"pad":"` + strings.Repeat("p", 1<<20) + `"}`
	start := time.Now()
	res := h.call(t.Context(), t, "mcp__deaf__echo", args, nil)
	if !res.IsError || (res.ErrorKind != tool.KindTimeout && res.ErrorKind != tool.KindUnavailable) {
		t.Fatalf("call to a deaf server: is_error=%v kind=%q (%s)", res.IsError, res.ErrorKind, res.Text())
	}
	t.Logf("call to a deaf server ended after %s (call timeout 1s): %s", time.Since(start), res.Text())
	// Hang guard: a write blocked on the full pipe would hold the call for ever.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("call took %s, want about its 1s timeout", took)
	}
	st := h.waitState(t, "deaf", StateFailed, 10*time.Second)
	t.Logf("deaf server: %s", st.LastError)
	if !eventually(20*time.Second, func() bool { return !processAlive(pid) }) {
		t.Errorf("deaf child %d still alive after it was found dead", pid)
	}
	stopped := make(chan struct{})
	go func() {
		h.m.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop still waiting 10s later on a server that stopped reading its stdin")
	}
}

// hostileResults are the raw answers (after the id) of the hostile server's tools.
var hostileResults = map[string]string{
	"unknown_block":     `"result":{"content":[{"type":"hologram","data":"x"},{"type":"text","text":"ok"}]}`,
	"bad_image":         `"result":{"content":[{"type":"image","data":"!!!not base64!!!","mimeType":"image/png"}]}`,
	"empty_image":       `"result":{"content":[{"type":"text","text":"shot"},{"type":"image","data":"","mimeType":"image/jpeg"}]}`,
	"image_bad_mime":    `"result":{"content":[{"type":"image","data":"aGVsbG8=","mimeType":"text/html"}]}`,
	"invalid_utf8":      "\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\xff\xfeb\"}]}",
	"embedded":          `"result":{"content":[{"type":"resource","resource":{"uri":"file:///x","text":"inside"}},{"type":"resource","resource":{"uri":"file:///b","blob":"!!","mimeType":"application/octet-stream"}}]}`,
	"no_content":        `"result":{}`,
	"null_content":      `"result":{"content":null}`,
	"content_not_array": `"result":{"content":"hello"}`,
	"structured_only":   `"result":{"content":[],"structuredContent":{"a":1}}`,
	"error_result":      `"result":{"isError":true,"content":[{"type":"text","text":"broken widget"}]}`,
	"rpc_invalid":       `"error":{"code":-32602,"message":"bad args"}`,
	"rpc_error":         `"error":{"code":-32000,"message":"boom","data":{"x":1}}`,
	"null_result":       `"result":null`,
	"result_string":     `"result":"hello"`,
	"block_not_object":  `"result":{"content":[1,"two",null]}`,
}

// TestHostileResults: answers a broken server sends for tools/call. None crashes
// anything; each is a result the model can use or an error saying what was wrong.
// Image and audio blocks whose bytes are not base64 never reach the model as such
// (a provider refuses the whole request that carries one).
func TestHostileResults(t *testing.T) {
	t.Parallel()
	cfg := hostileServer(t, "res", "results")
	cfg.CallTimeout = 2 * time.Second
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour})
	h.start(t)
	h.waitState(t, "res", StateReady, 30*time.Second)
	call := func(name string) *tool.Result {
		return h.call(t.Context(), t, "mcp__res__"+name, `{}`, nil)
	}

	res := call("bad_image")
	for _, c := range res.Content {
		if err := c.Validate(); err != nil {
			t.Errorf("bad_image: block %+v is invalid: %v", c, err)
		}
	}
	wantText(t, res, "not valid base64")
	// @playwright/mcp sends a full-page screenshot too large to encode so.
	wantText(t, call("empty_image"), "shot\n[image image/jpeg from the MCP server omitted: its data is empty]")
	wantText(t, call("invalid_utf8"), "a\uFFFD\uFFFDb")
	wantText(t, call("embedded"), "inside")
	wantKind(t, call("rpc_invalid"), tool.KindInvalidArgs)
	// Blocks mcp-go cannot read are kept as text, the others as they are.
	res = call("unknown_block")
	if res.IsError || len(res.Content) != 2 || !strings.Contains(res.Content[0].Text, `"hologram"`) || res.Content[1].Text != "ok" {
		t.Errorf("unknown_block: %+v", res)
	}
	wantText(t, call("block_not_object"), `[a content block the proxy cannot read: "two"]`)
	for _, name := range []string{"no_content", "null_result", "result_string", "content_not_array", "rpc_error"} {
		res := call(name)
		wantKind(t, res, tool.KindFailed)
		if !strings.Contains(res.Text(), "mcp server res failed to run "+name) {
			t.Errorf("%s: %q does not say which server and tool failed", name, res.Text())
		}
	}
	res = call("error_result")
	wantKind(t, res, tool.KindFailed)
	if res.Text() != "broken widget" {
		t.Errorf("error_result: %q", res.Text())
	}
	// The server is still up and answering.
	wantText(t, call("echo"), "echo {}")
}

// hostileTools is the tool list of the hostile server in mode tools.
func hostileTools() string {
	obj := `{"type":"object"}`
	list := []string{
		`{"name":"","inputSchema":` + obj + `}`,
		`{"name":"` + strings.Repeat("n", 10000) + `","inputSchema":` + obj + `}`,
		`{"name":"a b/c..é","inputSchema":` + obj + `}`,
		`{"name":"dup","inputSchema":` + obj + `}`,
		`{"name":"dup","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`,
		`{"name":"schema_string","inputSchema":{"type":"string"}}`,
		`{"name":"schema_bogus_type","inputSchema":{"type":"object","properties":{"a":{"type":"nonsense"}}}}`,
		`{"name":"schema_remote_ref","inputSchema":{"type":"object","properties":{"a":{"$ref":"http://169.254.169.254/x"}}}}`,
		`{"name":"schema_dangling_ref","inputSchema":{"type":"object","properties":{"a":{"$ref":"#/nope"}}}}`,
		`{"name":"schema_self_ref","inputSchema":{"type":"object","properties":{"a":{"$ref":"#"}}}}`,
		`{"name":"schema_bad_regex","inputSchema":{"type":"object","properties":{"a":{"type":"string","pattern":"(("}}}}`,
		`{"name":"schema_not_object","inputSchema":"hello"}`,
		`{"name":"schema_null","inputSchema":null}`,
		`{"name":"schema_missing"}`,
		`{"name":"schema_array_type","inputSchema":{"type":["object","null"]}}`,
		`{"name":"huge_description","description":"` + strings.Repeat("d", 1<<20) + `","inputSchema":` + obj + `}`,
		`{"name":"not_a_string_name_next","inputSchema":` + obj + `}`,
		`{"name":42,"inputSchema":` + obj + `}`,
		`{"name":"ok","inputSchema":` + obj + `}`,
		`{"name":"tree","inputSchema":{"type":"object","properties":{"root":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}},"v":{"anyOf":[{"type":"string"},{"type":"number"}]}}}}}}`,
		`{"name":"schema_bomb","inputSchema":{"type":"object","properties":{"a":{"$ref":"#/$defs/L0"}},"$defs":{` + schemaBomb(30) + `}}}`,
		`{"name":"schema_anchor_bomb","inputSchema":{"type":"object","properties":{"a":{"$ref":"#L0"}},"$defs":{` + anchorBomb(30) + `}}}`,
	}
	for i := range 3000 {
		list = append(list, `{"name":"many_`+strconv.Itoa(i)+`","inputSchema":`+obj+`}`)
	}
	return "[" + strings.Join(list, ",") + "]"
}

// schemaBomb is $defs of depth levels, each an anyOf of the next twice: a value
// that matches none is checked 2^depth times.
func schemaBomb(depth int) string {
	var defs []string
	for i := range depth {
		defs = append(defs, `"L`+strconv.Itoa(i)+`":{"anyOf":[{"$ref":"#/$defs/L`+strconv.Itoa(i+1)+`"},{"$ref":"#/$defs/L`+strconv.Itoa(i+1)+`"}]}`)
	}
	return strings.Join(append(defs, `"L`+strconv.Itoa(depth)+`":{"type":"string"}`), ",")
}

// anchorBomb is schemaBomb with levels that refer to each other by $anchor.
func anchorBomb(depth int) string {
	var defs []string
	for i := range depth {
		next := `{"$ref":"#L` + strconv.Itoa(i+1) + `"}`
		defs = append(defs, `"L`+strconv.Itoa(i)+`":{"$anchor":"L`+strconv.Itoa(i)+`","anyOf":[`+next+`,`+next+`]}`)
	}
	return strings.Join(append(defs, `"L`+strconv.Itoa(depth)+`":{"$anchor":"L`+strconv.Itoa(depth)+`","type":"string"}`), ",")
}

// TestHostileToolList: a tool list with entries mcp-go cannot decode (a schema that
// is not an object, a type that is a list, a name that is a number), names that
// are empty, huge, odd or listed twice, schemas that do not compile, and thousands
// of tools. The server's other tools are registered; each refusal is in its notes.
func TestHostileToolList(t *testing.T) {
	t.Parallel()
	// 3,000 tools and their schemas are slow to register under -race on a busy machine.
	cfg := hostileServer(t, "tl", "tools")
	cfg.ConnectTimeout = 2 * time.Minute
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour})
	h.start(t)
	st := h.waitState(t, "tl", StateReady, 2*time.Minute)
	if st.Tools != 3000+10 {
		t.Errorf("%d tools registered, want 3010", st.Tools)
	}
	notes := strings.Join(st.Notes, "\n")
	for _, want := range []string{`"schema_not_object"`, `"schema_array_type"`, "42", "empty name", `"dup" is listed twice`,
		`"schema_bogus_type" is not registered`, `"schema_remote_ref" is not registered`, `"schema_dangling_ref" is not registered`,
		`"schema_bad_regex" is not registered`, `"schema_string" is not registered`, `"schema_bomb" is not registered`,
		`"schema_anchor_bomb" is not registered`} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes do not mention %s:\n%.3000s", want, notes)
		}
	}
	for _, name := range []string{"ok", "tree", "dup", "a_b_c___", "schema_null", "schema_missing", "schema_self_ref", "huge_description", "many_2999"} {
		if _, ok := h.tools.Lookup("mcp__tl__" + name); !ok {
			t.Errorf("mcp__tl__%s is not registered", name)
		}
	}
	wantText(t, h.call(t.Context(), t, "mcp__tl__ok", `{"x":1}`, nil), `echo {"x":1}`)
	wantKind(t, h.call(t.Context(), t, "mcp__tl__schema_self_ref", `{"a":{"a":1}}`, nil), tool.KindInvalidArgs)
	wantKind(t, h.call(t.Context(), t, "mcp__tl__tree", `{"root":{"children":[{"v":true}]}}`, nil), tool.KindInvalidArgs)
	wantText(t, h.call(t.Context(), t, "mcp__tl__tree", `{"root":{"children":[{"v":1},{"children":[]}]}}`, nil), "echo")
}

// TestEndlessToolList: a server whose tools/list pages never end (pages of many
// tools, or of one tool of 8 MiB) fails to connect at once, saying so, instead of
// filling memory until the connect timeout.
func TestEndlessToolList(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"pages", "fatpages"} {
		cfg := hostileServer(t, mode, mode)
		// 64 MiB of JSON to read before the limit bites: 42 s alone under -race, over a
		// minute beside the other packages' tests on two cores.
		cfg.ConnectTimeout = 4 * time.Minute
		h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour, MinBackoff: time.Hour, MaxBackoff: time.Hour})
		h.start(t)
		st := h.waitState(t, mode, StateFailed, 5*time.Minute)
		if !strings.Contains(st.LastError, "tool list") {
			t.Errorf("%s: last error %q does not say the tool list is too long", mode, st.LastError)
		}
	}
}

// TestStdioHugeLine: a stdio server that writes one line of 200 MiB is cut off at
// the message limit: the call fails at once saying so (it does not cost the GBs of
// reading the line), the connection is replaced, and the server works again.
func TestStdioHugeLine(t *testing.T) {
	// Not parallel: it measures what the process allocates.
	cfg := hostileServer(t, "huge", "bigline")
	cfg.CallTimeout = 20 * time.Second
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour, MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	h.start(t)
	h.waitState(t, "huge", StateReady, 30*time.Second)
	pid := h.stdioPid(t, "huge")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := h.call(t.Context(), t, "mcp__huge__big", `{}`, nil)
	runtime.ReadMemStats(&after)
	if alloc := (after.TotalAlloc - before.TotalAlloc) >> 20; alloc > 300 {
		t.Errorf("the call allocated %d MiB", alloc)
	}
	if res.ErrorKind != tool.KindFailed || !strings.Contains(res.Text(), "16 MiB") {
		t.Fatalf("is_error=%v kind=%q text %.300q; want failed, naming the limit", res.IsError, res.ErrorKind, res.Text())
	}
	if !eventually(10*time.Second, func() bool { return !processAlive(pid) }) {
		t.Errorf("child %d still alive after its connection was cut", pid)
	}
	h.waitState(t, "huge", StateReady, 10*time.Second)
	wantText(t, h.call(t.Context(), t, "mcp__huge__echo", `{"a":1}`, nil), `echo {"a":1}`)
}

// TestToolListChangedStorm: a server that sends tools/list_changed (and log
// messages) without pause is listed again at a bounded rate, and its calls work.
func TestToolListChangedStorm(t *testing.T) {
	t.Parallel()
	logs := &infoCount{match: "tool list changed"}
	h := &harness{tools: toolmgr.New(), reg: prometheus.NewRegistry()}
	m, err := New(Config{Servers: []ServerConfig{hostileServer(t, "storm", "storm")}, HealthInterval: time.Hour}, h.tools, nil,
		slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})), h.reg)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	t.Cleanup(m.Stop)
	h.start(t)
	h.waitState(t, "storm", StateReady, 10*time.Second)
	time.Sleep(3 * time.Second)
	// The storm's lists are all alike: nothing changed, nothing for the operator.
	if n := logs.n.Load(); n > 0 {
		t.Errorf("%d INFO lines say the tool list changed; it never did", n)
	}
	res := h.call(t.Context(), t, "mcp__storm__lists", `{}`, nil)
	n, err := strconv.Atoi(res.Text())
	if err != nil {
		t.Fatalf("lists: %s %q", res.ErrorKind, res.Text())
	}
	t.Logf("tools/list %d times in about 3s of storm", n)
	if n > 10 {
		t.Errorf("the server was listed %d times in 3s of tools/list_changed", n)
	}
}

// infoCount counts the log lines that hold match.
type infoCount struct {
	match string
	n     atomic.Int32
}

func (c *infoCount) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(c.match)) {
		c.n.Add(1)
	}
	return len(p), nil
}

// progressBytes counts what a call emitted as progress.
type progressBytes struct {
	mu    sync.Mutex
	n     int
	texts int
	last  string
}

func (p *progressBytes) Emit(_, text string) {
	p.mu.Lock()
	p.n += len(text)
	p.texts++
	p.last = text
	p.mu.Unlock()
}

func (p *progressBytes) Close() {}

// TestProgressFlood: a server that sends 16 MiB of progress for its call, in
// messages of 16 KiB, passes on a bounded amount of it (progress is written to the
// call's logs and streams), saying so, and its answer still arrives.
func TestProgressFlood(t *testing.T) {
	t.Parallel()
	cfg := hostileServer(t, "flood", "results")
	cfg.CallTimeout = 30 * time.Second
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour})
	h.start(t)
	h.waitState(t, "flood", StateReady, 10*time.Second)
	prog := &progressBytes{}
	wantText(t, h.call(t.Context(), t, "mcp__flood__progress_flood", `{}`, prog), "flooded")
	prog.mu.Lock()
	defer prog.mu.Unlock()
	t.Logf("%d bytes of progress in %d emits; the last: %.200q", prog.n, prog.texts, prog.last)
	if prog.n > 1<<20+8<<10 {
		t.Errorf("the call emitted %d MiB of progress", prog.n>>20)
	}
	if !strings.Contains(prog.last, "dropped") {
		t.Errorf("the last progress %.200q does not say the rest was dropped", prog.last)
	}
}

// TestServerRequestsClient: requests a server sends the client during a call
// (sampling, elicitation, roots, ping, an unknown method) are answered, with errors
// for what toolserverd does not offer, and the call completes; an answer with an id
// the client never used is ignored and the call ends at its timeout.
func TestServerRequestsClient(t *testing.T) {
	t.Parallel()
	cfg := hostileServer(t, "asks", "results")
	cfg.CallTimeout = time.Second
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour})
	h.start(t)
	h.waitState(t, "asks", StateReady, 10*time.Second)
	res := h.call(t.Context(), t, "mcp__asks__asks_client", `{}`, nil)
	t.Logf("%s", res.Text())
	wantText(t, res, "srv-3: {}")
	for _, id := range []string{"srv-0: error", "srv-1: error", "srv-2: error", "srv-4: error"} {
		wantText(t, res, id)
	}
	wantKind(t, h.call(t.Context(), t, "mcp__asks__wrong_id", `{}`, nil), tool.KindTimeout)
	wantText(t, h.call(t.Context(), t, "mcp__asks__echo", `{}`, nil), "echo {}")
}

// TestStdioCallDeadlineCancels: a stdio server that answers pings but never a
// tools/call: the call ends at the server's call timeout with kind timeout, and the
// server is told by notifications/cancelled for that request (it would otherwise
// work on, or hold the request, for ever); it stays connected. A call the caller
// cancels is told the same way.
func TestStdioCallDeadlineCancels(t *testing.T) {
	t.Parallel()
	cfg := hostileServer(t, "hang", "results")
	cfg.CallTimeout = 500 * time.Millisecond
	h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: 100 * time.Millisecond})
	h.start(t)
	h.waitState(t, "hang", StateReady, 10*time.Second)
	wantKind(t, h.call(t.Context(), t, "mcp__hang__hang", `{}`, nil), tool.KindTimeout)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	wantKind(t, h.call(ctx, t, "mcp__hang__hang", `{}`, nil), tool.KindCancelled)
	var text string
	// The notifications go out after the calls return: asked until both arrived.
	if !eventually(10*time.Second, func() bool {
		text = h.call(t.Context(), t, "mcp__hang__cancelled", `{}`, nil).Text()
		var hung, cancelled string
		if _, err := fmt.Sscanf(strings.ReplaceAll(text, ";", " "), "hung %s cancelled %s", &hung, &cancelled); err != nil {
			return false
		}
		return hung == cancelled && strings.Count(hung, ",") == 1
	}) {
		t.Fatalf("the server was not told of both ended calls: %q", text)
	}
	if st := h.status(t, "hang"); st.State != StateReady || st.Restarts != 0 {
		t.Errorf("state %s, restarts %d (%s): a server that answers pings stays connected", st.State, st.Restarts, st.LastError)
	}
}

// TestServerRequestFlood: a server that sends requests without end and never reads
// the answers neither piles up goroutines in the daemon nor survives its health
// checks.
func TestServerRequestFlood(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Servers: []ServerConfig{hostileServer(t, "reqflood", "reqflood")}, HealthInterval: 300 * time.Millisecond, MinBackoff: time.Hour, MaxBackoff: time.Hour})
	h.start(t)
	h.waitState(t, "reqflood", StateReady, 10*time.Second)
	peak := 0
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		peak = max(peak, runtime.NumGoroutine())
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("peak goroutines %d; server %s", peak, h.status(t, "reqflood").LastError)
	// Without a bound: 140,000 after a second. Each request still passes through
	// a goroutine of mcp-go's, for an instant.
	if peak > 20000 {
		t.Errorf("%d goroutines while a server floods requests", peak)
	}
	h.waitState(t, "reqflood", StateFailed, 10*time.Second)
}

// TestHugeErrorMessage: a server that refuses initialize with an error message of
// 1 MiB does not put it whole into its status (shown by the API) or the log.
func TestHugeErrorMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Servers: []ServerConfig{hostileServer(t, "initerr", "initerr")}, HealthInterval: time.Hour, MinBackoff: time.Hour, MaxBackoff: time.Hour})
	h.start(t)
	st := h.waitState(t, "initerr", StateFailed, 10*time.Second)
	if !strings.Contains(st.LastError, "no: eee") || len(st.LastError) > 2000 {
		t.Errorf("last error of %d bytes: %.200q", len(st.LastError), st.LastError)
	}
}

// TestStderrFlood: a stdio server that writes to stderr without pause (lines, then
// one line without end) keeps working; what it writes is logged at a bounded rate.
func TestStderrFlood(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Servers: []ServerConfig{hostileServer(t, "noisy", "stderrflood")}, HealthInterval: 200 * time.Millisecond})
	h.start(t)
	h.waitState(t, "noisy", StateReady, 10*time.Second)
	for range 20 {
		wantText(t, h.call(t.Context(), t, "mcp__noisy__echo", `{"n":1}`, nil), `echo {"n":1}`)
		time.Sleep(100 * time.Millisecond)
	}
	if st := h.status(t, "noisy"); st.State != StateReady || st.Restarts != 0 {
		t.Errorf("state %s, restarts %d (%s)", st.State, st.Restarts, st.LastError)
	}
}

// TestPooledSessionStopsReading: a per_session upstream that stops reading its
// stdin is not kept for ever (the pooled sessions have no health checks of their
// own): a call that times out is followed by a check, and a session that fails it
// is closed, its process killed, so that the next call opens a fresh one. Whichever
// deadline ends the call: the server's call timeout, or the caller's, which the
// daemon's sessions always set (the tool's timeout is the server's call timeout, or
// the call's timeout_ms) and which therefore passes first.
func TestPooledSessionStopsReading(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		caller time.Duration // the Invocation's timeout
	}{
		{"server call timeout", 0},
		{"caller deadline", 500 * time.Millisecond},
		{"shorter caller deadline", 200 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := hostileServer(t, "pdeaf", "deaf")
			cfg.Pooling = PoolPerSession
			cfg.CallTimeout = 500 * time.Millisecond
			h := newHarness(t, Config{Servers: []ServerConfig{cfg}, HealthInterval: time.Hour})
			h.start(t)
			h.waitState(t, "pdeaf", StateReady, 10*time.Second)
			pooledPid := func() int {
				pool := &h.m.server("pdeaf").pool
				pool.mu.Lock()
				defer pool.mu.Unlock()
				if p := pool.conns["ses_a"]; p != nil && p.conn != nil {
					return p.conn.pid
				}
				return 0
			}
			e, _ := h.tools.Lookup("mcp__pdeaf__echo")
			args := json.RawMessage(`{"pad":"` + strings.Repeat("p", 1<<20) + `"}`)
			// Under load (the race detector, a busy machine) the upstream session may
			// not finish opening within a short caller deadline; the call is then sent
			// again until one reaches the opened session.
			pid := 0
			for i := 0; i < 5 && pid == 0; i++ {
				res := h.tools.Run(e, toolmgr.Invocation{Ctx: &tool.Context{Context: t.Context(), CallID: fmt.Sprintf("tc_%d", i), Session: &tool.Session{ID: "ses_a"}, Progress: tool.NoProgress},
					Args: args, Timeout: tt.caller})
				wantKind(t, res, tool.KindTimeout)
				pid = pooledPid()
			}
			if pid == 0 {
				t.Fatal("no pooled upstream session for ses_a after 5 calls")
			}
			// The ping after the call waits up to 10s (the health interval is 1h here).
			if !eventually(20*time.Second, func() bool { return !processAlive(pid) }) {
				t.Errorf("the deaf per-session upstream %d is still alive 20s after a call to it timed out", pid)
			}
			if st := h.status(t, "pdeaf"); st.Restarts != 0 {
				t.Errorf("the server restarted (%s); only the daemon session's upstream session should have been closed", st.LastError)
			}
		})
	}
}

func oddLines() []string {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	return []string{
		`null`, `[]`, `{}`, `42`, `"str"`, `true`,
		`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"ping","id":2}]`,
		`{"jsonrpc":"2.0","id":{"a":1},"result":{}}`, `{"jsonrpc":"2.0","id":[1,2],"result":{}}`,
		`{"jsonrpc":"2.0","id":1e400,"result":{}}`, `{"jsonrpc":"2.0","id":-1,"result":{}}`,
		`{"jsonrpc":"2.0","id":null,"result":{}}`, `{"jsonrpc":"2.0","id":1.5,"error":{"code":"x","message":7}}`,
		`{"jsonrpc":"2.0","id":"x","method":{"not":"a string"}}`, `{"jsonrpc":"2.0","method":"ping","id":{"a":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":null}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":{"x":1},"progress":"a"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tsd-1","progress":1e308,"total":-0}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":[1,2]}`,
		`{"jsonrpc":"2.0","method":"sampling/createMessage","id":"s1","params":{"messages":[{"role":"user","content":{"type":"image","data":7}}]}}`,
		`{"jsonrpc":"2.0","method":"elicitation/create","id":"s2","params":"nope"}`,
		`{"jsonrpc":"2.0","method":"roots/list","id":"s3","params":{"_meta":5}}`,
		`{"jsonrpc":"2.0","method":"ping","id":"s4","params":` + deep + `}`,
		`{"jsonrpc":"2.0","id":3,"result":` + deep + `}`,
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"\xff\xfe\x00\"}}",
	}
}

// TestOddJSONRPCLines: lines that are JSON but odd JSON-RPC (batches, ids of every
// type, params of the wrong shape, server requests with broken params, nesting past
// the decoder's limit) crash nothing, and the server still works.
func TestOddJSONRPCLines(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Servers: []ServerConfig{hostileServer(t, "odd", "oddlines")}, HealthInterval: 200 * time.Millisecond})
	h.start(t)
	h.waitState(t, "odd", StateReady, 10*time.Second)
	for range 5 {
		wantText(t, h.call(t.Context(), t, "mcp__odd__echo", `{}`, nil), "echo {}")
		time.Sleep(100 * time.Millisecond)
	}
	if st := h.status(t, "odd"); st.Restarts != 0 {
		t.Errorf("restarts %d: %s", st.Restarts, st.LastError)
	}
}
