package builtin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/tool"
	"github.com/toolserverd/toolserverd/internal/toolmgr"
)

func TestFileToolSpecs(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	tests := []struct {
		name      string
		readOnly  bool
		good, bad []string
	}{
		{"read_file", true, []string{`{"path":"a"}`, `{"path":"a","offset":3,"limit":10}`},
			[]string{`{}`, `{"path":""}`, `{"path":"a","offset":0}`, `{"path":"a","limit":0}`, `{"path":"a","x":1}`}},
		{"write_file", false, []string{`{"path":"a","content":""}`},
			[]string{`{"path":"a"}`, `{"content":"x"}`, `{"path":"a","content":1}`}},
		{"edit_file", false, []string{`{"path":"a","old_string":"x","new_string":"y","replace_all":true}`},
			[]string{`{"path":"a","old_string":"","new_string":"y"}`, `{"path":"a","old_string":"x"}`}},
		{"multi_edit", false, []string{`{"path":"a","edits":[{"old_string":"x","new_string":"y"}],"mode":"strict"}`},
			[]string{`{"path":"a","edits":[]}`, `{"path":"a","edits":[{"old_string":"x","new_string":"y"}],"mode":"all"}`,
				`{"path":"a","edits":[{"old_string":"x","new_string":"y","extra":1}]}`}},
		{"list_dir", true, []string{`{}`, `{"path":"a","depth":5,"show_hidden":true}`}, []string{`{"depth":6}`, `{"depth":0}`}},
		{"tree", true, []string{`{}`, `{"depth":10}`}, []string{`{"depth":11}`}},
		{"glob", true, []string{`{"pattern":"**/*.go","path":"src"}`}, []string{`{}`, `{"pattern":""}`}},
		{"grep", true, []string{`{"pattern":"x","include":"*.go","exclude":"*_test.go","case_insensitive":true,"context":2,"max_results":1000}`},
			[]string{`{"pattern":"x","context":11}`, `{"pattern":"x","max_results":1001}`, `{"pattern":""}`}},
		{"json_read", true, []string{`{"path":"a.json","pointer":"/a/0"}`}, []string{`{"pointer":""}`}},
		{"json_write", false, []string{`{"path":"a.json","pointer":"/a","value":null}`, `{"path":"a.json","pointer":"","value":{"x":[1]},"create_missing":true}`},
			[]string{`{"path":"a.json","pointer":"/a"}`, `{"path":"a.json","value":1}`}},
	}
	if len(e.tools) != len(tests) {
		t.Fatalf("FileTools returned %d tools, want %d", len(e.tools), len(tests))
	}
	for _, tt := range tests {
		spec := e.tools[tt.name].Spec()
		wantRisk := tool.RiskMedium
		if tt.readOnly {
			wantRisk = tool.RiskSafe
		}
		if spec.Name != tt.name || spec.Description == "" || spec.Documentation == "" || spec.Risk != wantRisk ||
			spec.ReadOnly != tt.readOnly || spec.ConcurrencySafe != tt.readOnly || spec.Mode != tool.ModeDirect || spec.Timeout <= 0 {
			t.Errorf("%s: spec %+v", tt.name, spec)
		}
		checkArguments(t, tt.name, spec.Parameters, tt.good, tt.bad)
	}
}

