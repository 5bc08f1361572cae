package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testnet"
)

const shopDoc = `openapi: 3.0.3
info: {title: shop, version: "1"}
paths:
  /items:
    get:
      operationId: listItems
      responses:
        "200": {description: the items}
`

// TestOpenAPIURLSourceLoadsInBackground: an OpenAPI source whose document is a URL
// does not hold up start-up, as an MCP server does not. While the API does not answer
// (its first request held), then answers 503 with an HTML maintenance page, the
// daemon serves; a session naming the source's tool keeps it with a warning saying
// the source is loading, and a call answers unavailable saying why (the 503, the
// spec's token redacted). Once the API serves its document the tool appears in the
// same session, without a restart, and the call reaches the API. Before, start-up
// waited for the document (fetch_timeout) and failed on the 503.
func TestOpenAPIURLSourceLoadsInBackground(t *testing.T) {
	t.Parallel()
	var state atomic.Int32 // 0: hold the document's request; 1: 503; 2: serve it
	release := make(chan struct{})
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { close(release) }) }
	var itemCalls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/items":
			itemCalls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"items":["teapot"]}`)
		case state.Load() == 0:
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			fallthrough
		case state.Load() == 1:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "<html><body>Down for maintenance</body></html>")
		default:
			w.Header().Set("Content-Type", "application/yaml")
			fmt.Fprint(w, shopDoc)
		}
	}))
	t.Cleanup(api.Close)
	t.Cleanup(open) // before api.Close: a request still held ends
	var logs syncBuffer
	d := startDaemon(t, daemonOpts{log: &logs, mutate: func(c *config.Config) {
		c.OpenAPI = []config.OpenAPIConfig{{Name: "shop", Spec: api.URL + "/openapi.yaml?token=spec-secret-token", FetchTimeout: time.Minute}}
		c.Permissions.Allow = append(c.Permissions.Allow, "shop__*")
	}})

	// The daemon answers while the document's request is held; it is ready, and
	// /readyz names the source loading.
	if got := readyOpenAPI(t, d); !slices.Equal(got.Loading, []string{"shop"}) || len(got.Failed) != 0 {
		t.Errorf("readyz while shop loads: %+v", got)
	}
	s := d.createSession(map[string]any{"available_tools": []string{"shop__listItems", "echo"}})
	id := s["id"].(string)
	if got := toStrings(s["available_tools"]); !slices.Equal(got, []string{"shop__listItems", "echo"}) {
		t.Errorf("available_tools = %v, want the shop tool kept", got)
	}
	warnings := strings.Join(toStrings(s["warnings"]), "\n")
	if !strings.Contains(warnings, "tool shop__listItems is not available yet: openapi source shop is loading") {
		t.Errorf("warnings while shop loads:\n%s", warnings)
	}
	if strings.Contains(warnings, "server connects") {
		t.Errorf("the warning of a loading document speaks of a server connecting:\n%s", warnings)
	}
	p := d.createSession(map[string]any{"available_tools": []string{"shop__*"}})
	if w := strings.Join(toStrings(p["warnings"]), "\n"); !strings.Contains(w, "tool pattern matches no tool yet: shop__* (openapi source shop is loading)") {
		t.Errorf("warnings of a pattern while shop loads:\n%s", w)
	}
	call := func() event {
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"c","name":"shop__listItems","arguments":{}}]}`)
		return messages(t, evs)["c"]
	}
	if m := call(); m.str("error_kind") != "unavailable" || !strings.Contains(string(m.raw), "openapi source shop is loading") {
		t.Errorf("call while shop loads: %s, want unavailable saying shop is loading", m.raw)
	}

	// The API answers 503: the call says so, and the log warns, the token redacted.
	state.Store(1)
	open()
	var m event
	waitFor(t, 30*time.Second, "a call to say the document's 503", func() bool {
		m = call()
		return strings.Contains(string(m.raw), "503")
	})
	if m.str("error_kind") != "unavailable" || !strings.Contains(string(m.raw), "openapi source shop has not loaded yet") {
		t.Errorf("call after a 503: %s", m.raw)
	}
	waitFor(t, 30*time.Second, "the warning of the failed load", func() bool {
		return strings.Contains(logs.String(), `"msg":"openapi source not loaded yet; retrying","source":"shop"`)
	})

	// The API is back: the tool comes, in the same session.
	state.Store(2)
	waitFor(t, 60*time.Second, "the session to list shop__listItems", func() bool {
		_, _, body := d.do("GET", "/v1/sessions/"+id, nil)
		var got struct{ Tools []string }
		_ = json.Unmarshal(body, &got)
		return slices.Contains(got.Tools, "shop__listItems")
	})
	if m := call(); m.m["is_error"] != false || !strings.Contains(string(m.raw), "teapot") || itemCalls.Load() != 1 {
		t.Errorf("call once shop is loaded: %s (API called %d times)", m.raw, itemCalls.Load())
	}
	if got := readyOpenAPI(t, d); got.Loading == nil || len(got.Loading)+len(got.Failed) != 0 {
		t.Errorf("readyz once shop is loaded: %+v", got)
	}
	log := logs.String()
	if !strings.Contains(log, `"msg":"openapi source loaded","source":"shop"`) {
		t.Errorf("no info line for the loaded source:\n%s", log)
	}
	if strings.Contains(log, "spec-secret-token") || strings.Contains(string(m.raw), "spec-secret-token") {
		t.Errorf("the spec URL's token is shown:\n%s", log)
	}
}

