package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolserverd/toolserverd/internal/auth"
	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// A fake but well-formed store URL, standing in for the Secret's value where the
// test does not start the daemon.
const fakeStore = "postgres://toolserverd:secret@postgres.test.invalid:5432/toolserverd?sslmode=disable"

// A fake pod name, what the downward API gives TOOLSERVER_REPLICA_ID, and a fake pod
// IP, what it gives for status.podIP.
const (
	fakePod   = "toolserverd-7d9c6b8f5-x2x7q"
	fakePodIP = "10.42.3.17"
)

type object = map[string]any

// envRef is a $(NAME) reference in a container's env value.
var envRef = regexp.MustCompile(`\$\([A-Za-z_][A-Za-z0-9_]*\)`)

// at walks maps (string keys) and lists (int indexes); nil when something is missing.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(object)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := at(v, path...).(string)
	return s
}

func list(v any, path ...any) []any {
	l, _ := at(v, path...).([]any)
	return l
}

// manifests are the documents of the files kustomization.yaml lists, by kind.
type manifests struct {
	byKind map[string][]object
	files  []string
}

func (m *manifests) one(t *testing.T, kind string) object {
	t.Helper()
	if len(m.byKind[kind]) != 1 {
		t.Fatalf("want one %s, have %d", kind, len(m.byKind[kind]))
	}
	return m.byKind[kind][0]
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	dir := filepath.Join(repo, "deploy", "kubernetes")
	var kust object
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/kubernetes/kustomization.yaml"), &kust); err != nil {
		t.Fatal(err)
	}
	if str(kust, "kind") != "Kustomization" {
		t.Fatalf("kustomization.yaml: kind %q", str(kust, "kind"))
	}
	m := &manifests{byKind: map[string][]object{}}
	listed := map[string]bool{"kustomization.yaml": true}
	for _, r := range list(kust, "resources") {
		name, _ := r.(string)
		listed[name] = true
		m.files = append(m.files, name)
		dec := yaml.NewDecoder(bytes.NewReader(readRepoFile(t, "deploy/kubernetes/"+name)))
		for i := 0; ; i++ {
			var doc object
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if doc == nil {
				continue
			}
			where := fmt.Sprintf("%s document %d", name, i+1)
			for _, f := range []string{"apiVersion", "kind"} {
				if str(doc, f) == "" {
					t.Errorf("%s: no %s", where, f)
				}
			}
			if str(doc, "metadata", "name") == "" {
				t.Errorf("%s: no metadata.name", where)
			}
			m.byKind[str(doc, "kind")] = append(m.byKind[str(doc, "kind")], doc)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); (ext == ".yaml" || ext == ".yml") && !listed[e.Name()] {
			t.Errorf("deploy/kubernetes/%s is not listed in kustomization.yaml", e.Name())
		}
	}
	return m
}

// k8s is the parsed deployment with the pieces the checks need.
type k8s struct {
	m          *manifests
	deploy     object
	pod        object // spec.template.spec
	container  object
	configMap  object
	secret     object
	configYAML string
	configPath string // where the pod reads config.yaml
}

func loadK8s(t *testing.T) *k8s {
	t.Helper()
	m := loadManifests(t)
	k := &k8s{m: m, deploy: m.one(t, "Deployment"), configMap: m.one(t, "ConfigMap"), secret: m.one(t, "Secret")}
	k.pod, _ = at(k.deploy, "spec", "template", "spec").(object)
	cs := list(k.pod, "containers")
	if len(cs) != 1 {
		t.Fatalf("want one container, have %d", len(cs))
	}
	k.container = cs[0].(object)
	k.configYAML = str(k.configMap, "data", "config.yaml")
	if k.configYAML == "" {
		t.Fatal("the ConfigMap has no config.yaml")
	}
	return k
}

