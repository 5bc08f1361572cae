package openapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/sandbox"
	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

// payload is n bytes of a PDF-like file: the PDF header (binary marker included),
// then bytes of every value, NUL among them. With text it is printable lines.
func payload(n int, text bool) []byte {
	var b bytes.Buffer
	if text {
		for b.Len() < n {
			fmt.Fprintf(&b, "line %d of a plain text answer\n", b.Len())
		}
		return b.Bytes()[:n]
	}
	b.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	for i := 0; b.Len() < n; i++ {
		b.WriteByte(byte(i*7 + 3))
	}
	return b.Bytes()[:n]
}

// upload is what the file API received in one request.
type upload struct {
	Path  string
	CT    string
	Body  []byte
	Parts []part
}

type part struct {
	Field, Filename, CT string
	Data                []byte
}

// fileAPI is a real HTTP API on loopback that stores uploads (multipart and raw)
// and serves downloads whose type, Content-Disposition and size the call chooses.
type fileAPI struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []upload
}

func newFileAPI(t *testing.T) *fileAPI {
	t.Helper()
	a := &fileAPI{}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fileAPI) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case strings.HasPrefix(r.URL.Path, "/files/"):
		size, _ := strconv.Atoi(q.Get("size"))
		if size == 0 {
			size = 1000
		}
		ct := q.Get("type")
		if ct == "" {
			ct = "application/pdf"
		}
		data := payload(size, q.Get("text") == "true")
		w.Header().Set("Content-Type", ct)
		if d := q.Get("disposition"); d != "" {
			w.Header()["Content-Disposition"] = []string{d}
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		if q.Get("drop") == "true" {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(data[:len(data)/2])
			_ = http.NewResponseController(w).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		_, _ = w.Write(data)
		return
	case r.URL.Path == "/export":
		w.Header().Set("Content-Type", "application/x-tar")
		_, _ = w.Write(payload(5000, false))
		return
	}
	u := upload{Path: r.URL.Path, CT: r.Header.Get("Content-Type")}
	mt, params, _ := mime.ParseMediaType(u.CT)
	if mt == "multipart/form-data" {
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			data, _ := io.ReadAll(p)
			u.Parts = append(u.Parts, part{p.FormName(), p.FileName(), p.Header.Get("Content-Type"), data})
		}
	} else {
		u.Body, _ = io.ReadAll(r.Body)
	}
	a.mu.Lock()
	a.got = append(a.got, u)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"stored":%q}`, r.URL.Path)
}

// take returns what arrived since the last take.
func (a *fileAPI) take() []upload {
	a.mu.Lock()
	defer a.mu.Unlock()
	got := a.got
	a.got = nil
	return got
}

// fileEnv is a source of the file API whose calls come from a session with a
// working directory, through a real sandbox manager whose hidden dir is the
// working directory's data/ (as the daemon hides its data dir).
type fileEnv struct {
	api     *fileAPI
	m       *toolmgr.Manager
	sess    *tool.Session
	workdir string
	calls   int
}

func newFileEnv(t *testing.T, mutate func(*Config)) *fileEnv {
	t.Helper()
	api := newFileAPI(t)
	workdir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(workdir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	sm, err := sandbox.NewManager(sandbox.Config{StateDir: t.TempDir(), Hide: []string{filepath.Join(workdir, "data")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sm.Shutdown(ctx)
	})
	cfg := Config{Name: "files", Spec: filepath.Join("testdata", "files31.yaml"), BaseURL: api.srv.URL, Workspaces: sm}
	if mutate != nil {
		mutate(&cfg)
	}
	_, m := load(t, cfg)
	return &fileEnv{api: api, m: m, workdir: workdir, sess: &tool.Session{ID: "ses_files", Workdir: workdir, State: tool.NewState()}}
}

// call runs a tool as a call of the session, each call with its own id.
func (e *fileEnv) call(t *testing.T, name, args string) *tool.Result {
	t.Helper()
	en, ok := e.m.Lookup(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	e.calls++
	ctx := &tool.Context{Context: context.Background(), CallID: fmt.Sprintf("tc_%d", e.calls), ToolName: name, Session: e.sess}
	return e.m.Run(en, toolmgr.Invocation{Ctx: ctx, Args: json.RawMessage(args), Timeout: 10 * time.Second})
}

func (e *fileEnv) write(t *testing.T, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(e.workdir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFileArgumentsByPath: a multipart file field and a raw binary body take a file
// of the session's working directory by path, sent byte for byte, named by the file
// (or filename when given), typed by that name's extension where the API leaves the
// type open; and the schema a model reads offers path.
func TestFileArgumentsByPath(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t, nil)
	doc := payload(300<<10, false)
	e.write(t, "out/report.pdf", doc)
	e.write(t, "notes.txt", []byte("hello\n"))
	if err := os.Symlink("out/report.pdf", filepath.Join(e.workdir, "latest.pdf")); err != nil {
		t.Fatal(err)
	}

	up := schemaOf(t, e.m, "files__upload")
	if f := prop(up, "file"); prop(f, "path") == nil || f["required"] != nil || !strings.Contains(fmt.Sprint(f["description"]), "path (a file of the working directory") {
		t.Errorf("file field schema does not offer path: %v", f)
	}
	if b := prop(schemaOf(t, e.m, "files__putBlob"), "body"); prop(b, "path") == nil || !strings.Contains(fmt.Sprint(b["description"]), "named by path") {
		t.Errorf("raw body schema does not offer path: %v", b)
	}

	res := e.call(t, "files__upload", `{"file":{"path":"latest.pdf"},"extra":[{"path":"notes.txt","filename":"n.md"},{"filename":"inline.txt","content":"inline"}],"note":"n"}`)
	if res.IsError {
		t.Fatalf("upload by path: %s", res.Text())
	}
	got := e.api.take()
	if len(got) != 1 {
		t.Fatalf("requests: %d", len(got))
	}
	parts := map[string][]part{}
	for _, p := range got[0].Parts {
		parts[p.Field] = append(parts[p.Field], p)
	}
	if f := parts["file"]; len(f) != 1 || f[0].Filename != "latest.pdf" || f[0].CT != "application/pdf" || !bytes.Equal(f[0].Data, doc) {
		t.Errorf("file part: %d parts, %+v", len(f), summary(f))
	}
	if x := parts["extra"]; len(x) != 2 || x[0].Filename != "n.md" || string(x[0].Data) != "hello\n" || x[1].Filename != "inline.txt" || string(x[1].Data) != "inline" {
		t.Errorf("extra parts: %+v", summary(x))
	}

	for _, c := range []struct{ tool, args, path, ct string }{
		{"files__putBlob", `{"key":"k","body":{"path":"out/report.pdf"}}`, "/blobs/k", "application/octet-stream"},
		{"files__putAny", `{"key":"k","body":{"path":"out/report.pdf"}}`, "/any/k", "application/pdf"},
		{"files__putAny", `{"key":"k","body":{"path":"out/report.pdf","filename":"r.zip"}}`, "/any/k", "application/zip"},
		{"files__putAny", `{"key":"k","body":{"path":"latest.pdf"}}`, "/any/k", "application/pdf"},
		{"files__putAny", fmt.Sprintf(`{"key":"k","body":{"path":%q}}`, filepath.Join(e.workdir, "out/report.pdf")), "/any/k", "application/pdf"},
	} {
		res := e.call(t, c.tool, c.args)
		got := e.api.take()
		if res.IsError || len(got) != 1 {
			t.Errorf("%s %s: %s (%d requests)", c.tool, c.args, res.Text(), len(got))
			continue
		}
		if got[0].Path != c.path || got[0].CT != c.ct || !bytes.Equal(got[0].Body, doc) {
			t.Errorf("%s %s: sent %s %s %d bytes; want %s %s %d bytes", c.tool, c.args, got[0].Path, got[0].CT, len(got[0].Body), c.path, c.ct, len(doc))
		}
	}
}

func summary(ps []part) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s %s %s %d bytes", p.Field, p.Filename, p.CT, len(p.Data)))
	}
	return out
}

// TestFileArgumentsRefused: a path that leaves the working directory (by "..", an
// absolute path, a symlink, a symlinked directory), that lies in the daemon's data
// dir, or that names no readable regular file is refused with a kind the model can
// act on, and nothing is sent.
func TestFileArgumentsRefused(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t, func(c *Config) { c.MaxFileBytes = 64 << 10 })
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("top secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.write(t, "data/keys.txt", []byte("daemon keys"))
	e.write(t, "big.bin", payload(65<<10, false))
	e.write(t, "half.bin", payload(40<<10, false))
	for name, target := range map[string]string{"link.txt": secret, "outdir": outside, "rel.txt": "../" + filepath.Base(outside) + "/secret.txt"} {
		if err := os.Symlink(target, filepath.Join(e.workdir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(e.workdir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args string
		kind tool.ErrorKind
		want string
	}{
		{`{"file":{"path":"../x"}}`, tool.KindDenied, "outside the working directory"},
		{`{"file":{"path":"out/../../x"}}`, tool.KindDenied, "outside the working directory"},
		{fmt.Sprintf(`{"file":{"path":%q}}`, secret), tool.KindDenied, "outside the working directory"},
		{`{"file":{"path":"/etc/passwd"}}`, tool.KindDenied, "outside the working directory"},
		{`{"file":{"path":"link.txt"}}`, tool.KindDenied, "outside the working directory"},
		{`{"file":{"path":"rel.txt"}}`, tool.KindDenied, "outside the working directory"},
		{`{"file":{"path":"outdir/secret.txt"}}`, tool.KindDenied, "outside the working directory"},
		{`{"file":{"path":"data/keys.txt"}}`, tool.KindDenied, "data directory"},
		{`{"file":{"path":"nope.pdf"}}`, tool.KindInvalidArgs, "no such file"},
		{`{"file":{"path":"data"}}`, tool.KindDenied, "data directory"},
		{`{"file":{"path":"."}}`, tool.KindInvalidArgs, "names the working directory"},
		{`{"file":{"path":"out\u0000x"}}`, tool.KindInvalidArgs, "NUL"},
		{`{"file":{"path":"pipe"}}`, tool.KindInvalidArgs, "not a regular file"},
		{`{"file":{"path":"big.bin"}}`, tool.KindInvalidArgs, "max_file_bytes"},
		{`{"file":{"path":"half.bin"},"extra":[{"path":"half.bin"}]}`, tool.KindInvalidArgs, "together (max_file_bytes)"},
		{`{"file":{"path":"half.bin","content":"x"}}`, tool.KindInvalidArgs, "one of content, content_base64 and path"},
		{`{"file":{"path":""}}`, tool.KindInvalidArgs, ""},
	} {
		res := e.call(t, "files__upload", c.args)
		if !res.IsError || res.ErrorKind != c.kind || !strings.Contains(res.Text(), c.want) {
			t.Errorf("%s: %v %s %s; want %s with %q", c.args, res.IsError, res.ErrorKind, res.Text(), c.kind, c.want)
		}
		if strings.Contains(res.Text(), "top secret") || strings.Contains(res.Text(), "daemon keys") {
			t.Errorf("%s: the result shows the file: %s", c.args, res.Text())
		}
	}
	res := e.call(t, "files__putBlob", `{"key":"k","body":{"path":"../../etc/passwd"}}`)
	if res.ErrorKind != tool.KindDenied {
		t.Errorf("raw body outside: %s %s", res.ErrorKind, res.Text())
	}
	if got := e.api.take(); len(got) != 0 {
		t.Errorf("refused calls sent %d requests", len(got))
	}

	// A call without a session cannot name a file.
	res = call(t, e.m, "files__putBlob", `{"key":"k","body":{"path":"half.bin"}}`)
	if res.ErrorKind != tool.KindUnavailable || !strings.Contains(res.Text(), "content_base64") {
		t.Errorf("no session: %s %s", res.ErrorKind, res.Text())
	}
}

// saved reads a download's structured output.
func savedOf(t *testing.T, res *tool.Result) saved {
	t.Helper()
	var s saved
	if res.IsError || json.Unmarshal(res.Structured, &s) != nil || s.Path == "" {
		t.Fatalf("not saved: %v %s %s", res.IsError, res.ErrorKind, res.Text())
	}
	return s
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// TestBinaryAnswersSaved: an answer the model cannot read is saved in the working
// directory's downloads/, byte for byte, under the API's file name when that is a
// plain one, else the tool's name and the call's id; nothing is overwritten; the
// result gives path, type, size and digest; text, JSON, small images and octet
// streams that are text stay in the result.
func TestBinaryAnswersSaved(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t, func(c *Config) { c.MaxResponseBytes = 64 << 10; c.MaxFileBytes = 1 << 20 })
	q := func(v map[string]any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	res := e.call(t, "files__getFile", q(map[string]any{"name": "r", "disposition": `attachment; filename="report.pdf"`, "size": 300000}))
	s := savedOf(t, res)
	want := payload(300000, false)
	if s.Path != "downloads/report.pdf" || s.MediaType != "application/pdf" || s.Bytes != 300000 || s.SHA256 != sum(want) {
		t.Errorf("saved %+v", s)
	}
	if b, _ := os.ReadFile(filepath.Join(e.workdir, "downloads/report.pdf")); !bytes.Equal(b, want) {
		t.Errorf("the file holds %d bytes, not the answer's", len(b))
	}
	if text := res.Text(); !strings.Contains(text, "downloads/report.pdf") || !strings.Contains(text, "application/pdf, 300000 bytes") || strings.Contains(text, "%PDF") {
		t.Errorf("text: %s", text)
	}
	var details map[string]any
	_ = json.Unmarshal(res.Details, &details)
	if details["saved_to"] != "downloads/report.pdf" || details["sha256"] != sum(want) {
		t.Errorf("details: %s", res.Details)
	}

	// The same name again: a new file beside it, the first untouched.
	s2 := savedOf(t, e.call(t, "files__getFile", q(map[string]any{"name": "r", "disposition": `attachment; filename="report.pdf"`, "size": 500})))
	if s2.Path != "downloads/report-2.pdf" || s2.Bytes != 500 {
		t.Errorf("second save: %+v", s2)
	}
	if fi, _ := os.Stat(filepath.Join(e.workdir, "downloads/report.pdf")); fi == nil || fi.Size() != 300000 {
		t.Errorf("the first file was changed")
	}

	// Names that are not one plain file name are not used.
	for i, d := range []string{
		`attachment; filename="../../x"`, `attachment; filename="/etc/cron.d/x"`, `attachment; filename=".."`,
		`attachment; filename=".bashrc"`, `attachment; filename="a\\..\\..\\x"`, `attachment; filename*=UTF-8''..%2F..%2Fy`,
		"attachment; filename*=UTF-8''evil%E2%80%AEfdp.exe", `attachment; filename="-rf"`, `attachment; filename="a:b"`,
	} {
		res := e.call(t, "files__getFile", q(map[string]any{"name": "h", "disposition": d}))
		s := savedOf(t, res)
		if want := fmt.Sprintf("downloads/files__getFile-tc_%d.pdf", e.calls); s.Path != want || !strings.Contains(res.Text(), "was not used") {
			t.Errorf("%d %s: saved as %s, want %s: %s", i, d, s.Path, want, res.Text())
		}
	}
	for _, p := range []string{filepath.Join(e.workdir, "x"), filepath.Join(filepath.Dir(e.workdir), "x"), filepath.Join(e.workdir, "y"), filepath.Join(filepath.Dir(e.workdir), "y")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("a hostile name wrote %s", p)
		}
	}

	// Without a file name: the tool, the call and the type's extension.
	s = savedOf(t, e.call(t, "files__exportArchive", `{}`))
	if want := fmt.Sprintf("downloads/files__exportArchive-tc_%d.tar", e.calls); s.Path != want || s.Bytes != 5000 {
		t.Errorf("export: %+v, want %s", s, want)
	}
	for _, c := range []struct{ typ, ext string }{{"application/zip", ".zip"}, {"application/octet-stream", ".bin"}, {"image/png", ".png"}} {
		s := savedOf(t, e.call(t, "files__getFile", q(map[string]any{"name": "n", "type": c.typ, "size": 70000})))
		if !strings.HasSuffix(s.Path, c.ext) || s.MediaType != c.typ || s.Bytes != 70000 {
			t.Errorf("%s: %+v", c.typ, s)
		}
	}

	// What the model can read stays in the result.
	for _, c := range []struct {
		args  map[string]any
		check func(*tool.Result) bool
	}{
		{map[string]any{"name": "t", "type": "text/plain", "text": true}, func(r *tool.Result) bool { return strings.HasPrefix(r.Text(), "line 0 of") }},
		{map[string]any{"name": "t", "type": "application/octet-stream", "text": true}, func(r *tool.Result) bool { return strings.HasPrefix(r.Text(), "line 0 of") }},
		{map[string]any{"name": "t", "type": "image/png", "size": 2000}, func(r *tool.Result) bool {
			return len(r.Content) == 1 && r.Content[0].Type == tool.ContentImage
		}},
	} {
		res := e.call(t, "files__getFile", q(c.args))
		if res.IsError || res.Structured != nil || !c.check(res) {
			t.Errorf("%v: %v %.200s", c.args, res.IsError, res.Text())
		}
	}
	entries, _ := os.ReadDir(filepath.Join(e.workdir, "downloads"))
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	sort.Strings(names)
	if len(names) != 15 || strings.Contains(strings.Join(names, ","), ".part") {
		t.Errorf("downloads/ holds %d files: %v", len(names), names)
	}
}

// TestBinaryAnswersNotKept: an answer larger than max_file_bytes, cut off by a
// dropped connection, or with nowhere to go (downloads/ a symlink out of the working
// directory, a read-only working directory) leaves no file and says so; without a
// working directory the answer is named as before.
func TestBinaryAnswersNotKept(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t, func(c *Config) { c.MaxResponseBytes = 16 << 10; c.MaxFileBytes = 100 << 10 })
	res := e.call(t, "files__getFile", `{"name":"big","size":200000}`)
	if res.ErrorKind != tool.KindFailed || !strings.Contains(res.Text(), "HTTP 200 OK") || !strings.Contains(res.Text(), "max_file_bytes") {
		t.Errorf("too large: %s %s", res.ErrorKind, res.Text())
	}
	res = e.call(t, "files__exportArchive", `{}`) // fits
	savedOf(t, res)
	res = e.call(t, "files__getFile", `{"name":"drop","size":90000,"drop":true}`)
	if !res.IsError || res.ErrorKind != tool.KindUnavailable || !strings.Contains(res.Text(), "nothing was kept") {
		t.Errorf("dropped: %s %s", res.ErrorKind, res.Text())
	}
	entries, _ := os.ReadDir(filepath.Join(e.workdir, "downloads"))
	if len(entries) != 1 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Errorf("downloads/ should hold only the export: %v", names)
	}

	// downloads/ leading out of the working directory.
	e2 := newFileEnv(t, nil)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(e2.workdir, "downloads")); err != nil {
		t.Fatal(err)
	}
	res = e2.call(t, "files__getFile", `{"name":"x"}`)
	if res.ErrorKind != tool.KindFailed || !strings.Contains(res.Text(), "outside the working directory") || !strings.Contains(res.Text(), "could not be saved") {
		t.Errorf("downloads symlinked out: %s %s", res.ErrorKind, res.Text())
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("wrote outside the working directory: %d entries", len(entries))
	}

	// No working directory: named, as before.
	_, m := load(t, Config{Name: "files", Spec: filepath.Join("testdata", "files31.yaml"), BaseURL: e.api.srv.URL})
	res = call(t, m, "files__getFile", `{"name":"x"}`)
	if res.IsError || !strings.Contains(res.Text(), "[binary body: 1000 bytes of application/pdf]") {
		t.Errorf("without a workspace: %s", res.Text())
	}

	// A read-only working directory.
	e3 := newFileEnv(t, nil)
	readOnly(t, e3.workdir)
	res = e3.call(t, "files__exportArchive", `{}`)
	if res.ErrorKind != tool.KindFailed || !strings.Contains(res.Text(), "read-only") || !strings.Contains(res.Text(), "the API carried out the request") {
		t.Errorf("read-only: %s %s", res.ErrorKind, res.Text())
	}
}

// readOnly makes dir unwritable for the test: its mode for an ordinary user, the
// immutable attribute for root (whom modes do not stop).
func readOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot make %s read-only as root: chattr: %v %s", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
}
