package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolserverd/toolserverd/internal/store/pgtest"
)

// TestCallEventsOutliveLostStoreConnection: a client follows a running call at
// /v1/tool-calls/{id}/events; the daemon's connection that re-reads the call's record
// is lost mid-query (its backend is terminated while it waits, as in a PostgreSQL
// restart). The stream goes on and, once the call finishes, ends with its message and
// done, as every stream does, instead of breaking off without either.
func TestCallEventsOutliveLostStoreConnection(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	d := startDaemon(t, daemonOpts{store: url})
	id := d.createSession(map[string]any{"available_tools": []string{"block"}})["id"].(string)
	posted := make(chan []event, 1)
	go func() {
		_, evs := d.stream("/v1/sessions/"+id+"/tool-calls", `{"calls":[{"id":"b","name":"block"}]}`)
		posted <- evs
	}()
	tc := <-d.tools.blockStarts

	resp, err := http.Get(d.url + "/v1/tool-calls/" + tc + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	if l := <-lines; !strings.Contains(l, `"tool_start"`) {
		t.Fatalf("first event: %s", l)
	}

	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `LOCK TABLE tool_calls IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// The stream re-reads the record every 2s; wait for that read to queue on the lock,
	// then cut its connection.
	var pid int32
	waitFor(t, 30*time.Second, "the stream's read of the record waiting on the lock", func() bool {
		err := conn.QueryRow(t.Context(), `SELECT l.pid FROM pg_locks l WHERE NOT l.granted AND l.relation = 'tool_calls'::regclass LIMIT 1`).Scan(&pid)
		return err == nil
	})
	var ok bool
	if err := conn.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(d.tools.release)
	<-posted

	var got []string
	timeout := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case l, more := <-lines:
			if !more {
				t.Fatalf("the stream ended without done after the store connection was lost: %q", got)
			}
			got = append(got, l)
			var ev struct{ Type string }
			_ = json.Unmarshal([]byte(l), &ev)
			done = ev.Type == "done"
		case <-timeout:
			t.Fatalf("no done: %q", got)
		}
	}
	if len(got) < 2 || !strings.Contains(got[len(got)-2], `"message"`) || !strings.Contains(got[len(got)-2], `"is_error":false`) {
		t.Fatalf("the stream's last events: %q", got)
	}
}
