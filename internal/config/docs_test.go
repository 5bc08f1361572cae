package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// referenceRows are docs/config.md's table rows: key → the default column.
func referenceRows(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	row := regexp.MustCompile("^\\| `([a-z0-9_.]+)` \\| ([^|]*) \\|")
	for line := range strings.Lines(string(b)) {
		if m := row.FindStringSubmatch(line); m != nil {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("docs/config.md lists %s twice", m[1])
			}
			rows[m[1]] = strings.TrimSpace(m[2])
		}
	}
	return rows
}

// defaultValues maps every key to its value in Defaults().
func defaultValues(v reflect.Value, prefix string, out map[string]reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("mapstructure")
		if tag == "" || tag == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			defaultValues(v.Field(i), prefix+tag+".", out)
			continue
		}
		out[prefix+tag] = v.Field(i)
	}
}

// TestReferenceDefaults: every key docs/config.md lists exists, and the default it
// states is the one Defaults() sets.
func TestReferenceDefaults(t *testing.T) {
	t.Parallel()
	rows := referenceRows(t)
	values := map[string]reflect.Value{}
	defaultValues(reflect.ValueOf(Defaults()), "", values)
	var documented []string
	for k := range rows {
		documented = append(documented, k)
	}
	sort.Strings(documented)
	for _, k := range documented {
		doc := rows[k]
		v, ok := values[k]
		if !ok {
			t.Errorf("docs/config.md documents %s, which is no configuration key", k)
			continue
		}
		// Defaults that depend on the machine or on another key, described in words.
		switch k {
		case "replica_id":
			if doc != "host name" {
				t.Errorf("%s: documented default %q, want \"host name\"", k, doc)
			}
			continue
		case "cluster.advertise_url":
			if doc != "from `addr`" || v.String() != "" {
				t.Errorf("%s: documented default %q, Defaults() %q", k, doc, v.String())
			}
			continue
		}
		if doc == "none" || doc == "empty" {
			if !v.IsZero() {
				t.Errorf("%s: documented default %s, Defaults() sets %v", k, doc, v.Interface())
			}
			continue
		}
		if v.Kind() == reflect.Map {
			// permissions.risk_policy: its default is approval.DefaultRiskPolicy, which
			// fills the levels the file leaves out; Defaults() leaves the map empty.
			if v.Len() != 0 {
				t.Errorf("%s: Defaults() sets %v; compare it with the documented %q", k, v.Interface(), doc)
			}
			continue
		}
		lit, ok := strings.CutPrefix(doc, "`")
		if lit, ok = strings.CutSuffix(lit, "`"); !ok {
			t.Errorf("%s: documented default %q is not a literal", k, doc)
			continue
		}
		var same bool
		switch {
		case v.Type() == reflect.TypeOf(time.Duration(0)):
			d, err := time.ParseDuration(lit)
			if lit == "0" {
				d, err = 0, nil
			}
			same = err == nil && d == time.Duration(v.Int())
		case v.Kind() == reflect.String:
			same = lit == v.String()
		case v.Kind() == reflect.Bool:
			same = lit == strconv.FormatBool(v.Bool())
		case v.CanInt():
			same = lit == strconv.FormatInt(v.Int(), 10)
		case v.Kind() == reflect.Float64:
			f, err := strconv.ParseFloat(lit, 64)
			same = err == nil && f == v.Float()
		default:
			t.Errorf("%s: documented default %q; the test cannot compare a %s", k, doc, v.Type())
			continue
		}
		if !same {
			t.Errorf("%s: docs/config.md says the default is %q, Defaults() sets %v", k, lit, v.Interface())
		}
	}
}

// TestSecretVariableNamedByAKeyIsNoStrayVariable: a TOOLSERVER_ variable that an *_env
// key names (deploy/config.example.yaml suggests TOOLSERVER_WEBHOOK_SECRET) is read,
// so start-up must not warn that it is "not a configuration key; ignored".
func TestSecretVariableNamedByAKeyIsNoStrayVariable(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "approval_webhook: {url: https://hooks.example.com/x, secret_env: TOOLSERVER_WEBHOOK_SECRET}\n" +
		"openapi:\n  - name: pets\n    spec: https://example.com/openapi.json\n    auth: {bearer_token_env: TOOLSERVER_PETS_TOKEN}\n" +
		"mcp_servers:\n  - name: gh\n    transport: streamable_http\n    url: https://mcp.example.com/${TOOLSERVER_GH_PATH}\n" +
		"    headers: {Authorization: \"Bearer ${TOOLSERVER_GH_TOKEN}\", X-Literal: \"$${TOOLSERVER_LITERAL}\"}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load([]string{"--config", file}, []string{"TOOLSERVER_WEBHOOK_SECRET=s3cret", "TOOLSERVER_PETS_TOKEN=t", "TOOLSERVER_ADRR=x",
		"TOOLSERVER_GH_TOKEN=g", "TOOLSERVER_GH_PATH=p", "TOOLSERVER_LITERAL=l"})
	if err != nil {
		t.Fatal(err)
	}
	stray := false
	for _, w := range c.Warnings {
		if strings.Contains(w, "TOOLSERVER_WEBHOOK_SECRET") || strings.Contains(w, "TOOLSERVER_PETS_TOKEN") ||
			strings.Contains(w, "TOOLSERVER_GH_TOKEN") || strings.Contains(w, "TOOLSERVER_GH_PATH") {
			t.Errorf("warning about a variable a key names (or an MCP server's ${NAME}): %s", w)
		}
		stray = stray || strings.Contains(w, "TOOLSERVER_ADRR is not a configuration key")
	}
	if !stray {
		t.Errorf("no warning about the misspelt TOOLSERVER_ADRR: %q", c.Warnings)
	}
	// $${NAME} is a literal ${NAME}, not a use of the variable.
	if !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "TOOLSERVER_LITERAL is not a configuration key") }) {
		t.Errorf("no warning about TOOLSERVER_LITERAL, which only a literal $${…} names: %q", c.Warnings)
	}
}