func numbered(from int, lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%6d\t%s\n", from+i, l)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "a.txt", "one\ntwo\nthree\nfour\n")
	e.put(t, "noeol.txt", "alpha\nbeta")
	e.put(t, "crlf.txt", "x\r\ny\r\n")
	e.put(t, "empty.txt", "")
	e.put(t, "long.txt", strings.Repeat("é", 2500)+"\nshort\n")
	e.put(t, "latin1.txt", "caf\xe9 au lait\nplain line here\n")
	e.put(t, "bin.dat", "\x7fELF\x02\x01\x01\x00\x00\x00rest")
	e.put(t, "utf16.txt", "\xff\xfeh\x00i\x00")
	e.put(t, "noise.bin", strings.Repeat("ab\x80\xff\xc3", 100))
	e.put(t, "dir/inner.txt", "in\n")
	tests := []struct {
		name string
		args map[string]any
		kind tool.ErrorKind
		want []string
		text string // the exact text, when set
	}{
		{name: "whole", args: map[string]any{"path": "a.txt"}, text: numbered(1, "one", "two", "three", "four")},
		{name: "no final newline", args: map[string]any{"path": "noeol.txt"}, text: numbered(1, "alpha", "beta")},
		{name: "crlf", args: map[string]any{"path": "crlf.txt"}, text: numbered(1, "x", "y")},
		{name: "window", args: map[string]any{"path": "a.txt", "offset": 2, "limit": 2},
			text: numbered(2, "two", "three") + "\n[showing lines 2-3 of 4; continue with offset=4]"},
		{name: "offset to the end", args: map[string]any{"path": "a.txt", "offset": 4}, text: numbered(4, "four")},
		{name: "offset past the end", args: map[string]any{"path": "a.txt", "offset": 5}, kind: tool.KindInvalidArgs, want: []string{"has 4 lines"}},
		{name: "empty", args: map[string]any{"path": "empty.txt"}, text: "empty.txt is empty (0 lines)."},
		{name: "long line cut", args: map[string]any{"path": "long.txt"},
			want: []string{"     1\t" + strings.Repeat("é", 2000) + " … [line cut: 1000 more bytes]", "     2\tshort", "[1 line longer than 2000 characters was cut]"}},
		{name: "a few invalid bytes", args: map[string]any{"path": "latin1.txt"}, want: []string{"caf\uFFFD au lait", "not all valid UTF-8"}},
		{name: "binary", args: map[string]any{"path": "bin.dat"}, kind: tool.KindFailed, want: []string{"binary file", "14 bytes", "application/octet-stream"}},
		{name: "mostly not utf-8", args: map[string]any{"path": "noise.bin"}, kind: tool.KindFailed, want: []string{"binary file", "500 bytes"}},
		{name: "utf-16", args: map[string]any{"path": "utf16.txt"}, kind: tool.KindFailed, want: []string{"binary", "utf-16le"}},
		{name: "missing", args: map[string]any{"path": "nope.txt"}, kind: tool.KindNotFound, want: []string{`"nope.txt" does not exist`}},
		{name: "directory", args: map[string]any{"path": "dir"}, kind: tool.KindInvalidArgs, want: []string{"is a directory", "list_dir"}},
		{name: "trailing slash", args: map[string]any{"path": "dir/inner.txt/"}, kind: tool.KindInvalidArgs},
		{name: "root", args: map[string]any{"path": "."}, kind: tool.KindInvalidArgs},
		{name: "nested", args: map[string]any{"path": "dir/inner.txt"}, text: numbered(1, "in")},
		{name: "absolute inside", args: map[string]any{"path": filepath.Join(e.dir, "dir/inner.txt")}, text: numbered(1, "in")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.run(t, "read_file", tt.args)
			if res.IsError != (tt.kind != "") || res.ErrorKind != tt.kind {
				t.Fatalf("is_error=%v kind=%q, want %q: %s", res.IsError, res.ErrorKind, tt.kind, res.Text())
			}
			if tt.text != "" && res.Text() != tt.text {
				t.Errorf("text:\n%s\nwant:\n%s", res.Text(), tt.text)
			}
			fileContains(t, res.Text(), tt.want...)
		})
	}
	// A binary file the model was told about may be replaced; an unread one may not.
	e.put(t, "other.bin", "\x00\x01")
	e.fail(t, "write_file", map[string]any{"path": "other.bin", "content": "x"}, tool.KindDenied)
	e.ok(t, "write_file", map[string]any{"path": "bin.dat", "content": "text now\n"})
}