// envValue resolves one env entry of the container the way the kubelet would;
// earlier is what the entries before it resolved to, for $(NAME) references.
func (k *k8s) envValue(t *testing.T, e object, earlier map[string]string) string {
	t.Helper()
	name := str(e, "name")
	if v, ok := e["value"]; ok {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("env %s: value must be a string", name)
		}
		// The kubelet expands $(NAME) of a variable defined above; anything else
		// stays as written.
		return envRef.ReplaceAllStringFunc(s, func(ref string) string {
			if v, ok := earlier[ref[2:len(ref)-1]]; ok {
				return v
			}
			return ref
		})
	}
	if ref := at(e, "valueFrom", "secretKeyRef"); ref != nil {
		if str(ref, "name") != str(k.secret, "metadata", "name") {
			t.Fatalf("env %s: Secret %q is not in the manifests", name, str(ref, "name"))
		}
		v := str(k.secret, "stringData", str(ref, "key"))
		if v == "" {
			t.Fatalf("env %s: the Secret has no stringData key %q", name, str(ref, "key"))
		}
		return v
	}
	if ref := at(e, "valueFrom", "fieldRef"); ref != nil {
		switch str(ref, "fieldPath") {
		case "metadata.name":
			return fakePod
		case "status.podIP":
			return fakePodIP
		}
		t.Fatalf("env %s: unexpected fieldRef %v", name, ref)
	}
	t.Fatalf("env %s: unsupported source %v", name, e)
	return ""
}

// environ is the container's environment, resolved, as KEY=VALUE.
func (k *k8s) environ(t *testing.T) map[string]string {
	env := map[string]string{}
	for _, e := range list(k.container, "env") {
		env[str(e, "name")] = k.envValue(t, e.(object), env)
	}
	return env
}