// TestOpenAPILoaderEndsAtShutdown: a source whose API refuses connections is tried
// again and again; stopping the daemon ends its loader (no goroutine left behind).
// Not parallel: no other test's loader runs meanwhile.
func TestOpenAPILoaderEndsAtShutdown(t *testing.T) {
	addr := testnet.RefusedAddr(t) // connections are refused there
	var logs syncBuffer
	d := startDaemon(t, daemonOpts{log: &logs, mutate: func(c *config.Config) {
		c.OpenAPI = []config.OpenAPIConfig{{Name: "gone", Spec: "http://" + addr + "/openapi.json"}}
	}})
	waitFor(t, 30*time.Second, "a failed attempt", func() bool {
		return strings.Contains(logs.String(), `"msg":"openapi source not loaded yet; retrying","source":"gone"`)
	})
	if !loaderRunning() {
		t.Fatal("no loader goroutine while the source is retried")
	}
	d.stop()
	if loaderRunning() {
		t.Error("the OpenAPI loader still runs after the daemon stopped")
	}
}

func loaderRunning() bool {
	buf := make([]byte, 1<<22)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "app.(*App).loadOpenAPI")
}

// TestOpenAPIURLSourceClashNotRetried: a URL source whose tool names another source
// has taken is an error in the log, once: reading the document again cannot fix it.
// The source that has the name keeps it. Not parallel: no other test's loader runs
// meanwhile.
func TestOpenAPIURLSourceClashNotRetried(t *testing.T) {
	var fetches atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/items" {
			fmt.Fprint(w, `{"items":["teapot"]}`)
			return
		}
		fetches.Add(1)
		fmt.Fprint(w, shopDoc)
	}))
	t.Cleanup(api.Close)
	file := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(file, []byte(shopDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	d := startDaemon(t, daemonOpts{log: &logs, mutate: func(c *config.Config) {
		c.OpenAPI = []config.OpenAPIConfig{{Name: "local", Prefix: "shop", Spec: file, BaseURL: api.URL},
			{Name: "remote", Prefix: "shop", Spec: api.URL + "/openapi.yaml"}}
		c.Permissions.Allow = append(c.Permissions.Allow, "shop__*")
	}})
	waitFor(t, 30*time.Second, "the loader to fail and end", func() bool {
		return strings.Contains(logs.String(), `"msg":"openapi source not loaded; fix it and restart"`) && !loaderRunning()
	})
	log := logs.String()
	if !strings.Contains(log, `"level":"ERROR","msg":"openapi source not loaded; fix it and restart","source":"remote"`) ||
		!strings.Contains(log, "already registered") {
		t.Errorf("no error line naming the clash:\n%s", log)
	}
	if got := readyOpenAPI(t, d); len(got.Loading) != 0 || !slices.Equal(got.Failed, []string{"remote"}) {
		t.Errorf("readyz after the clash: %+v", got)
	}
	if strings.Contains(log, "retrying") || fetches.Load() != 1 {
		t.Errorf("the clash was retried (%d fetches):\n%s", fetches.Load(), log)
	}
	_, _, body := d.do("GET", "/v1/tools", nil)
	var listing struct {
		Tools []struct{ Name, Source string }
	}
	_ = json.Unmarshal(body, &listing)
	found := false
	for _, tl := range listing.Tools {
		if tl.Name == "shop__listItems" {
			found = tl.Source == "openapi:local"
		}
	}
	if !found {
		t.Errorf("shop__listItems is not local's: %s", body)
	}
}

type openAPIReadiness struct{ Loading, Failed []string }

// readyOpenAPI is info.openapi of /readyz, which must answer ready.
func readyOpenAPI(t *testing.T, d *daemon) openAPIReadiness {
	t.Helper()
	code, _, body := d.do("GET", "/readyz", nil)
	var ready struct {
		Status string
		Info   struct{ OpenAPI openAPIReadiness }
	}
	if err := json.Unmarshal(body, &ready); err != nil || code != http.StatusOK || ready.Status != "ready" {
		t.Errorf("readyz: %d %s", code, body)
	}
	return ready.Info.OpenAPI
}
