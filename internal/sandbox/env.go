package sandbox

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// envAllow is the host environment commands inherit; everything else (tokens, cloud
// credentials, the daemon's own TOOLSERVER_* settings) is dropped.
var envAllow = []string{"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME"}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// buildEnv scrubs host to the allowlist (plus extraAllow and LC_*), sets the
// sandbox's own HOME, TMPDIR and SHELL, then applies the operator's fixed variables
// and the call's extra ones ("KEY=VALUE", later wins).
func buildEnv(host, extraAllow []string, home, tmp, shell string, fixed, extra []string) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, kv := range host {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if slices.Contains(envAllow, k) || slices.Contains(extraAllow, k) || strings.HasPrefix(k, "LC_") {
			set(k, v)
		}
	}
	if vars["PATH"] == "" {
		set("PATH", defaultPath)
	}
	if vars["TERM"] == "" {
		set("TERM", "dumb")
	}
	set("HOME", home)
	set("TMPDIR", tmp)
	set("SHELL", shell)
	// git uses a repository it finds by walking up only when it is a .git directory
	// (or named by --git-dir / GIT_DIR): a directory laid out as a bare repository
	// would otherwise have its config (core.fsmonitor, core.pager …) run programs
	// under commands that read as harmless, like `cd dir && git status`. The setting
	// is added after any the host passes through (GIT_CONFIG_COUNT in env_allow).
	n, _ := strconv.Atoi(vars["GIT_CONFIG_COUNT"])
	n = max(n, 0)
	set("GIT_CONFIG_KEY_"+strconv.Itoa(n), "safe.bareRepository")
	set("GIT_CONFIG_VALUE_"+strconv.Itoa(n), "explicit")
	set("GIT_CONFIG_COUNT", strconv.Itoa(n+1))
	for _, kv := range fixed { // checked by Config.Validate
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !validEnvName(k) || strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("%w: environment entry %q is not NAME=value", ErrInvalidCommand, kv)
		}
		set(k, v)
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}
