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
		immune  bool
	}{
		{command: "x=" + root + "/etc/passwd; cat $x", ask: "$x"},
		{command: "x=" + root + "/etc; cd $x; cat passwd", ask: "$x"},
		{command: "x=" + root + "/etc; cd $x && ls", ask: "$x"},
		{command: "OLDPWD=" + root + "/etc; cd - && cat passwd", ask: "sets OLDPWD", immune: true}, // cd - goes where the line says, which no check follows
		{command: "for d in " + root + "/etc; do cd $d; done; cat passwd", ask: "$d"},
		// cd a, cd a/a, …: a loop whose folders do not settle, as with cd a in it.
		{command: "for d in a; do cd $d; done; cat passwd", ask: "in a loop", immune: true},
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
		{command: "basename \"$1\" && dirname $HOME/x"},
		{command: "ls"},
		{command: "grep -r foo ."},
		{command: "find . -name a | xargs echo"},
		{command: "cd sub && cat a"},
		// cd to a variable the line sets leads where its values lead.
		{command: "d=sub; cd $d && cat a"},
		{command: "for d in sub other; do (cd $d && ls); done"},
		{command: "for d in sub other; do (cd \"$d\" && cat ../a); done"},
		{command: "d=sub; cd $d && cat ../../x", ask: "../../x"},
		{command: "for d in sub " + root + "/etc; do (cd $d && cat passwd); done", ask: "etc"},
		{command: "for d in sub */; do (cd $d && ls); done", ask: "ls"},
	} {
		req := Request{Tool: toolFor(t, "execute_command"), Mode: ModeDefault, Workdir: work, Args: commandArgs(tc.command)}
		d := e.Check(req)
		switch {
		case tc.ask == "" && d.Outcome != Allow:
			t.Errorf("%q: %s (%s); want it run at once", tc.command, d.Outcome, d.Reason)
		case tc.ask != "" && (d.Outcome != Ask || d.Immune != tc.immune || !strings.Contains(d.Reason, tc.ask)):
			t.Errorf("%q: %s (immune %v, %s); want an ask (immune %v) naming %s", tc.command, d.Outcome, d.Immune, d.Reason, tc.immune, tc.ask)
		}
	}
}
