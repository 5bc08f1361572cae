package webui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

const chromiumPath = "/usr/bin/chromium"

// screens are the screenshots console.mjs saves.
var screens = []string{"approve-pending", "approve-decided", "stream-midway", "stream-finished",
	"approvals", "live", "calls", "call", "tools", "mcp", "progress-midway", "live-job",
	"approve-conflict", "live-many", "narrow"}

// need reports a missing dependency: a failure under CI=true, a skip elsewhere.
func need(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required under CI=true: %v (scripts/test.sh installs it)", what, err)
	}
	t.Skipf("%s missing (%v); scripts/test.sh installs it", what, err)
}

func packageDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// artifactDir is where the screenshots go: $TOOLSERVER_UI_ARTIFACTS, or artifacts/ui
// at the repository root (ignored by git).
func artifactDir(t *testing.T) string {
	dir := os.Getenv("TOOLSERVER_UI_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(packageDir(), "..", "..", "artifacts", "ui")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, old := range append(screens, "failure") {
		_ = os.Remove(filepath.Join(dir, old+".png"))
	}
	return dir
}

// TestConsoleInChromium runs e2e/console.mjs (playwright-core driving the Debian
// chromium) against a real daemon whose permissions make a command ask for approval,
// then checks through the API that what the page did really happened.
func TestConsoleInChromium(t *testing.T) {
	node, err := exec.LookPath("node")
	need(t, "node", err)
	_, err = os.Stat(chromiumPath)
	need(t, "chromium ("+chromiumPath+")", err)
	_, err = os.Stat(filepath.Join(packageDir(), "e2e", "node_modules", "playwright-core", "package.json"))
	need(t, "playwright-core (npm ci in internal/webui/e2e)", err)

	skills := t.TempDir()
	writeSkill(t, skills)
	slow := slowDownload(t)
	// Default permissions: execute_command asks unless the session says otherwise. An
	// MCP server that cannot start gives the health page something to report.
	// Keys required, as in production: the page and the script use the admin key the
	// first start wrote.
	configure := func(c *config.Config) {
		c.Auth.Unauthenticated = false
		c.Skills.Dirs = []string{skills}
		c.MCPServers = []config.MCPServerConfig{{Name: "broken", Transport: "stdio", Command: "/bin/false"}}
		c.Web.Fetch.AllowCIDRs = []string{"127.0.0.1/32"}
	}
	// A request made before the operator added a deny rule that covers it (loaded by
	// the restart): the page's approval of it is refused, in the policy's name.
	dataDir := t.TempDir()
	var policyApproval string
	t.Run("before the deny rule", func(t *testing.T) {
		d := testdaemon.Start(t, func(c *config.Config) { configure(c); c.DataDir = dataDir })
		policyApproval = waitingApproval(t, d, "echo policy-change >> ran.txt")
	}) // the daemon stops here
	d := testdaemon.Start(t, func(c *config.Config) {
		configure(c)
		c.DataDir = dataDir
		c.Permissions.Deny = append(c.Permissions.Deny, "execute_command(echo policy-change:*)")
	})
	artifacts := artifactDir(t)

	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "e2e/console.mjs", d.URL, artifacts)
	cmd.Dir = packageDir()
	key, err := os.ReadFile(filepath.Join(d.App.DataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	adminKey := strings.TrimSpace(string(key))
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromiumPath, "TOOLSERVER_API_KEY="+adminKey,
		"SLOW_URL="+slow.URL, "SLOW_SIZE="+strconv.Itoa(slowSize), "POLICY_APPROVAL="+policyApproval)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// node and the browser it starts share a process group: the whole group goes when
	// the deadline passes, and whatever is left when the script ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	t.Logf("console.mjs stdout:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("console.mjs: %v\nstderr:\n%s\n(screenshots in %s)", err, stderr.String(), artifacts)
	}
	out := stdout.String()
	for _, want := range []string{"scenario 1 ok", "scenario 2 ok", "scenario 3 ok", "scenario 4 ok", "scenario 5 ok", "scenario 6 ok", "scenario 7 ok", "scenario 8 ok", "scenario 9 ok", "scenario 10 ok", "scenario 11 ok", "scenario 12 ok", "scenario 13 ok", "scenario 14 ok", "scenario 15 ok", "scenario 16 ok", "scenario 17 ok"} {
		if !strings.Contains(out, want) {
			t.Fatalf("console.mjs did not report %q", want)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var summary struct {
		ApprovedCall string `json:"approvedCall"`
		Approval     string `json:"approval"`
		StreamedCall string `json:"streamedCall"`
		DeniedCall   string `json:"deniedCall"`
		// BackgroundCall started a background job (scenario 6), over by then.
		BackgroundCall string   `json:"backgroundCall"`
		Increments     []string `json:"increments"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil {
		t.Fatalf("summary line: %v", err)
	}
	if len(summary.Increments) < 2 || summary.Increments[0] != "line 1\n" || summary.Increments[1] != "line 1\nline 2\n" {
		t.Fatalf("increments seen before completion: %q", summary.Increments)
	}

	// What the page did, seen through the API: the approval was decided by the
	// console, the call ran once and succeeded.
	var apr struct {
		Status   string `json:"status"`
		Decision struct {
			Kind  string `json:"kind"`
			Actor string `json:"actor"`
		} `json:"decision"`
	}
	getJSON(t, adminKey, d.URL+"/v1/approvals/"+summary.Approval, &apr)
	// The approver's name, typed on the page, with the key that sent it.
	if apr.Status != "approved" || apr.Decision.Kind != "approve" || !strings.HasPrefix(apr.Decision.Actor, "Ada Lovelace via key ") {
		t.Fatalf("approval after the click: %+v", apr)
	}
	var call struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	getJSON(t, adminKey, d.URL+"/v1/tool-calls/"+summary.ApprovedCall, &call)
	if call.Status != "succeeded" || !strings.Contains(string(call.Result), "approved-result") {
		t.Fatalf("approved call: %s %s", call.Status, call.Result)
	}
	call.Result = nil
	getJSON(t, adminKey, d.URL+"/v1/tool-calls/"+summary.DeniedCall, &call)
	if call.Status != "failed" || !strings.Contains(string(call.Result), "not on a Friday") {
		t.Fatalf("denied call: %s %s", call.Status, call.Result)
	}
	call.Result = nil
	getJSON(t, adminKey, d.URL+"/v1/tool-calls/"+summary.StreamedCall, &call)
	if call.Status != "succeeded" || !strings.Contains(string(call.Result), "line 4") {
		t.Fatalf("streamed call: %s %s", call.Status, call.Result)
	}
	// The job of scenario 6 has ended: its call's record says its output is closed
	// (written just after the output closed, so looked at until then).
	var bg struct {
		Status     string `json:"status"`
		OutputOpen bool   `json:"output_open"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		getJSON(t, adminKey, d.URL+"/v1/tool-calls/"+summary.BackgroundCall, &bg)
		if !bg.OutputOpen || time.Now().After(deadline) {
			break
		}
	}
	if bg.Status != "succeeded" || bg.OutputOpen {
		t.Fatalf("background job's call: %+v", bg)
	}
	for _, name := range screens {
		b, err := os.ReadFile(filepath.Join(artifacts, name+".png"))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) || len(b) < 5000 {
			t.Errorf("screenshot %s.png: %d bytes, %v", name, len(b), err)
		}
	}
}

