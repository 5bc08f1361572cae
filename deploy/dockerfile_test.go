package deploy_test

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/toolserverd/toolserverd/internal/config"
)

// Docker cannot run here, so the Dockerfile is checked in two halves: its structure
// (parsed below) and its build step, whose go build command line is taken from the
// file and run as it is, then the binary it makes is inspected and started.

type instruction struct {
	cmd   string   // upper case: FROM, RUN, COPY…
	flags []string // leading --name=value options
	args  string   // the rest, continuation lines joined
	line  int
}

type stage struct {
	image, name, platform string
	ins                   []instruction
}

type dockerfile struct{ stages []*stage }

// parseDockerfile reads instructions: comment lines are skipped (also inside
// continuations, as Docker does), lines ending in a backslash are joined.
func parseDockerfile(t *testing.T, b []byte) *dockerfile {
	t.Helper()
	var (
		df      dockerfile
		cur     strings.Builder
		startAt int
	)
	lines := strings.Split(string(b), "\n")
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		word, rest, _ := strings.Cut(text, " ")
		in := instruction{cmd: strings.ToUpper(word), line: startAt}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			flag, after, _ := strings.Cut(rest, " ")
			in.flags = append(in.flags, flag)
			rest = strings.TrimSpace(after)
		}
		in.args = rest
		if in.cmd == "FROM" {
			s := &stage{}
			f := strings.Fields(rest)
			s.image = f[0]
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			for _, fl := range in.flags {
				if v, ok := strings.CutPrefix(fl, "--platform="); ok {
					s.platform = v
				}
			}
			df.stages = append(df.stages, s)
		}
		if len(df.stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("Dockerfile line %d: %s before the first FROM", in.line, in.cmd)
			}
			return
		}
		st := df.stages[len(df.stages)-1]
		st.ins = append(st.ins, in)
	}
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			startAt = i + 1
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return &df
}

func (s *stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

func (s *stage) last(cmd string) (instruction, bool) {
	all := s.all(cmd)
	if len(all) == 0 {
		return instruction{}, false
	}
	return all[len(all)-1], true
}

// env is the stage's ENV, in KEY=VALUE form (values without quotes or spaces).
func (s *stage) env(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, in := range s.all("ENV") {
		for _, kv := range strings.Fields(in.args) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.ContainsAny(v, `"'$`) {
				t.Fatalf("Dockerfile line %d: write ENV as KEY=VALUE without quotes or variables, not %q", in.line, kv)
			}
			m[k] = v
		}
	}
	return m
}

// execForm parses a JSON array (exec form of ENTRYPOINT, CMD, HEALTHCHECK CMD).
func execForm(t *testing.T, in instruction, s string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(s), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("Dockerfile line %d: %s must use the exec (JSON array) form: %q", in.line, in.cmd, s)
	}
	return argv
}