// loadConfig runs the ConfigMap's config.yaml and the container's environment
// through config.Load, with the file where TOOLSERVER_CONFIG says (moved to a temp
// dir) and the store URL replaced by store when it is not empty.
func (k *k8s) loadConfig(t *testing.T, configYAML, store string) (config.Config, []string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(configYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	var environ []string
	for name, v := range k.environ(t) {
		switch {
		case name == "TOOLSERVER_CONFIG":
			v = file
		case name == "TOOLSERVER_STORE" && store != "":
			v = store
		}
		environ = append(environ, name+"="+v)
	}
	cfg, err := config.Load(nil, environ)
	if err != nil {
		t.Fatalf("the ConfigMap's config.yaml with the Deployment's environment does not load: %v", err)
	}
	return cfg, environ
}

func TestKubernetesManifests(t *testing.T) {
	k := loadK8s(t)
	keys := documentedKeys(t)

	// Replicas, labels and selectors.
	if n, _ := at(k.deploy, "spec", "replicas").(int); n < 2 {
		t.Errorf("replicas %v: want at least 2", at(k.deploy, "spec", "replicas"))
	}
	podLabels, _ := at(k.deploy, "spec", "template", "metadata", "labels").(object)
	selects := func(what string, sel any) {
		s, _ := sel.(object)
		if len(s) == 0 {
			t.Errorf("%s: empty selector", what)
		}
		for lk, lv := range s {
			if podLabels[lk] != lv {
				t.Errorf("%s selects %s=%v, which the pods do not have (%v)", what, lk, lv, podLabels)
			}
		}
	}
	selects("the Deployment", at(k.deploy, "spec", "selector", "matchLabels"))
	svc := k.m.one(t, "Service")
	selects("the Service", at(svc, "spec", "selector"))
	pdb := k.m.one(t, "PodDisruptionBudget")
	selects("the PodDisruptionBudget", at(pdb, "spec", "selector", "matchLabels"))
	if fmt.Sprint(at(pdb, "spec", "selector", "matchLabels")) != fmt.Sprint(at(k.deploy, "spec", "selector", "matchLabels")) {
		t.Errorf("the PodDisruptionBudget's selector differs from the Deployment's")
	}
	replicas, _ := at(k.deploy, "spec", "replicas").(int)
	if mu, ok := at(pdb, "spec", "maxUnavailable").(int); ok && (mu < 1 || mu >= replicas) {
		t.Errorf("PodDisruptionBudget maxUnavailable %d: a drain must be possible and leave a replica", mu)
	}
	if ma, ok := at(pdb, "spec", "minAvailable").(int); ok && (ma < 1 || ma >= replicas) {
		t.Errorf("PodDisruptionBudget minAvailable %d: a drain must be possible and leave a replica", ma)
	}

	// The configuration: it loads, and what the manifests say agrees with it.
	env := k.environ(t)
	for name := range env {
		checkEnvName(t, keys, "the Deployment's env", name, false)
	}
	for _, must := range []string{"TOOLSERVER_STORE", "TOOLSERVER_REPLICA_ID", "TOOLSERVER_CONFIG"} {
		if _, ok := env[must]; !ok {
			t.Errorf("the Deployment does not set %s", must)
		}
	}
	if ref := at(envEntry(k, "TOOLSERVER_STORE"), "valueFrom", "secretKeyRef"); ref == nil {
		t.Error("TOOLSERVER_STORE must come from the Secret")
	}
	cfg, _ := k.loadConfig(t, k.configYAML, "")
	if cfg.Store != env["TOOLSERVER_STORE"] || !strings.HasPrefix(cfg.Store, "postgres") {
		t.Errorf("store %q: want the Secret's PostgreSQL URL", cfg.Store)
	}
	if cfg.ReplicaID != fakePod {
		t.Errorf("replica_id %q: want the pod name", cfg.ReplicaID)
	}
	if cfg.Auth.Unauthenticated {
		t.Error("auth.unauthenticated must stay off")
	}
	if cfg.Sandbox.Mode != "local" {
		t.Errorf("sandbox.mode %q: pods cannot create the isolated sandbox's namespaces", cfg.Sandbox.Mode)
	}
	var rawCfg object
	if err := yaml.Unmarshal([]byte(k.configYAML), &rawCfg); err != nil {
		t.Fatal(err)
	}
	if str(rawCfg, "addr") != "0.0.0.0:8080" {
		t.Errorf("config.yaml addr %q, want 0.0.0.0:8080", str(rawCfg, "addr"))
	}
	_, cfgPort, _ := net.SplitHostPort(cfg.Addr)
	// The other replicas forward progress reads and background-job calls to the URL a
	// replica advertises. Left empty it is made from the host name, which is the pod
	// name: no other pod can resolve it, so every forward would fail.
	if want := "http://" + net.JoinHostPort(fakePodIP, cfgPort); cfg.Cluster.AdvertiseURL != want {
		t.Errorf("cluster.advertise_url %q: want the pod IP and port, %s (TOOLSERVER_CLUSTER_ADVERTISE_URL from status.podIP)",
			cfg.Cluster.AdvertiseURL, want)
	}

	// Ports: container port = config port = Service targetPort; probes use it.
	var containerPort int
	portNames := map[string]int{}
	for _, p := range list(k.container, "ports") {
		n, _ := at(p, "containerPort").(int)
		portNames[str(p, "name")] = n
		containerPort = n
	}
	if len(portNames) != 1 || strconv.Itoa(containerPort) != cfgPort {
		t.Errorf("container ports %v, config port %s", portNames, cfgPort)
	}
	resolve := func(what string, p any) {
		n, isNum := p.(int)
		if s, ok := p.(string); ok {
			n, isNum = portNames[s]
		}
		if !isNum || n != containerPort {
			t.Errorf("%s port %v is not the container port %d", what, p, containerPort)
		}
	}
	sp := list(svc, "spec", "ports")
	if len(sp) == 0 {
		t.Fatal("the Service has no port")
	}
	for _, p := range sp {
		resolve("the Service's targetPort", at(p, "targetPort"))
	}

	// Probes: /healthz for liveness (and start-up), /readyz for readiness; both exist
	// in the API contract and need no key.
	var openapi object
	if err := yaml.Unmarshal(readRepoFile(t, "api/openapi.yaml"), &openapi); err != nil {
		t.Fatal(err)
	}
	for probe, want := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"} {
		p := at(k.container, probe, "httpGet")
		if p == nil {
			t.Errorf("no %s.httpGet", probe)
			continue
		}
		if str(p, "path") != want {
			t.Errorf("%s path %q, want %s", probe, str(p, "path"), want)
		}
		resolve(probe, at(p, "port"))
		op := at(openapi, "paths", str(p, "path"), "get")
		if op == nil {
			t.Errorf("%s: GET %s is not in api/openapi.yaml", probe, str(p, "path"))
		} else if sec, ok := at(op, "security").([]any); !ok || len(sec) != 0 {
			t.Errorf("%s: GET %s must not need a key (security: [])", probe, str(p, "path"))
		}
	}
	if path := str(k.deploy, "spec", "template", "metadata", "annotations", "prometheus.io/path"); path != "" && at(openapi, "paths", path, "get") == nil {
		t.Errorf("prometheus.io/path %s is not in api/openapi.yaml", path)
	}

	// Start-up: the daemon listens only once its store is open, after waiting up to
	// store_connect_timeout for a PostgreSQL that is not up yet (a node restart) and
	// migrating. The startup probe must outlast that wait, with room for the
	// migrations, or the kubelet restarts a pod that was about to serve.
	period, _ := at(k.container, "startupProbe", "periodSeconds").(int)
	threshold, _ := at(k.container, "startupProbe", "failureThreshold").(int)
	if budget := time.Duration(period*threshold) * time.Second; budget < cfg.StoreConnectTimeout+30*time.Second {
		t.Errorf("startupProbe allows %s (periodSeconds %d × failureThreshold %d): want at least store_connect_timeout %s + 30s for the migrations",
			budget, period, threshold, cfg.StoreConnectTimeout)
	}

	// Shutdown: the pod gets SIGKILL after terminationGracePeriodSeconds; the daemon
	// needs the preStop sleep, shutdown_timeout to drain, then up to 10 s for the calls
	// it cancelled.
	grace, _ := at(k.pod, "terminationGracePeriodSeconds").(int)
	preStop, _ := at(k.container, "lifecycle", "preStop", "sleep", "seconds").(int)
	need := time.Duration(preStop)*time.Second + cfg.ShutdownTimeout + 10*time.Second
	if time.Duration(grace)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %d: want more than preStop %ds + shutdown_timeout %s + 10s", grace, preStop, cfg.ShutdownTimeout)
	}

	// Security context: non-root, read-only root, no capabilities, RuntimeDefault
	// seccomp (the Pod Security "restricted" profile).
	sc := at(k.container, "securityContext")
	if at(sc, "readOnlyRootFilesystem") != true || at(sc, "allowPrivilegeEscalation") != false {
		t.Errorf("container securityContext: readOnlyRootFilesystem and allowPrivilegeEscalation: false needed: %v", sc)
	}
	if drop := list(sc, "capabilities", "drop"); len(drop) != 1 || drop[0] != "ALL" {
		t.Errorf("capabilities.drop %v, want [ALL]", drop)
	}
	psc := at(k.pod, "securityContext")
	if at(psc, "runAsNonRoot") != true && at(sc, "runAsNonRoot") != true {
		t.Error("runAsNonRoot is not set")
	}
	if uid, _ := at(psc, "runAsUser").(int); uid == 0 {
		t.Error("runAsUser must be a non-zero uid")
	}
	if str(psc, "seccompProfile", "type") != "RuntimeDefault" && str(sc, "seccompProfile", "type") != "RuntimeDefault" {
		t.Error("seccompProfile RuntimeDefault is not set")
	}

	// Volumes: config.yaml from the ConfigMap where TOOLSERVER_CONFIG points, emptyDirs
	// for data_dir and /tmp (the root file system is read-only).
	volumes := map[string]object{}
	for _, v := range list(k.pod, "volumes") {
		volumes[str(v, "name")] = v.(object)
	}
	mounts := map[string]object{} // mount path → volume
	for _, vm := range list(k.container, "volumeMounts") {
		v, ok := volumes[str(vm, "name")]
		if !ok {
			t.Errorf("volumeMount %s: no such volume", str(vm, "name"))
			continue
		}
		mounts[str(vm, "mountPath")] = v
	}
	cfgVol := mounts[filepath.Dir(env["TOOLSERVER_CONFIG"])]
	if str(cfgVol, "configMap", "name") != str(k.configMap, "metadata", "name") {
		t.Errorf("TOOLSERVER_CONFIG %s is not in a volume of the ConfigMap", env["TOOLSERVER_CONFIG"])
	} else if items := list(cfgVol, "configMap", "items"); len(items) > 0 && str(items[0], "path") != filepath.Base(env["TOOLSERVER_CONFIG"]) {
		t.Errorf("the ConfigMap volume maps config.yaml to %s", str(items[0], "path"))
	}
	for _, dir := range []string{cfg.DataDir, "/tmp"} {
		if v := mounts[dir]; v == nil || at(v, "emptyDir") == nil {
			t.Errorf("%s needs a writable volume (emptyDir): the root file system is read-only", dir)
		}
	}

	// Resources: requests and limits for CPU and memory; GOMEMLIMIT below the limit.
	for _, kind := range []string{"requests", "limits"} {
		for _, r := range []string{"cpu", "memory"} {
			if at(k.container, "resources", kind, r) == nil {
				t.Errorf("resources.%s.%s is not set", kind, r)
			}
		}
	}
	if gml, ok := env["GOMEMLIMIT"]; ok {
		limit := quantity(t, fmt.Sprint(at(k.container, "resources", "limits", "memory")))
		if soft := quantity(t, strings.TrimSuffix(gml, "B")); soft >= limit || soft < limit/2 {
			t.Errorf("GOMEMLIMIT %s should be a bit below limits.memory %v", gml, at(k.container, "resources", "limits", "memory"))
		}
	}
	if at(k.pod, "automountServiceAccountToken") != false {
		t.Error("automountServiceAccountToken: the daemon does not talk to the Kubernetes API")
	}

	// The image is the one kustomization.yaml rewrites.
	var kust object
	_ = yaml.Unmarshal(readRepoFile(t, "deploy/kubernetes/kustomization.yaml"), &kust)
	if str(kust, "images", 0, "name") != str(k.container, "image") {
		t.Errorf("container image %q is not rewritten by kustomization.yaml images", str(k.container, "image"))
	}
	// The Secret holds placeholders only.
	for key, v := range at(k.secret, "stringData").(object) {
		if s := fmt.Sprint(v); !strings.Contains(s, "REPLACE_ME") {
			t.Errorf("Secret %s: %q does not look like a placeholder", key, s)
		}
	}
	if len(cfg.Auth.Keys) > 0 && strings.Trim(cfg.Auth.Keys[0].SHA256, "0") != "" {
		t.Errorf("the ConfigMap's admin key hash should be the all-zero placeholder, not a real key's")
	}
}