// waitingApproval makes a call of command wait for approval on d (with its admin key)
// and leaves it waiting; it returns the approval's id.
func waitingApproval(t *testing.T, d *testdaemon.Daemon, command string) string {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(d.App.DataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, d.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(key)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("/v1/sessions", `{"available_tools":["execute_command"]}`)
	var sess struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil || sess.ID == "" {
		t.Fatalf("creating a session: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	body, _ := json.Marshal(map[string]any{"calls": []map[string]any{{"id": "policy", "name": "execute_command", "arguments": map[string]string{"command": command}}}})
	resp = post("/v1/sessions/"+sess.ID+"/tool-calls", string(body))
	defer resp.Body.Close() // the call stays waiting when its stream goes
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type     string `json:"type"`
			Approval struct {
				ID string `json:"id"`
			} `json:"approval"`
		}
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("the call's stream ended before it asked for approval: %v", err)
		}
		if ev.Type == "approval_required" {
			return ev.Approval.ID
		}
	}
}

// slowSize is the size of slowDownload's body.
const slowSize = 64 << 10

// slowDownload serves GET /body: half of it in pieces over about a second (long
// enough for web_fetch to report progress), the rest once GET /release is asked.
func slowDownload(t *testing.T) *httptest.Server {
	release := make(chan struct{})
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("/release", func(w http.ResponseWriter, r *http.Request) { once.Do(func() { close(release) }) })
	mux.HandleFunc("/body", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(slowSize))
		const piece = slowSize / 16
		for i := range 16 {
			if i == 8 {
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			_, _ = w.Write(bytes.Repeat([]byte("p"), piece))
			_ = http.NewResponseController(w).Flush()
			if i < 8 {
				time.Sleep(150 * time.Millisecond)
			}
		}
	})
	s := httptest.NewServer(mux)
	t.Cleanup(func() {
		once.Do(func() { close(release) })
		s.Close()
	})
	return s
}

func writeSkill(t *testing.T, dir string) {
	t.Helper()
	skill := filepath.Join(dir, "release-notes")
	if err := os.MkdirAll(skill, 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: release-notes\ndescription: Writes release notes from the git log. Use when asked for a changelog.\nversion: \"0.3\"\n---\n# Release notes\n\nRun `git log --oneline` since the last tag and group the lines by kind.\n"
	if err := os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

func getJSON(t *testing.T, adminKey, url string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
