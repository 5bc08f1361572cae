package openapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestFilesThroughASession: through a real daemon's call path, a session whose
// working directory holds the daemon's data dir sends a file a command made there
// by path, cannot send one of the data dir, saves a PDF the API answers (under a
// hostile suggested name) in its downloads/, and sends that file on again, byte for
// byte; the call's record holds the path, not the bytes.
func TestFilesThroughASession(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	received := map[string][]byte{} // request path → the bytes of its file
	pdf := append([]byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), bytes.Repeat([]byte{0, 0xff, 'x', 0x80}, 50000)...)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/files/") {
			w.Header().Set("Content-Type", "application/pdf")
			w.Header().Set("Content-Disposition", `attachment; filename="../../../etc/x.pdf"`)
			_, _ = w.Write(pdf)
			return
		}
		var data []byte
		if mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
			mr := multipart.NewReader(r.Body, params["boundary"])
			for p, err := mr.NextPart(); err == nil; p, err = mr.NextPart() {
				if p.FormName() == "file" {
					data, _ = io.ReadAll(p)
				}
			}
		} else {
			data, _ = io.ReadAll(r.Body)
		}
		mu.Lock()
		received[r.URL.Path] = data
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"stored":true}`)
	}))
	t.Cleanup(api.Close)
	spec, err := filepath.Abs(filepath.Join("testdata", "files31.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	d := testdaemon.Start(t, func(c *config.Config) {
		c.DataDir = filepath.Join(work, "data")
		c.Sessions.WorkdirRoots = []string{work}
		c.OpenAPI = []config.OpenAPIConfig{{Name: "files", Spec: spec, BaseURL: api.URL}}
		c.Permissions.Allow = []string{"files__*"}
	})
	var sess struct {
		ID string `json:"id"`
	}
	body := fmt.Sprintf(`{"available_tools":["files__*"],"workdir":%q}`, work)
	if err := json.Unmarshal(do(t, http.MethodPost, d.URL+"/v1/sessions", body, http.StatusCreated), &sess); err != nil {
		t.Fatal(err)
	}
	made := bytes.Repeat([]byte("\x1f\x8b\x08\x00tarball bytes\x00"), 20000)
	if err := os.MkdirAll(filepath.Join(work, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "build", "ctx.tar.gz"), made, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "data", "planted.txt"), []byte("daemon data"), 0o600); err != nil {
		t.Fatal(err)
	}

	msgs := callTools(t, d.URL, sess.ID, `[
		{"id":"up","name":"files__upload","arguments":{"file":{"path":"build/ctx.tar.gz"}}},
		{"id":"data","name":"files__putBlob","arguments":{"key":"k","body":{"path":"data/planted.txt"}}},
		{"id":"dl","name":"files__getFile","arguments":{"name":"report"}}]`)
	mu.Lock()
	up := received["/upload"]
	_, leaked := received["/blobs/k"]
	mu.Unlock()
	if m := msgs["up"]; m.IsError || !bytes.Equal(up, made) {
		t.Errorf("upload by path: %+v; the API got %d bytes of %d", m, len(up), len(made))
	}
	if m := msgs["data"]; !m.IsError || m.ErrorKind != "denied" || !strings.Contains(m.Content, "data directory") || leaked {
		t.Errorf("a file of the data dir: %+v (sent: %v)", m, leaked)
	}
	dl := msgs["dl"]
	name := "downloads/files__getFile-"
	i := strings.Index(dl.Content, name)
	if dl.IsError || i < 0 || !strings.Contains(dl.Content, fmt.Sprintf("application/pdf, %d bytes", len(pdf))) {
		t.Fatalf("download: %+v", dl)
	}
	saved := dl.Content[i : i+strings.Index(dl.Content[i:], ".pdf")+4]
	if b, _ := os.ReadFile(filepath.Join(work, saved)); !bytes.Equal(b, pdf) {
		t.Errorf("%s holds %d bytes, not the answer's %d", saved, len(b), len(pdf))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(work), "etc")); err == nil {
		t.Errorf("the hostile name made a directory beside the working directory")
	}
	rec := do(t, http.MethodGet, d.URL+"/v1/sessions/"+sess.ID+"/tool-calls/dl", "", http.StatusOK)
	sum := sha256.Sum256(pdf)
	if !bytes.Contains(rec, []byte(saved)) || !bytes.Contains(rec, []byte(hex.EncodeToString(sum[:]))) || bytes.Contains(rec, []byte("PDF-1.7")) {
		t.Errorf("the call's record: %.600s", rec)
	}

	// The saved answer goes on to another API call as it is.
	msgs = callTools(t, d.URL, sess.ID, fmt.Sprintf(`[{"id":"again","name":"files__putAny","arguments":{"key":"r","body":{"path":%q}}}]`, saved))
	mu.Lock()
	again := received["/any/r"]
	mu.Unlock()
	if m := msgs["again"]; m.IsError || !bytes.Equal(again, pdf) {
		t.Errorf("sending the download on: %+v; the API got %d bytes", m, len(again))
	}
}

// TestBinaryAnswerReadOnlySession: a GET is read-only, so a session in explore mode
// (which may change nothing) runs it; its PDF answer was still saved to the working
// directory's downloads/. Through a real daemon, the explore session now gets the
// body named in the text with why it was not saved, and no file; a default session
// calling the same operation still gets the PDF saved, byte for byte.
func TestBinaryAnswerReadOnlySession(t *testing.T) {
	t.Parallel()
	pdf := append([]byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), bytes.Repeat([]byte{0, 0xff, 'y', 0x80}, 30000)...)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Header().Set("Content-Disposition", `attachment; filename="report.pdf"`)
		_, _ = w.Write(pdf)
	}))
	t.Cleanup(api.Close)
	spec, err := filepath.Abs(filepath.Join("testdata", "files31.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	d := testdaemon.Start(t, func(c *config.Config) {
		c.DataDir = filepath.Join(work, "data")
		c.Sessions.WorkdirRoots = []string{work}
		c.OpenAPI = []config.OpenAPIConfig{{Name: "files", Spec: spec, BaseURL: api.URL}}
	})
	call := func(mode string) (message, string) {
		dir := filepath.Join(work, mode)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var sess struct {
			ID string `json:"id"`
		}
		body := fmt.Sprintf(`{"available_tools":["files__*"],"workdir":%q,"permission_mode":%q}`, dir, mode)
		if err := json.Unmarshal(do(t, http.MethodPost, d.URL+"/v1/sessions", body, http.StatusCreated), &sess); err != nil {
			t.Fatal(err)
		}
		return callTools(t, d.URL, sess.ID, `[{"id":"dl","name":"files__getFile","arguments":{"name":"report"}}]`)["dl"], dir
	}

	m, dir := call("explore")
	want := fmt.Sprintf("[binary body: %d bytes of application/pdf]", len(pdf))
	if m.IsError || !strings.Contains(m.Content, want) || !strings.Contains(m.Content, "not saved in the working directory") ||
		!strings.Contains(m.Content, "explore") || strings.Contains(m.Content, "PDF-1.7") {
		t.Errorf("explore: %+v, want %q and why it was not saved", m, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "downloads")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("explore: downloads/ is there (%v)", err)
	}

	m, dir = call("default")
	if b, _ := os.ReadFile(filepath.Join(dir, "downloads", "report.pdf")); m.IsError || !bytes.Equal(b, pdf) ||
		!strings.Contains(m.Content, "saved in the working directory as downloads/report.pdf") {
		t.Errorf("default: %+v; downloads/report.pdf holds %d bytes of %d", m, len(b), len(pdf))
	}
}