// goBuild finds the build stage's RUN … go build … instruction and returns its
// argv and its variable assignments, with the build arguments TARGETOS and TARGETARCH
// set and -o replaced by out.
func (df *dockerfile) goBuild(goos, goarch, out string) (argv, env []string, err error) {
	var found []instruction
	for _, in := range df.stages[0].all("RUN") {
		if strings.Contains(in.args, "go build") {
			found = append(found, in)
		}
	}
	if len(found) != 1 {
		return nil, nil, fmt.Errorf("the first stage needs exactly one RUN with go build, found %d", len(found))
	}
	f, err := syntax.NewParser().Parse(strings.NewReader(found[0].args), "Dockerfile")
	if err != nil {
		return nil, nil, err
	}
	if len(f.Stmts) != 1 {
		return nil, nil, errors.New("the go build RUN must be one simple command (no && or ;)")
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(f.Stmts[0].Redirs) > 0 {
		return nil, nil, errors.New("the go build RUN must be one simple command")
	}
	cfg := &expand.Config{Env: expand.ListEnviron("TARGETOS="+goos, "TARGETARCH="+goarch)}
	for _, a := range call.Assigns {
		v, err := expand.Literal(cfg, a.Value)
		if err != nil {
			return nil, nil, err
		}
		env = append(env, a.Name.Value+"="+v)
	}
	if argv, err = expand.Fields(cfg, call.Args...); err != nil {
		return nil, nil, err
	}
	for i := range argv {
		if argv[i] == "-o" && i+1 < len(argv) {
			argv[i+1] = out
		}
	}
	return argv, env, nil
}

// finalStages are the stages that make an image to run: those with an ENTRYPOINT.
func (df *dockerfile) runtimeStages() []*stage {
	var out []*stage
	for _, s := range df.stages {
		if _, ok := s.last("ENTRYPOINT"); ok {
			out = append(out, s)
		}
	}
	return out
}

func TestDockerfileStructure(t *testing.T) {
	df := parseDockerfile(t, readRepoFile(t, "Dockerfile"))
	keys := documentedKeys(t)
	if len(df.stages) < 2 {
		t.Fatalf("the Dockerfile must be multi-stage, has %d stage(s)", len(df.stages))
	}
	names := map[string]bool{}
	for _, s := range df.stages {
		// Every base image is a previous stage, scratch, or pinned: a tag other than
		// latest, or a digest.
		switch {
		case names[s.image] || s.image == "scratch":
		case strings.Contains(s.image, "@sha256:"):
		default:
			last := s.image[strings.LastIndex(s.image, "/")+1:]
			_, tag, ok := strings.Cut(last, ":")
			if !ok || tag == "" || tag == "latest" || strings.Contains(tag, "$") {
				t.Errorf("FROM %s: pin the base image by tag or digest", s.image)
			}
		}
		if s.name != "" {
			names[s.name] = true
		}
		for _, in := range s.ins {
			if in.cmd == "ADD" && regexp.MustCompile(`(?i)(^|\s)(https?://|git@|git://)`).MatchString(in.args) {
				t.Errorf("Dockerfile line %d: ADD of a URL (fetch in a RUN with a checksum, or COPY)", in.line)
			}
			if in.cmd == "MAINTAINER" {
				t.Errorf("Dockerfile line %d: MAINTAINER is deprecated", in.line)
			}
		}
	}

	build := df.stages[0]
	if !strings.HasPrefix(build.image, "golang:") {
		t.Errorf("the build stage should start FROM golang:…, not %s", build.image)
	}
	argv, env, err := df.goBuild("linux", "amd64", "/out/")
	if err != nil {
		t.Fatal(err)
	}
	if !containsStr(env, "CGO_ENABLED=0") {
		t.Errorf("the go build needs CGO_ENABLED=0 for a static binary: %v", env)
	}
	if len(argv) < 2 || argv[0] != "go" || argv[1] != "build" || !containsStr(argv, "-trimpath") ||
		!containsStr(argv, "./cmd/toolserverd") || !containsStr(argv, "./cmd/toolserverctl") {
		t.Errorf("go build line: %v", argv)
	}
	ldflags := ""
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, "-ldflags="); ok {
			ldflags = v
		}
	}
	if f := strings.Fields(ldflags); !containsStr(f, "-s") || !containsStr(f, "-w") {
		t.Errorf(`go build needs -ldflags="-s -w", has %q`, ldflags)
	}

	final := df.stages[len(df.stages)-1]
	if !strings.Contains(final.image, "distroless") && final.image != "scratch" {
		t.Errorf("the default (last) stage should be minimal (distroless or scratch), is %s", final.image)
	}
	runtimes := df.runtimeStages()
	if len(runtimes) == 0 || runtimes[len(runtimes)-1] != final {
		t.Fatal("the last stage must have an ENTRYPOINT")
	}
	for _, s := range runtimes {
		t.Run(s.name, func(t *testing.T) { checkRuntimeStage(t, s, build.name, keys) })
	}
}

