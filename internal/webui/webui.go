// Package webui is the web console: static HTML, CSS and JavaScript modules embedded
// in the binary and served under /ui/. The pages talk only to the REST API of the same
// origin; there is no build step and nothing is fetched from elsewhere at run time.
package webui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// contentSecurityPolicy lets the pages load only their own files and talk only to
// their own origin: a page that tried to fetch a font or a script from elsewhere
// would be refused by the browser.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

type file struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the console's files. Pages are addressed by the URL fragment
// (/ui/#/approvals), so the server needs no fallback: an unknown path is a 404.
type Handler struct {
	files map[string]file // by path below static/, "index.html" for the root
}

// New reads the embedded files once.
func New() *Handler {
	h := &Handler{files: map[string]file{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil // not served: only known kinds of file go out
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.files[strings.TrimPrefix(p, "static/")] = file{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic("webui: embedded files: " + err.Error()) // the binary itself is broken
	}
	return h
}

// ServeHTTP serves GET /ui/{path}. Files are revalidated on every load (no-cache with
// an ETag: a 304 costs one round trip) so a new binary's console is never mixed with
// an old one's cached modules.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	if name == "" {
		name = "index.html"
	}
	f, ok := h.files[name]
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	if !ok {
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
		hdr.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("404 not found: the console has no file " + r.URL.Path + "\n"))
		return
	}
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("Referrer-Policy", "no-referrer")
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hdr.Set("Content-Type", f.contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(f.body)
}

func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// Redirect sends /ui to /ui/ (relative, so it also works behind a path prefix).
func Redirect(w http.ResponseWriter, r *http.Request) {
	target := "ui/"
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	// Set by hand: http.Redirect would make the target absolute.
	w.Header().Set("Location", target)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusMovedPermanently)
	_, _ = w.Write([]byte("the console is at " + target + "\n"))
}