func TestReadFileLarge(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	// 11 MiB of text: too large to read whole, fine to read a part of.
	line := strings.Repeat("x", 63) + "\n"
	e.put(t, "big.log", strings.Repeat(line, (11<<20)/64))
	e.fail(t, "read_file", map[string]any{"path": "big.log"}, tool.KindInvalidArgs, "11.0 MiB", "offset and limit")
	res := e.ok(t, "read_file", map[string]any{"path": "big.log", "offset": 10, "limit": 2})
	want := numbered(10, line[:63], line[:63]) + "\n[showing lines 10-11; the file is 11.0 MiB and has more lines; continue with offset=12]"
	if res.Text() != want {
		t.Errorf("text:\n%s\nwant:\n%s", res.Text(), want)
	}
	// Integers as models also write them (JSON Schema's integers): 10.0, 2e0.
	if res := e.ok(t, "read_file", map[string]any{"path": "big.log", "offset": json.Number("10.0"), "limit": json.Number("2e0")}); res.Text() != want {
		t.Errorf("offset 10.0, limit 2e0:\n%s\nwant:\n%s", res.Text(), want)
	}
	// A file within the size limit but beyond the output budget is shown in part.
	e.put(t, "wide.txt", strings.Repeat(strings.Repeat("y", 999)+"\n", 200))
	res = e.ok(t, "read_file", map[string]any{"path": "wide.txt"})
	if len(res.Text()) > outputBudget+500 {
		t.Errorf("shown %d bytes, more than the budget", len(res.Text()))
	}
	fileContains(t, res.Text(), "of 200; continue with offset=", "the output limit of 48.0 KiB was reached")
}

func TestReadFileImage(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var pngData, gifData bytes.Buffer
	if err := png.Encode(&pngData, img); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&gifData, img, nil); err != nil {
		t.Fatal(err)
	}
	// The name says text; the content decides.
	e.put(t, "pic.txt", pngData.String())
	e.put(t, "anim.gif", gifData.String())
	e.put(t, "huge.png", "\x89PNG\r\n\x1a\n"+strings.Repeat("\x00", maxImageFile))
	for _, tc := range []struct {
		path, mime string
		data       []byte
	}{{"pic.txt", "image/png", pngData.Bytes()}, {"anim.gif", "image/gif", gifData.Bytes()}} {
		res := e.ok(t, "read_file", map[string]any{"path": tc.path})
		if len(res.Content) != 2 || res.Content[1].Type != tool.ContentImage || res.Content[1].MimeType != tc.mime {
			t.Fatalf("%s: content %+v", tc.path, res.Content)
		}
		got, err := base64.StdEncoding.DecodeString(res.Content[1].Data)
		if err != nil || !bytes.Equal(got, tc.data) {
			t.Errorf("%s: image data differs (%v)", tc.path, err)
		}
		fileContains(t, res.Content[0].Text, tc.mime, "3x2 pixels")
	}
	e.fail(t, "read_file", map[string]any{"path": "huge.png"}, tool.KindFailed, "image/png", "larger than the 5.0 MiB")
	// Reading an image counts as a read for the guard, and so does a refused one.
	e.ok(t, "write_file", map[string]any{"path": "pic.txt", "content": "now text"})
	e.ok(t, "write_file", map[string]any{"path": "huge.png", "content": "small now"})
}

// TestWriteFileOneByte: a size of one byte is "1 byte", not "1 bytes".
func TestWriteFileOneByte(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	if got, want := e.ok(t, "write_file", map[string]any{"path": "one.txt", "content": "x"}).Text(), "Created one.txt (1 line, 1 byte)."; got != want {
		t.Errorf("write_file of one byte: %q, want %q", got, want)
	}
}

