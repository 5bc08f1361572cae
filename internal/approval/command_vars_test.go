package approval

import (
	"strings"
	"testing"
)

// TestVariableWordsAreJudged: a word of a read-only command that holds a variable
// is judged by the value the line gives it (an assignment of a literal before it,
// the words of the for loop it runs in), and asks when that value is known only
// when it runs. A word that was only a variable used to pass as inside the working
// directory: `x=/etc/passwd; cat $x` read /etc/passwd unasked.
func TestVariableWordsAreJudged(t *testing.T) {
	t.Parallel()
	root, work := cdTree(t)
	e := testEngine(t, DefaultConfig())
	for _, tc := range []struct {
		command string
		ask     string // a word the ask's reason names; "" = runs at once
	}{
		{command: "x=" + root + "/etc/passwd; cat $x", ask: "$x"},
		{command: "x=" + root + "/etc; cd $x; cat passwd", ask: "$x"},
		{command: "x=" + root + "/etc; cd $x && ls", ask: "$x"},
		{command: "OLDPWD=" + root + "/etc; cd - && cat passwd", ask: "passwd"},
		{command: "for d in " + root + "/etc; do cd $d; done; cat passwd", ask: "$d"},
		{command: "for d in a; do cd $d; done; cat passwd", ask: "cat passwd"},
		{command: "for f in " + root + "/etc/passwd; do cat $f; done", ask: "$f"},
		{command: "echo " + root + "/etc/passwd | xargs cat", ask: "xargs"},
		{command: "echo x | xargs -I{} cat {}", ask: "xargs"},
		{command: "cat $HOME/x", ask: "$HOME"},
		{command: "cat $x", ask: "$x"},
		{command: "cat \"$x\"", ask: "$x"},
		{command: "cat ${x}", ask: "$x"},
		{command: "x=a; cat ${x#a}", ask: "$x"},
		{command: "x=../etc/passwd; cat $x", ask: "$x"},
		{command: "x=../etc/passwd; cd sub && cat $x"},
		{command: "x=../etc/passwd; cd sub; cat $x", ask: "$x"},
		{command: "x=a; x=" + root + "/etc/passwd; cat $x", ask: "$x"},
		{command: "x=a; if true; then x=" + root + "/etc/passwd; fi; cat $x", ask: "$x"},
		{command: "true || x=a; cat $x", ask: "$x"},
		{command: "cat $x; x=a", ask: "$x"},
		{command: "x=a | cat $x", ask: "$x"},
		{command: "x=a; read x; cat $x", ask: "$x"},
		{command: "x=a; export x=" + root + "/etc/passwd; cat $x", ask: "$x"},
		{command: "IFS=.; x=" + root + "/etc/passwd.x; cat $x", ask: "$x"},
		{command: "x=a; cat < $x", ask: "$x"},
		{command: "d=" + root + "/etc; f=passwd; cat \"$d/$f\"", ask: "$d/$f"},
		{command: "x=a; x=b cat $x"},
		// What the line tells stays unasked.
		{command: "f=a; cat $f"},
		{command: "f=a && cat \"$f\""},
		{command: "f=sub/a; g=file; cat \"$f\" $g ${g}"},
		{command: "for f in *; do wc -l $f; done"},
		{command: "for f in *.go; do wc -l $f; done"},
		{command: "f=main.go; cat $f"},
		{command: "for f in sub/*; do cat $f; done"},
		{command: "for f in ../*; do cat $f; done", ask: "$f"},
		{command: "for f in a file x; do cat \"$f\"; done"},
		{command: "echo $HOME"},
		{command: "ls"},
		{command: "grep -r foo ."},
		{command: "find . -name a | xargs echo"},
		{command: "cd sub && cat a"},
	} {
		req := Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(tc.command)}
		d := e.Check(req)
		switch {
		case tc.ask == "" && d.Outcome != Allow:
			t.Errorf("%q: %s (%s); want it run at once", tc.command, d.Outcome, d.Reason)
		case tc.ask != "" && (d.Outcome != Ask || d.Immune || !strings.Contains(d.Reason, tc.ask)):
			t.Errorf("%q: %s (immune %v, %s); want a plain ask naming %s", tc.command, d.Outcome, d.Immune, d.Reason, tc.ask)
		}
	}
}
