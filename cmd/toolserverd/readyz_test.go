package main

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// readyz returns /readyz's status code and checks.
func readyz(t *testing.T, url string) (int, map[string]string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Checks map[string]string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body.Checks
}

// TestReadyzSaysDataDirRemoved: with SQLite, a data directory deleted under the
// running daemon (a cleanup job, an operator's mistake) leaves it writing to files no
// path reaches, lost at the next start; /readyz says the store is not ready.
func TestReadyzSaysDataDirRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary")
	}
	bin := buildBinary(t)
	dataDir := t.TempDir()
	p := startWaitingIn(t, bin, dataDir, "")
	url := "http://" + p.next(t, 60*time.Second, "toolserverd listening")["addr"].(string)
	if code, checks := readyz(t, url); code != http.StatusOK {
		t.Fatalf("/readyz before: %d %v", code, checks)
	}
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	code, checks := readyz(t, url)
	if code != http.StatusServiceUnavailable || !strings.Contains(checks["store"], "no longer") {
		t.Errorf("/readyz after the data directory was removed: %d %v; want 503 with check store failing", code, checks)
	}
}