func TestWriteFileGuard(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "old.txt", "original\n")
	if err := os.Chmod(filepath.Join(e.dir, "old.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		tool    string
		args    map[string]any
		kind    tool.ErrorKind
		before  func()
		file    string // the file to check afterwards
		content string // its expected content
	}{
		{name: "new file with parents", tool: "write_file", args: map[string]any{"path": "new/deep/n.txt", "content": "hi\n"},
			file: "new/deep/n.txt", content: "hi\n"},
		{name: "unread existing file", tool: "write_file", args: map[string]any{"path": "old.txt", "content": "x"},
			kind: tool.KindDenied, file: "old.txt", content: "original\n"},
		{name: "edit of an unread file", tool: "edit_file", args: map[string]any{"path": "old.txt", "old_string": "original", "new_string": "x"},
			kind: tool.KindDenied, file: "old.txt", content: "original\n"},
		{name: "read it", tool: "read_file", args: map[string]any{"path": "old.txt"}, file: "old.txt", content: "original\n"},
		{name: "write after the read", tool: "write_file", args: map[string]any{"path": "old.txt", "content": "second\n"},
			file: "old.txt", content: "second\n"},
		{name: "write again without reading", tool: "write_file", args: map[string]any{"path": "old.txt", "content": "third\n"},
			file: "old.txt", content: "third\n"},
		{name: "changed on disk", tool: "write_file", args: map[string]any{"path": "old.txt", "content": "fourth\n"}, kind: tool.KindDenied,
			before: func() { e.put(t, "old.txt", "someone else's\n") }, file: "old.txt", content: "someone else's\n"},
		{name: "edit of a changed file", tool: "edit_file", args: map[string]any{"path": "old.txt", "old_string": "else", "new_string": "other"},
			kind: tool.KindDenied, file: "old.txt", content: "someone else's\n"},
		{name: "read again", tool: "read_file", args: map[string]any{"path": "old.txt"}, file: "old.txt", content: "someone else's\n"},
		{name: "touched, same content", tool: "edit_file", args: map[string]any{"path": "old.txt", "old_string": "else", "new_string": "other"},
			before: func() {
				later := time.Now().Add(time.Hour)
				if err := os.Chtimes(filepath.Join(e.dir, "old.txt"), later, later); err != nil {
					t.Fatal(err)
				}
			}, file: "old.txt", content: "someone other's\n"},
		{name: "same size, other content", tool: "write_file", args: map[string]any{"path": "old.txt", "content": "z"}, kind: tool.KindDenied,
			before: func() { e.put(t, "old.txt", "SOMEONE OTHER'S\n") }, file: "old.txt", content: "SOMEONE OTHER'S\n"},
		{name: "a directory", tool: "write_file", args: map[string]any{"path": "new", "content": "x"}, kind: tool.KindInvalidArgs},
		{name: "a parent that is a file", tool: "write_file", args: map[string]any{"path": "old.txt/x", "content": "x"}, kind: tool.KindInvalidArgs,
			file: "old.txt", content: "SOMEONE OTHER'S\n"},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		res := e.run(t, s.tool, s.args)
		if res.IsError != (s.kind != "") || res.ErrorKind != s.kind {
			t.Fatalf("%s: is_error=%v kind=%q, want %q: %s", s.name, res.IsError, res.ErrorKind, s.kind, res.Text())
		}
		if s.kind == tool.KindDenied {
			fileContains(t, res.Text(), "read_file", "Nothing was written")
		}
		if s.file != "" {
			if got := e.disk(t, s.file); got != s.content {
				t.Fatalf("%s: %s holds %q, want %q", s.name, s.file, got, s.content)
			}
		}
	}
	// The mode of the replaced file was kept; no temporary files were left behind.
	fi, err := os.Stat(filepath.Join(e.dir, "old.txt"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after writes: %v %v", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(e.dir)
	for _, d := range ents {
		if strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", d.Name())
		}
	}
	// Another session has read nothing.
	other := e.newSession("s2")
	if res := e.runIn(t, other, "write_file", map[string]any{"path": "new/deep/n.txt", "content": "x"}); res.ErrorKind != tool.KindDenied {
		t.Errorf("another session wrote a file it had not read: %s", res.Text())
	}
	res := e.ok(t, "write_file", map[string]any{"path": "w.txt", "content": "a\nb"})
	if got := fileStructured[writeFileOutput](t, res); got != (writeFileOutput{Path: "w.txt", Created: true, Bytes: 3, Lines: 2}) {
		t.Errorf("structured %+v", got)
	}
}

func TestWriteFileThroughSymlink(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	e.put(t, "real.txt", "real\n")
	e.symlink(t, "real.txt", "link.txt")
	e.ok(t, "read_file", map[string]any{"path": "link.txt"})
	// The read through the link counts for the target: one file, one record.
	e.ok(t, "write_file", map[string]any{"path": "real.txt", "content": "via target\n"})
	e.ok(t, "edit_file", map[string]any{"path": "link.txt", "old_string": "target", "new_string": "link"})
	if got := e.disk(t, "real.txt"); got != "via link\n" {
		t.Errorf("real.txt holds %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(e.dir, "link.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi, err)
	}
}

func TestFileGuardConcurrent(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	for i := range 8 {
		e.put(t, fmt.Sprintf("f%d.txt", i), "x\n")
	}
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			p := fmt.Sprintf("f%d.txt", i)
			for range 20 {
				if res := e.run(t, "read_file", map[string]any{"path": p}); res.IsError {
					t.Errorf("read: %s", res.Text())
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	for i := range 8 {
		e.ok(t, "write_file", map[string]any{"path": fmt.Sprintf("f%d.txt", i), "content": "y\n"})
	}
}

// TestFileToolsDispatch runs the tools through the real dispatcher: registration,
// schema validation, then the call.
func TestFileToolsDispatch(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	m := toolmgr.New()
	if err := m.Register(FileTools(e.m, Stamps{})...); err != nil {
		t.Fatal(err)
	}
	call := func(name, args string) *tool.Result {
		entry, ok := m.Lookup(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		tctx := &tool.Context{Context: t.Context(), CallID: "tc_x", ToolName: name, Session: e.sess, Progress: tool.NoProgress}
		return m.Run(entry, toolmgr.Invocation{Ctx: tctx, Args: json.RawMessage(args), Timeout: 10 * time.Second})
	}
	if res := call("write_file", `{"path":"d.txt","content":"hello\n"}`); res.IsError {
		t.Fatalf("write_file: %s", res.Text())
	}
	if res := call("read_file", `{"path":"d.txt","offset":0}`); res.ErrorKind != tool.KindInvalidArgs {
		t.Errorf("offset 0 passed validation: %s", res.Text())
	}
	if res := call("multi_edit", `{"path":"d.txt","edits":[{"old_string":"hello","new_string":"bye"}],"mode":"strict"}`); res.IsError {
		t.Errorf("multi_edit: %s", res.Text())
	}
	if res := call("json_write", `{"path":"c.json","pointer":"","value":null}`); res.IsError || e.disk(t, "c.json") != "null\n" {
		t.Errorf("json_write null: %s / %q", res.Text(), e.disk(t, "c.json"))
	}
	if got := e.disk(t, "d.txt"); got != "bye\n" {
		t.Errorf("d.txt holds %q", got)
	}
}

// TestReadFileCancelledInALongLine: the end of the call stops read_file even inside one
// line. A sparse file makes a line of a terabyte in no time; reading it to its end
// kept a goroutine and a file busy long after the dispatcher had answered. Reading
// a terabyte takes minutes, so the 30s hang guard tells a stop inside the line from
// a read to the end however loaded the machine is.
func TestReadFileCancelledInALongLine(t *testing.T) {
	t.Parallel()
	e := newFileEnv(t)
	// Text for the type sniffing, then a second line that never ends.
	p := e.put(t, "sparse.txt", "first line\n"+strings.Repeat("x", sniffLen))
	if err := os.Truncate(p, 1<<40); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	tctx := &tool.Context{Context: ctx, CallID: "tc_x", ToolName: "read_file", Session: e.sess, Progress: tool.NoProgress}
	start := time.Now()
	type ran struct {
		res *tool.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := e.tools["read_file"].Run(tctx, json.RawMessage(`{"path":"sparse.txt","offset":2,"limit":1}`))
		done <- ran{res, err}
	}()
	var r ran
	select {
	case r = <-done:
		t.Logf("read_file returned %s after it began (deadline 100ms)", time.Since(start))
	case <-time.After(30 * time.Second):
		t.Fatalf("read_file still reads %s after its 100ms deadline", time.Since(start))
	}
	res, err := r.res, r.err
	if err == nil {
		t.Fatalf("want a timeout, got %.200s", res.Text())
	}
	if res := tool.FromError(err); res.ErrorKind != tool.KindTimeout {
		t.Errorf("kind %q: %s", res.ErrorKind, res.Text())
	}
}
