package approval

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPrivateDirHiddenInWords: a word that reaches the data dir only once the shell
// expands it names the data dir as surely as its literal name does; each asks,
// immune, in every mode, while the same forms reaching the checkout run unasked.
func TestPrivateDirHiddenInWords(t *testing.T) {
	t.Parallel()
	work, data, _ := recursiveFixture(t)
	if err := os.Symlink(data, filepath.Join(work, "dlink")); err != nil {
		t.Fatal(err)
	}
	cases := []immuneCase{
		// A variable the line sets: x=data; cat $x/admin.key read the admin key
		// unasked in every mode.
		{"x=data; cat $x/admin.key", true},
		{"x=da; cat ${x}ta/admin.key", true},
		{"x=dlink; cat $x/admin.key", true},
		{"for d in src data; do cat $d/a.go; done", true},
		{"x=src; cat $x/a.go", false},
		{"for f in src/*.go; do wc -l $f; done", false},
		// A glob: cat */admin.key read the admin key unasked in every mode.
		{"cat */admin.key", true},
		{"cat dat?/admin.key", true},
		{"cat [d]ata/admin.key", true},
		{"cat d?ink/admin.key", true}, // through the link
		{"ls */workspaces", true},
		{"x='*'; cat $x/admin.key", true},
		{"cat ../*/data/admin.key", true},
		{"cat src/*.go", false},
		{"ls src/*", false},
		{"grep foo *.md", false},
		// A redirection: cat < data/admin.key read the admin key unasked in every
		// mode, echo x > data/admin.key overwrote it unasked in bypass mode.
		{"cat < data/admin.key", true},
		{"while read l; do echo $l; done < dlink/admin.key", true},
		{"echo x > data/admin.key", true},
		{"echo x >> data/workspaces/ses_2/f", true},
		{"cat < README.md", false},
		{"sort < src/a.go", false},
		{"x=data; cat < $x/admin.key", true},
		{"for d in data; do echo x > $d/admin.key; done", true},
		{"x=src; cat < $x/a.go", false},
		// ~+ and $PWD: cat ~+/data/admin.key asked in default mode, but as a home
		// directory or an unknown variable, which bypass mode lets through.
		{"cat ~+/data/admin.key", true},
		{"cat $PWD/data/admin.key", true},
		{"cd src && cat ${PWD}/../data/admin.key", true},
		{"cat ~+/README.md $PWD/src/a.go", false},
		// env -C to a variable the line sets.
		{"x=data; env -C $x cat admin.key", true},
		// A glob naming the data dir itself, for a command that enters or lists
		// it: cd dat? && ls listed it unasked in bypass mode.
		{"cd dat? && ls", true},
		{"ls d?ta", true},
		{"env -C d?ta ls", true},
		{"ls -d d?ta", false},
		{"cat d?ta", false},
	}
	checkPrivateDirFrom(t, data, work, cases)
}
