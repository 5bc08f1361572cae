package mcpproxy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// envRef is one ${NAME} in a value; NAME is what a shell would take as a variable.
var envRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ExpandEnv replaces every ${NAME} in c's url and the values of its headers and
// env by the daemon's variable NAME, as lookup (os.LookupEnv) gives it, trimmed of surrounding
// white space as the *_env keys of the configuration take theirs (a Kubernetes
// Secret read from a file often ends with a line break, which no header can carry).
// $${ stands for a literal ${; any other $ is taken as written. Args are not
// expanded: a secret there shows in every process listing, and mcp-remote expands
// ${NAME} of its own args from the env it is given. A variable that is
// not set, or is empty, is an error naming the key and the variable, never the value;
// c is then left as it was.
//
// It is meant for servers of the configuration file, which the operator wrote: a
// server added through the API must not read the daemon's environment (its
// TOOLSERVER_STORE, its keys) into headers sent to a URL of the client's choosing
// (see RefuseEnvReferences). The values taken are remembered, so that they are
// redacted wherever the proxy shows something of the server, whatever their key.
func (c *ServerConfig) ExpandEnv(lookup func(string) (string, bool)) error {
	var errs []error
	expand := func(field string, m map[string]string) map[string]string {
		if len(m) == 0 {
			return m
		}
		out := make(map[string]string, len(m))
		for _, k := range sortedKeys(m) {
			v, taken, err := expandValue(m[k], lookup)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s.%s: %w", field, k, err))
				continue
			}
			out[k] = v
			c.fromEnv = append(c.fromEnv, taken...)
		}
		return out
	}
	headers, env := expand("headers", c.Headers), expand("env", c.Env)
	u, taken, err := expandValue(c.URL, lookup)
	if err != nil {
		errs = append(errs, fmt.Errorf("url: %w", err))
	}
	c.fromEnv = append(c.fromEnv, taken...)
	if err := errors.Join(errs...); err != nil {
		c.fromEnv = nil
		return fmt.Errorf("mcp server %s: %w", c.Name, err)
	}
	c.Headers, c.Env, c.URL = headers, env, u
	return nil
}

// shownURL is c's url as an error may quote it: without the values ExpandEnv put in
// (which redactURL misses when one breaks the URL's syntax: a "/" in a password
// ends the authority), then without userinfo and query.
func (c *ServerConfig) shownURL() string {
	u := c.URL
	for _, v := range c.fromEnv {
		u = strings.ReplaceAll(u, v, redactedText)
	}
	return redactURL(u)
}

// expandValue expands the references of one value and returns the variables'
// values it took, but for the process's own (processVars).
func expandValue(v string, lookup func(string) (string, bool)) (string, []string, error) {
	if !strings.Contains(v, "${") {
		return v, nil, nil
	}
	var b strings.Builder
	var taken []string
	for i := 0; i < len(v); {
		switch {
		case strings.HasPrefix(v[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(v[i:], "${"):
			m := envRef.FindStringSubmatch(v[i:])
			if m == nil {
				return "", nil, errors.New("${ must be followed by a variable name ([A-Za-z_][A-Za-z0-9_]*) and }; write $${ for a literal ${")
			}
			val, ok := lookup(m[1])
			val = strings.TrimSpace(val)
			if !ok || val == "" {
				return "", nil, fmt.Errorf("the variable %s is not set", m[1])
			}
			b.WriteString(val)
			if !isPrivate(m[1], processVars) {
				// ${HOME}/data or ${PATH}:/opt/bin is no secret: redacted, every
				// path under the home directory in an error would read REDACTED/….
				taken = append(taken, val)
			}
			i += len(m[0])
		default:
			b.WriteByte(v[i])
			i++
		}
	}
	return b.String(), taken, nil
}

// SecretEnvReferences are the names of the variables c takes with ${NAME} (before
// ExpandEnv), in order of appearance, each once, but for the process's own
// (processVars: PATH: "${PATH}:/opt/bin" is no secret). Like the values taken, which
// are redacted whatever their key, they are taken as secrets meant for c: other
// stdio servers are not to inherit them (see childEnv).
func (c *ServerConfig) SecretEnvReferences() []string {
	var names []string
	scan := func(v string) {
		for i := 0; i < len(v); {
			switch {
			case strings.HasPrefix(v[i:], "$${"):
				i += 3
			case strings.HasPrefix(v[i:], "${"):
				if m := envRef.FindStringSubmatch(v[i:]); m != nil {
					if !isPrivate(m[1], processVars) && !slices.Contains(names, m[1]) {
						names = append(names, m[1])
					}
					i += len(m[0])
					continue
				}
				i += 2
			default:
				i++
			}
		}
	}
	scan(c.URL)
	for _, m := range []map[string]string{c.Headers, c.Env} {
		for _, k := range sortedKeys(m) {
			scan(m[k])
		}
	}
	return names
}

// processVars are variables every process is given, which a server's ${NAME} may
// extend without making them its secret (a name, or a PREFIX*).
var processVars = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "TMPDIR", "LANG", "LANGUAGE", "LC_*", "TERM", "TZ"}

// RefuseEnvReferences says which value of a configuration sent through the API
// holds ${, which would read the daemon's environment in one from the
// configuration file: the API takes values as written, so it refuses those rather
// than send the characters ${NAME} where a secret was meant.
func (c *ServerConfig) RefuseEnvReferences() error {
	if strings.Contains(c.URL, "${") {
		return fmt.Errorf("mcp server %s: url: ${…} takes a value from the daemon's environment, which only servers of the configuration file may do; "+
			"a server added through the API must carry its values", c.Name)
	}
	for _, f := range []struct {
		field string
		m     map[string]string
	}{{"headers", c.Headers}, {"env", c.Env}} {
		for _, k := range sortedKeys(f.m) {
			if strings.Contains(f.m[k], "${") {
				return fmt.Errorf("mcp server %s: %s.%s: ${…} takes a value from the daemon's environment, which only servers of the configuration file may do; "+
					"a server added through the API must carry its values", c.Name, f.field, k)
			}
		}
	}
	return nil
}

// childEnv is the environment of a stdio server: the daemon's own (environ) without
// the variables private names (NAME, or PREFIX* for every variable that begins
// with PREFIX), then the server's env over it. A private variable the server's env
// names is the one env gives.
func childEnv(environ, private []string, env map[string]string) []string {
	out := make([]string, 0, len(environ)+len(env))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, given := env[name]; given || isPrivate(name, private) {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func isPrivate(name string, private []string) bool {
	for _, p := range private {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