func checkRuntimeStage(t *testing.T, s *stage, buildStage string, keys map[string]bool) {
	// Binaries come from the build stage, both of them.
	copied := map[string]string{} // base name → destination directory
	for _, in := range s.all("COPY") {
		if !containsStr(in.flags, "--from="+buildStage) {
			continue
		}
		f := strings.Fields(in.args)
		for _, src := range f[:len(f)-1] {
			copied[path.Base(src)] = f[len(f)-1]
		}
	}
	for _, bin := range []string{"toolserverd", "toolserverctl"} {
		if copied[bin] == "" {
			t.Errorf("%s is not copied from the %s stage", bin, buildStage)
		}
	}
	binPath := func(name string) string { return path.Join(copied[name], name) }

	user, ok := s.last("USER")
	if !ok {
		t.Fatal("no USER: the image would run as root")
	}
	uid, _, _ := strings.Cut(user.args, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %s: use a numeric non-zero uid (Kubernetes runAsNonRoot can only verify numbers)", user.args)
	}

	env := s.env(t)
	for k := range env {
		checkEnvName(t, keys, "Dockerfile ENV", k, true)
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(nil, environ)
	if err != nil {
		t.Fatalf("the image's environment does not load: %v", err)
	}
	host, port, _ := net.SplitHostPort(cfg.Addr)
	if host != "0.0.0.0" && host != "" && host != "::" {
		t.Errorf("addr %s: a container must listen on every interface", cfg.Addr)
	}
	if cfg.Auth.Unauthenticated {
		t.Error("the image must not turn auth off")
	}
	expose, _ := s.last("EXPOSE")
	if p, _, _ := strings.Cut(expose.args, "/"); p != port {
		t.Errorf("EXPOSE %q does not match the listen port %s", expose.args, port)
	}
	vol, ok := s.last("VOLUME")
	if !ok || !strings.Contains(vol.args, `"`+cfg.DataDir+`"`) {
		t.Errorf("VOLUME %q should be the data_dir %s", vol.args, cfg.DataDir)
	}
	chowned := false
	for _, in := range s.all("COPY") {
		if f := strings.Fields(in.args); f[len(f)-1] == cfg.DataDir && containsStr(in.flags, "--chown="+user.args) {
			chowned = true
		}
	}
	if !chowned {
		t.Errorf("%s is not created with COPY --chown=%s (the volume must be writable by the user)", cfg.DataDir, user.args)
	}
	if u := env["TOOLSERVER_URL"]; u != "http://127.0.0.1:"+port {
		t.Errorf("TOOLSERVER_URL %q: toolserverctl (and the HEALTHCHECK) should reach the daemon at http://127.0.0.1:%s", u, port)
	}

	hc, ok := s.last("HEALTHCHECK")
	if !ok {
		t.Fatal("no HEALTHCHECK")
	}
	cmdArgs, ok := strings.CutPrefix(hc.args, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %q: want CMD [...]", hc.args)
	}
	if argv := execForm(t, hc, cmdArgs); argv[0] != binPath("toolserverctl") || !containsStr(argv, "health") {
		t.Errorf("HEALTHCHECK runs %v, want %s health", argv, binPath("toolserverctl"))
	}
	ep, _ := s.last("ENTRYPOINT")
	if argv := execForm(t, ep, ep.args); argv[len(argv)-1] != binPath("toolserverd") {
		t.Errorf("ENTRYPOINT %v does not end in %s", argv, binPath("toolserverd"))
	}
}

// TestDockerfileBuildsStaticBinaries runs the build stage's go build line (the
// Dockerfile's own text) and checks what it makes: static, stripped, trimmed
// binaries; toolserverd starts with the image's environment and answers the
// HEALTHCHECK; SIGTERM stops it cleanly.
func TestDockerfileBuildsStaticBinaries(t *testing.T) {
	dir := imageBinaries(t)
	root, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"toolserverd", "toolserverctl"} {
		bin := filepath.Join(dir, name)
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s has a %s program header: not a static binary", name, p.Type)
			}
		}
		for _, s := range f.Sections {
			if s.Name == ".dynamic" || s.Name == ".interp" || s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
				t.Errorf("%s has section %s (want static and stripped: -s -w)", name, s.Name)
			}
		}
		f.Close()
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		// (With -trimpath Go does not record -ldflags; the sections above show -s -w.)
		if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
			t.Errorf("%s build settings: CGO_ENABLED=%q -trimpath=%q", name, settings["CGO_ENABLED"], settings["-trimpath"])
		}
		if b, err := os.ReadFile(bin); err != nil {
			t.Fatal(err)
		} else if bytes.Contains(b, []byte(root+"/")) {
			t.Errorf("%s contains the build directory %s (-trimpath)", name, root)
		}
	}

	// Start it as the image does: its ENV, moved to a loopback port and a temp dir.
	df := parseDockerfile(t, readRepoFile(t, "Dockerfile"))
	final := df.stages[len(df.stages)-1]
	var env []string
	for k, v := range final.env(t) {
		env = append(env, k+"="+v)
	}
	data := t.TempDir()
	env = append(env, "TOOLSERVER_ADDR=127.0.0.1:0", "TOOLSERVER_DATA_DIR="+data)
	d := startDaemon(t, filepath.Join(dir, "toolserverd"), nil, env)

	// The first start wrote an admin key and said where.
	key, err := os.ReadFile(filepath.Join(data, "admin.key"))
	if err != nil {
		t.Fatalf("no admin.key after the first start: %v\n%s", err, d.logs)
	}
	if st, _ := os.Stat(filepath.Join(data, "admin.key")); st.Mode().Perm() != 0o600 {
		t.Errorf("admin.key has mode %v", st.Mode().Perm())
	}
	if !strings.Contains(d.logs.String(), filepath.Join(data, "admin.key")) {
		t.Errorf("the log does not say where the admin key is:\n%s", d.logs)
	}
	if code := get(t, d.url+"/v1/whoami", ""); code != 401 {
		t.Errorf("without a key: %d, want 401", code)
	}
	if code := get(t, d.url+"/v1/whoami", strings.TrimSpace(string(key))); code != 200 {
		t.Errorf("with admin.key: %d, want 200", code)
	}

	// The HEALTHCHECK command, with the image's TOOLSERVER_URL pointed at this port.
	hc, _ := final.last("HEALTHCHECK")
	argv := execForm(t, hc, strings.TrimPrefix(hc.args, "CMD "))
	ctl := filepath.Join(dir, path.Base(argv[0]))
	healthcheck := func(url string) (int, string) {
		cmd := exec.Command(ctl, argv[1:]...)
		cmd.Env = []string{"TOOLSERVER_URL=" + url}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := healthcheck(d.url); code != 0 {
		t.Errorf("HEALTHCHECK against the running daemon: exit %d: %s", code, out)
	}
	took := d.stop(t, 40*time.Second)
	t.Logf("stopped %s after SIGTERM", took)
	if code, _ := healthcheck(d.url); code != 1 {
		t.Errorf("HEALTHCHECK against a stopped daemon: exit %d, want 1", code)
	}
}

