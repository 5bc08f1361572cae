package server_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolserverd/toolserverd/internal/config"
	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestUnsafeCallsSerializedAcrossReplicas: two daemons on one PostgreSQL serve one
// session; execute_command (not concurrency-safe) calls sent to both at once never
// overlap. Each call claims a directory with mkdir, which fails if another call of
// the session holds it, so an overlap is recorded by the command itself, not inferred
// from timing (without the advisory lock half of them overlap).
func TestUnsafeCallsSerializedAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	shared := t.TempDir()
	opts := func(replica string) daemonOpts {
		return daemonOpts{store: url, mutate: func(c *config.Config) {
			c.ReplicaID = replica
			c.Sessions.WorkdirRoots = []string{shared}
		}}
	}
	replicas := []*daemon{startDaemon(t, opts("replica-a")), startDaemon(t, opts("replica-b"))}
	id := replicas[0].createSession(map[string]any{"available_tools": []string{"execute_command"}, "workdir": shared})["id"].(string)

	const perReplica = 4
	cmd := `if mkdir held 2>/dev/null; then sleep 0.2; echo ok >> ran.txt; rmdir held; else echo OVERLAP >> ran.txt; fi`
	bodies := make([][]byte, 2*perReplica)
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := replicas[i%2]
			body := fmt.Sprintf(`{"calls":[{"id":"c%d","name":"execute_command","arguments":{"command":%q}}]}`, i, cmd)
			resp, err := http.Post(d.url+"/v1/sessions/"+id+"/tool-calls", "application/json", strings.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			bodies[i], errs[i] = io.ReadAll(resp.Body)
			if errs[i] == nil && resp.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("status %d: %s", resp.StatusCode, bodies[i])
			}
		}()
	}
	wg.Wait()
	for i, b := range bodies {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		m := messages(t, parseNDJSON(t, b))[fmt.Sprint("c", i)]
		if m.m["is_error"] != false {
			t.Fatalf("call %d: %s", i, m.raw)
		}
	}
	got, err := os.ReadFile(filepath.Join(shared, "ran.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("ok\n", 2*perReplica); string(got) != want {
		t.Fatalf("ran.txt = %q, want %q: unsafe calls of one session overlapped across replicas", got, want)
	}
	for _, d := range replicas {
		if d.tools.unsafeMax.Load() > 1 {
			t.Fatalf("in-process overlap on %s", d.url)
		}
	}
}