// TestDocumentedVariablesExist: every TOOLSERVER_ variable the docs name is a key's
// (TOOLSERVER_ + the key in upper case, dots as underscores), one of the others the
// daemon or toolserverctl reads, one the tests read, or one the docs give as the value
// of an *_env key (a secret's variable, named by the operator).
func TestDocumentedVariablesExist(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, k := range Keys() {
		known["TOOLSERVER_"+strings.ToUpper(strings.ReplaceAll(k, ".", "_"))] = true
	}
	for name := range otherVariables {
		known[name] = true
	}
	// Read by the tests: scripts/test.sh and README's Tests and Web console sections.
	known["TOOLSERVER_TEST_POSTGRES_URL"], known["TOOLSERVER_UI_ARTIFACTS"] = true, true
	variable := regexp.MustCompile(`TOOLSERVER_[A-Z0-9_]*[A-Z0-9]`)
	found := 0
	for _, f := range []string{"../../README.md", "../../docs/config.md", "../../api/openapi.yaml", "../../deploy/config.example.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			for _, loc := range variable.FindAllStringIndex(line, -1) {
				name := line[loc[0]:loc[1]]
				found++
				if !known[name] && !strings.Contains(line[:loc[0]], "_env:") {
					t.Errorf("%s names %s, which neither the daemon nor toolserverctl reads", f, name)
				}
			}
		}
	}
	if found < 20 {
		t.Fatalf("found only %d TOOLSERVER_ variables in the docs", found)
	}
}

// TestReferenceListsTheFlags: docs/config.md's "Flags:" line names exactly the flags
// toolserverd takes.
func TestReferenceListsTheFlags(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\nFlags: ")
	if !ok {
		t.Fatal(`docs/config.md has no "Flags:" line`)
	}
	line, _, _ := strings.Cut(rest, "\n")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`--([a-z-]+)`").FindAllStringSubmatch(line, -1) {
		documented[m[1]] = true
	}
	fs, _ := flags()
	taken := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { taken[f.Name] = true })
	for name := range taken {
		if !documented[name] {
			t.Errorf("flag --%s is not in docs/config.md's Flags line", name)
		}
	}
	for name := range documented {
		if !taken[name] {
			t.Errorf("docs/config.md lists --%s, which toolserverd does not take", name)
		}
	}
}

// TestProseDefaults: where README.md or docs/config.md give a key's default in
// parentheses after it ("`sessions.idle_timeout` (30 m)", "`max_list_bytes` (32 MiB)"),
// the value is Defaults()'s.
func TestProseDefaults(t *testing.T) {
	t.Parallel()
	values := map[string]reflect.Value{}
	defaultValues(reflect.ValueOf(Defaults()), "", values)
	mention := regexp.MustCompile("`([a-z_]+(?:\\.[a-z_]+)*)` \\((?:default )?([0-9][0-9,]*) ?(ms|s|m|min|h|KiB|MiB)?\\)")
	found := 0
	for _, f := range []string{"../../README.md", "../../docs/config.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mention.FindAllStringSubmatch(string(b), -1) {
			v, ok := values[m[1]]
			if !ok || !v.CanInt() {
				continue // not a top-level key (an MCP server's or an OpenAPI source's)
			}
			found++
			n, err := strconv.ParseInt(strings.ReplaceAll(m[2], ",", ""), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", f, m[0])
			}
			var want, got int64 = n, v.Int()
			switch m[3] {
			case "ms":
				want = n * int64(time.Millisecond)
			case "s":
				want = n * int64(time.Second)
			case "m", "min":
				want = n * int64(time.Minute)
			case "h":
				want = n * int64(time.Hour)
			case "KiB":
				want = n << 10
			case "MiB":
				want = n << 20
			}
			if want != got {
				t.Errorf("%s: %s, but the default is %v", f, m[0], v.Interface())
			}
		}
	}
	if found < 8 {
		t.Fatalf("found only %d defaults given in prose", found)
	}
}
