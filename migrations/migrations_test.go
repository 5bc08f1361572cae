package migrations_test

import (
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/toolserverd/toolserverd/migrations"
)

var fileName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(up|down)\.sql$`)

// TestLayout checks what the migrator relies on: every file is named NNNN_name.up|down.sql,
// every up has its down, numbers run from 1 without gaps, and both dialects have the
// same list of migrations.
func TestLayout(t *testing.T) {
	t.Parallel()
	lists := map[string][]string{}
	for name, fsys := range map[string]fs.FS{"sqlite": migrations.SQLite(), "postgres": migrations.Postgres()} {
		entries, err := fs.ReadDir(fsys, ".")
		if err != nil {
			t.Fatalf("%s: read dir: %v", name, err)
		}
		if len(entries) == 0 {
			t.Fatalf("%s: no migrations embedded", name)
		}
		ups := map[int]string{}
		downs := map[int]string{}
		for _, e := range entries {
			m := fileName.FindStringSubmatch(e.Name())
			if m == nil {
				t.Errorf("%s: %q does not match NNNN_name.(up|down).sql", name, e.Name())
				continue
			}
			v, _ := strconv.Atoi(m[1])
			b, err := fs.ReadFile(fsys, e.Name())
			if err != nil {
				t.Fatalf("%s: read %s: %v", name, e.Name(), err)
			}
			if strings.TrimSpace(string(b)) == "" {
				t.Errorf("%s: %s is empty", name, e.Name())
			}
			target := ups
			if m[3] == "down" {
				target = downs
			}
			if prev, dup := target[v]; dup {
				t.Errorf("%s: version %d has two %s files: %s and %s", name, v, m[3], prev, m[2])
			}
			target[v] = m[2]
		}
		for v := 1; v <= len(ups); v++ {
			up, ok := ups[v]
			if !ok {
				t.Errorf("%s: missing up migration %04d (numbers must not have gaps)", name, v)
				continue
			}
			if downs[v] != up {
				t.Errorf("%s: migration %04d_%s has no matching down file", name, v, up)
			}
			lists[name] = append(lists[name], up)
		}
		if len(downs) != len(ups) {
			t.Errorf("%s: %d up files but %d down files", name, len(ups), len(downs))
		}
	}
	if strings.Join(lists["sqlite"], ",") != strings.Join(lists["postgres"], ",") {
		t.Errorf("dialects differ: sqlite %v, postgres %v", lists["sqlite"], lists["postgres"])
	}
}
