package webui_test

import (
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/internal/testdaemon"
)

// TestServing checks what the daemon answers under /ui: the redirect, content types,
// revalidation headers, the 404 for unknown files, and the security headers.
func TestServing(t *testing.T) {
	t.Parallel()
	d := testdaemon.Start(t, nil)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", d.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	for _, tt := range []struct{ path, location string }{{"/ui", "ui/"}, {"/ui?x=1", "ui/?x=1"}} {
		resp, _ := get(tt.path, nil)
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != tt.location {
			t.Errorf("GET %s: %d Location %q, want 301 %q", tt.path, resp.StatusCode, resp.Header.Get("Location"), tt.location)
		}
	}

	files := []struct{ path, contentType, contains string }{
		{"/ui/", "text/html; charset=utf-8", `<script type="module" src="js/app.js">`},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>toolserverd console</title>"},
		{"/ui/js/app.js", "text/javascript; charset=utf-8", "import"},
		{"/ui/js/callpanel.js", "text/javascript; charset=utf-8", "progress/stream"},
		{"/ui/style.css", "text/css; charset=utf-8", ":root"},
		{"/ui/icon.svg", "image/svg+xml", "<svg"},
	}
	for _, f := range files {
		resp, body := get(f.path, nil)
		h := resp.Header
		if resp.StatusCode != http.StatusOK || h.Get("Content-Type") != f.contentType || !strings.Contains(body, f.contains) {
			t.Errorf("GET %s: %d %q, want 200 %q with %q", f.path, resp.StatusCode, h.Get("Content-Type"), f.contentType, f.contains)
			continue
		}
		if h.Get("Cache-Control") != "no-cache" || h.Get("ETag") == "" || h.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.Contains(h.Get("Content-Security-Policy"), "connect-src 'self'") {
			t.Errorf("GET %s headers: %v", f.path, h)
		}
		// Revalidation: the same ETag is a 304 without a body.
		again, body := get(f.path, map[string]string{"If-None-Match": h.Get("ETag")})
		if again.StatusCode != http.StatusNotModified || body != "" {
			t.Errorf("GET %s with If-None-Match: %d %q", f.path, again.StatusCode, body)
		}
		if other, _ := get(f.path, map[string]string{"If-None-Match": `"stale"`}); other.StatusCode != http.StatusOK {
			t.Errorf("GET %s with a stale ETag: %d", f.path, other.StatusCode)
		}
	}

	// Pages are chosen by the fragment, so the server has no fallback: unknown is 404.
	for _, p := range []string{"/ui/nope", "/ui/js/", "/ui/approvals", "/ui/../go.mod", "/ui/js/missing.js"} {
		resp, _ := get(p, nil)
		if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
			resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %d %q %q, want a 404 in plain text, not stored", p, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
		}
	}
	if resp, _ := get("/v1/tool-calls?status=running", nil); resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("the console's call list: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestStaticFiles checks the files themselves: every module a file imports exists,
// every file is reachable from index.html, and nothing names another origin (no CDN
// fonts or scripts: the console must work without the internet).
func TestStaticFiles(t *testing.T) {
	t.Parallel()
	root := filepath.Join(packageDir(), "static")
	served := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		served[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	imports := regexp.MustCompile(`(?m)(?:from|import)\s+'(\./[^']+)'|src="([^"]+)"|href="([^"#][^"]*)"`)
	reached := map[string]bool{"index.html": true}
	for name, body := range served {
		for _, m := range external.FindAllString(body, -1) {
			if m == "http://www.w3.org" || strings.HasPrefix(m, "//") {
				continue // the SVG namespace (never fetched); // comments
			}
			t.Errorf("%s names another origin: %s", name, m)
		}
		for _, m := range imports.FindAllStringSubmatch(body, -1) {
			ref := m[1] + m[2] + m[3]
			if strings.HasPrefix(ref, "data:") {
				continue
			}
			target := filepath.ToSlash(filepath.Join(filepath.Dir(name), ref))
			if _, ok := served[target]; !ok {
				t.Errorf("%s refers to %s, which is not a console file", name, ref)
			}
			reached[target] = true
		}
	}
	for name := range served {
		if !reached[name] {
			t.Errorf("%s is not used by any page", name)
		}
	}
	if len(served) < 10 {
		t.Fatalf("only %d files found: %v", len(served), served)
	}
}
