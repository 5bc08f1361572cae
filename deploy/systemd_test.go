package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/config"
)

// unit is a parsed systemd unit file: section → key → values in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, b []byte) unit {
	t.Helper()
	u := unit{}
	section := ""
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		case section == "":
			t.Fatalf("unit line %d: %q outside a section", i+1, line)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.HasSuffix(line, `\`) {
				t.Fatalf("unit line %d: %q is not KEY=VALUE on one line", i+1, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func (u unit) get(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

func TestSystemdUnit(t *testing.T) {
	raw := readRepoFile(t, "deploy/systemd/toolserverd.service")
	u := parseUnit(t, raw)
	keys := documentedKeys(t)
	svc := "Service"

	exec0 := strings.Fields(u.get(svc, "ExecStart"))
	if len(exec0) == 0 || !filepath.IsAbs(exec0[0]) || filepath.Base(exec0[0]) != "toolserverd" {
		t.Fatalf("ExecStart %q should run the toolserverd binary by absolute path", u.get(svc, "ExecStart"))
	}
	if u.get("Install", "WantedBy") == "" {
		t.Error("no [Install] WantedBy: systemctl enable would do nothing")
	}
	if u.get(svc, "DynamicUser") != "yes" && u.get(svc, "User") == "" {
		t.Error("neither DynamicUser=yes nor a dedicated User=")
	}
	for key, want := range map[string]string{
		"StateDirectory":        "toolserverd",
		"NoNewPrivileges":       "yes",
		"ProtectSystem":         "strict",
		"ProtectHome":           "yes",
		"PrivateTmp":            "yes",
		"PrivateDevices":        "yes",
		"CapabilityBoundingSet": "",
		"KillMode":              "mixed",
		"Restart":               "on-failure",
	} {
		if vs, ok := u[svc][key]; !ok || vs[len(vs)-1] != want {
			t.Errorf("[Service] %s=%s is required (have %v)", key, want, vs)
		}
	}
	// What sandbox.mode isolated needs (see the unit's comments): no restriction of
	// namespaces, and no option that covers parts of /proc (the sandbox mounts a fresh
	// one, which the kernel refuses when the inherited /proc is not fully visible).
	for _, key := range []string{"RestrictNamespaces", "ProtectKernelTunables", "ProtectKernelLogs", "ProtectHostname",
		"ProtectProc", "ProcSubset", "PrivateUsers", "MemoryDenyWriteExecute"} {
		if vs, ok := u[svc][key]; ok {
			t.Errorf("[Service] %s=%v would break the isolated sandbox or the commands it runs", key, vs)
		}
	}
	if f := strings.Join(u[svc]["SystemCallFilter"], " "); f != "" {
		for _, need := range []string{"@mount", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"} {
			if !strings.Contains(f, need) {
				t.Errorf("SystemCallFilter lacks %s, which the isolated sandbox uses", need)
			}
		}
	}
	if f := u.get(svc, "RestrictAddressFamilies"); f != "" && !strings.Contains(f, "AF_NETLINK") {
		t.Error("RestrictAddressFamilies lacks AF_NETLINK (bubblewrap brings up the sandbox's loopback with it)")
	}

	// The environment: documented names, and it loads with the example config and the
	// example environment file.
	var environ []string
	for _, e := range u[svc]["Environment"] {
		for _, kv := range strings.Fields(e) {
			name, _, _ := strings.Cut(kv, "=")
			checkEnvName(t, keys, "the unit's Environment", name, false)
			environ = append(environ, kv)
		}
	}
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["TOOLSERVER_DATA_DIR"] != "/var/lib/"+u.get(svc, "StateDirectory") {
		t.Errorf("TOOLSERVER_DATA_DIR %q is not the StateDirectory", env["TOOLSERVER_DATA_DIR"])
	}
	for line := range strings.Lines(string(readRepoFile(t, "deploy/systemd/toolserverd.env.example"))) {
		line = strings.TrimSpace(line)
		assignment := strings.TrimPrefix(line, "#")
		name, _, ok := strings.Cut(assignment, "=")
		if !ok || strings.ContainsAny(name, " \t") {
			continue // prose
		}
		checkEnvName(t, keys, "toolserverd.env.example", name, false)
		if !strings.HasPrefix(line, "#") {
			environ = append(environ, line)
		}
	}
	file := env["TOOLSERVER_CONFIG"]
	if file != "/etc/"+u.get(svc, "ConfigurationDirectory")+"/config.yaml" {
		t.Errorf("TOOLSERVER_CONFIG %q is not config.yaml in the ConfigurationDirectory", file)
	}
	for i, kv := range environ {
		if strings.HasPrefix(kv, "TOOLSERVER_CONFIG=") {
			environ[i] = "TOOLSERVER_CONFIG=" + filepath.Join(repo, "deploy", "config.example.yaml")
		}
	}
	cfg, err := config.Load(nil, environ)
	if err != nil {
		t.Fatalf("the unit's environment with deploy/config.example.yaml does not load: %v", err)
	}
	stop, err := time.ParseDuration(u.get(svc, "TimeoutStopSec"))
	if err != nil || stop <= cfg.ShutdownTimeout+10*time.Second {
		t.Errorf("TimeoutStopSec %q: want more than shutdown_timeout %s + 10s", u.get(svc, "TimeoutStopSec"), cfg.ShutdownTimeout)
	}
}

// TestSystemdAnalyzeVerify runs systemd-analyze verify on the unit (with ExecStart
// pointing at a real binary, since verify checks that it exists) when the tool is
// installed.
func TestSystemdAnalyzeVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed; TestSystemdUnit checks the unit's directives")
	}
	bin := filepath.Join(imageBinaries(t), "toolserverd")
	raw := string(readRepoFile(t, "deploy/systemd/toolserverd.service"))
	exec0 := strings.Fields(parseUnit(t, []byte(raw)).get("Service", "ExecStart"))[0]
	unitFile := filepath.Join(t.TempDir(), "toolserverd.service")
	if err := os.WriteFile(unitFile, []byte(strings.Replace(raw, "ExecStart="+exec0, "ExecStart="+bin, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", unitFile).CombinedOutput()
	// verify may also complain about other units installed on the machine; only lines
	// about this one count.
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "toolserverd") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
