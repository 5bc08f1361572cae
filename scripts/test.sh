#!/usr/bin/env bash
# The whole test suite: installs what the tests need (if it is missing), runs every
# package under the race detector, then runs each fuzz target briefly.
#   scripts/test.sh            # everything
#   FUZZTIME=0 scripts/test.sh # skip the fuzzing pass
set -euo pipefail
cd "$(dirname "$0")/.."

export CI="${CI:-}"
FUZZTIME="${FUZZTIME:-8s}"

have_pg_binaries() { compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else return 1; fi; }
# apt_update refreshes the package lists once per run, before the first install.
apt_updated=
apt_update() { [ -n "$apt_updated" ] || { as_root apt-get update -qq && apt_updated=1; }; }

# PostgreSQL: the tests use TOOLSERVER_TEST_POSTGRES_URL, or start a throwaway cluster
# from the local server binaries. Install them when neither is available.
if [ -z "${TOOLSERVER_TEST_POSTGRES_URL:-}" ] && ! have_pg_binaries; then
  echo "test.sh: installing PostgreSQL server binaries" >&2
  apt_update && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
    || echo "test.sh: could not install PostgreSQL; PostgreSQL tests will fail under CI=true" >&2
fi
# bubblewrap lets the sandbox tests cover the bwrap backend as well as raw namespaces.
if ! command -v bwrap >/dev/null; then
  { apt_update && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1; } \
    || echo "test.sh: bubblewrap not installed; the bwrap backend tests will be skipped" >&2
fi

# Headless Chromium for the web console's end-to-end tests (internal/webui), driven by
# playwright-core from npm; the browser is always the Debian package, never a download.
if [ ! -x /usr/bin/chromium ]; then
  echo "test.sh: installing chromium" >&2
  { apt_update && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "test.sh: could not install chromium; the web console tests will fail under CI=true" >&2
fi

# Real MCP servers for the MCP proxy tests and the TypeScript SDK client of the /mcp
# endpoint tests, pinned in testdata/npm/package-lock.json, and the npm MCP proxies
# the mcpcompare benchmark (and its smoke test) compares with.
if command -v npm >/dev/null; then
  (cd testdata/npm && npm ci --no-audit --no-fund --loglevel=error) \
    || echo "test.sh: npm ci failed; MCP proxy tests will fail under CI=true" >&2
  (cd bench/mcpcompare && npm ci --no-audit --no-fund --loglevel=error) \
    || echo "test.sh: npm ci failed in bench/mcpcompare; its smoke test will fail under CI=true" >&2
  # The providers' TypeScript SDKs (and tsc) whose types the daemon's listings and
  # messages are checked against, pinned in testdata/sdktypes/package-lock.json.
  (cd testdata/sdktypes && npm ci --no-audit --no-fund --loglevel=error) \
    || echo "test.sh: npm ci failed in testdata/sdktypes; the provider SDK type test will fail under CI=true" >&2
  # playwright-core for the web console tests, pinned in internal/webui/e2e/package-lock.json.
  (cd internal/webui/e2e && npm ci --no-audit --no-fund --loglevel=error) \
    || echo "test.sh: npm ci failed; web console tests will fail under CI=true" >&2
else
  echo "test.sh: npm not found; MCP proxy and web console tests will fail under CI=true" >&2
fi

go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed:"; echo "$unformatted"; exit 1; fi

go test -race -count=1 -timeout 30m ./...

if [ "$FUZZTIME" != "0" ]; then
  # Each fuzz target for a few seconds beyond its seed corpus (which ran above).
  for pkg in $(go list ./...); do
    dir=$(go list -f '{{.Dir}}' "$pkg")
    for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
      echo "fuzz $pkg $target ($FUZZTIME)"
      for attempt in 1 2; do
        if out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1); then break; fi
        # A finding always writes its input to testdata/fuzz. On a loaded machine the fuzz
        # coordinator can also give up on a busy worker at the time limit ("context
        # deadline exceeded") without any finding: try once more, then say so and go on.
        if grep -q 'Failing input written' <<<"$out" || ! grep -q 'context deadline exceeded' <<<"$out"; then
          echo "$out"; exit 1
        fi
        [ "$attempt" = 2 ] && echo "test.sh: $target: the fuzz engine timed out stopping its workers twice, with no finding; not a failure" >&2
      done
    done
  done
fi
echo "test.sh: all passed"