func envEntry(k *k8s, name string) object {
	for _, e := range list(k.container, "env") {
		if str(e, "name") == name {
			return e.(object)
		}
	}
	return nil
}

// quantity parses the Kubernetes memory quantities used here (Ki, Mi, Gi, plain
// bytes).
func quantity(t *testing.T, s string) int64 {
	t.Helper()
	mult := int64(1)
	for suffix, m := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("quantity %q: %v", s, err)
	}
	return n * mult
}

// TestKubernetesConfigRejectsWrongKeys: the loader the manifest test relies on does
// stop at a misspelt key, so a wrong key in the ConfigMap fails the test above.
func TestKubernetesConfigRejectsWrongKeys(t *testing.T) {
	k := loadK8s(t)
	bad := strings.Replace(k.configYAML, "shutdown_timeout:", "shutdown_timout:", 1)
	if bad == k.configYAML {
		t.Fatal("config.yaml has no shutdown_timeout")
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(nil, []string{"TOOLSERVER_CONFIG=" + file, "TOOLSERVER_STORE=" + fakeStore})
	if err == nil || !strings.Contains(err.Error(), "shutdown_timout") {
		t.Fatalf("a misspelt key: %v", err)
	}
}

// TestKubernetesReplicasOnPostgres starts the Dockerfile-built daemon as the
// Deployment runs it, twice (its replica count) on one real PostgreSQL: each
// replica's environment is the Deployment's (with the test database as the Secret's
// store URL) and its config the ConfigMap's, with the placeholder admin hash replaced
// as the README says. Only the listen address and the data directory move (flags).
// Both pass their probes, accept the declared admin key, write no admin.key, and stop
// on SIGTERM well within the grace period.
func TestKubernetesReplicasOnPostgres(t *testing.T) {
	k := loadK8s(t)
	store := pgtest.URL(t)
	bin := filepath.Join(imageBinaries(t), "toolserverd")
	key, hash := auth.NewKey()
	zeros := strings.Repeat("0", 64)
	if !strings.Contains(k.configYAML, zeros) {
		t.Fatal("the ConfigMap has no placeholder admin hash")
	}
	configYAML := strings.Replace(k.configYAML, zeros, hash, 1)
	replicas, _ := at(k.deploy, "spec", "replicas").(int)
	grace, _ := at(k.pod, "terminationGracePeriodSeconds").(int)

	var procs []*proc
	for i := 0; i < replicas; i++ {
		_, environ := k.loadConfig(t, configYAML, store)
		for j, kv := range environ {
			if strings.HasPrefix(kv, "TOOLSERVER_REPLICA_ID=") {
				environ[j] = fmt.Sprintf("TOOLSERVER_REPLICA_ID=%s-%d", fakePod, i)
			}
		}
		data := t.TempDir()
		p := startDaemon(t, bin, []string{"--addr", "127.0.0.1:0", "--data-dir", data}, environ)
		procs = append(procs, p)
		if _, err := os.Stat(filepath.Join(data, "admin.key")); err == nil {
			t.Errorf("replica %d wrote admin.key although a key is declared", i)
		}
	}
	for i, p := range procs {
		for _, probe := range []string{"startupProbe", "livenessProbe", "readinessProbe"} {
			path := str(k.container, probe, "httpGet", "path")
			if code := get(t, p.url+path, ""); code != 200 {
				t.Errorf("replica %d: %s GET %s: %d\n%s", i, probe, path, code, p.logs)
			}
		}
		if code := get(t, p.url+"/v1/whoami", key); code != 200 {
			t.Errorf("replica %d: the declared admin key: %d", i, code)
		}
		if code := get(t, p.url+"/v1/whoami", "tsk_not-a-key"); code != 401 {
			t.Errorf("replica %d: an unknown key: %d", i, code)
		}
	}
	// A key created through one replica works on the other: they share the store.
	out, err := exec.Command(filepath.Join(filepath.Dir(bin), "toolserverctl"), "--url", procs[0].url, "--api-key", key,
		"keys", "create", "--roles", "agent", "--name", "replica-test").Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	if code := get(t, procs[len(procs)-1].url+"/v1/whoami", strings.TrimSpace(string(out))); code != 200 {
		t.Errorf("a key created on replica 0, used on replica %d: %d", len(procs)-1, code)
	}
	for _, p := range procs {
		p.stop(t, time.Duration(grace)*time.Second)
	}
}