// TestDockerignoreKeepsTheBuildInputs: every file go build reads (the packages of
// both commands, their embedded files, go.mod, go.sum) reaches the build context, and
// the repository's clutter does not.
func TestDockerignoreKeepsTheBuildInputs(t *testing.T) {
	patterns := dockerignore(t)
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if not .Standard}}{{.Dir}}{{range .GoFiles}}|{{.}}{{end}}{{range .EmbedFiles}}|{{.}}{{end}}{{range .SFiles}}|{{.}}{{end}}{{end}}`,
		"./cmd/toolserverd", "./cmd/toolserverctl")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := filepath.Abs(repo)
	need := []string{"go.mod", "go.sum"}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), "|")
		rel, err := filepath.Rel(root, f[0])
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a module dependency, downloaded in the build
		}
		for _, file := range f[1:] {
			need = append(need, filepath.ToSlash(filepath.Join(rel, file)))
		}
	}
	if len(need) < 50 {
		t.Fatalf("go list found only %d files: %v", len(need), need)
	}
	for _, p := range need {
		if ignored(patterns, p) {
			t.Errorf(".dockerignore excludes %s, which the build needs", p)
		}
	}
	for _, p := range []string{".git", ".git/config", "toolserverd", "toolserverctl", "data/toolserverd.db",
		"testdata/npm/node_modules/x/index.js", "internal/webui/e2e/node_modules/a", "artifacts/ui/x.png"} {
		if !ignored(patterns, p) {
			t.Errorf(".dockerignore lets %s into the build context", p)
		}
	}
}

type ignorePattern struct {
	glob   string
	negate bool
}

func dockerignore(t *testing.T) []ignorePattern {
	var ps []ignorePattern
	for line := range strings.Lines(string(readRepoFile(t, ".dockerignore"))) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := ignorePattern{}
		if strings.HasPrefix(line, "!") {
			p.negate, line = true, line[1:]
		}
		p.glob = strings.TrimPrefix(path.Clean(line), "/")
		if !doublestar.ValidatePattern(p.glob) {
			t.Fatalf(".dockerignore: bad pattern %q", line)
		}
		ps = append(ps, p)
	}
	return ps
}

// ignored applies .dockerignore's rules: the last matching pattern wins, and a pattern
// matching a directory excludes what is under it.
func ignored(ps []ignorePattern, p string) bool {
	out := false
	for _, pat := range ps {
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			if ok, _ := doublestar.Match(pat.glob, q); ok {
				out = !pat.negate
				break
			}
		}
	}
	return out
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
