package approval

import "testing"

// TestAllowRuleLiteralIsNotExpansion: an allow rule whose words are literal (quoted
// '*', '$HOME') allows that command, not one the shell expands to something else:
// approving "for the session" the removal of a file named * must not allow rm -rf *
// (every file), nor one named $HOME the removal of the home directory. A rule
// written with the expansion allows the expansion as written. The suggestion for a
// command that expands allows that same command again (after the round trip through
// its text, as a session stores it), and only it.
func TestAllowRuleLiteralIsNotExpansion(t *testing.T) {
	t.Parallel()
	e := testEngine(t, DefaultConfig())
	check := func(rules []Rule, cmd string) Outcome {
		t.Helper()
		return e.Check(Request{Tool: toolFor(t, "execute_command"), Args: commandArgs(cmd), Workdir: testWorkdir, SessionRules: rules}).Outcome
	}
	for _, tc := range []struct {
		rule    string
		allowed []string
		asked   []string
	}{
		{`execute_command(rm -rf '*' x)`, []string{`rm -rf '*' x`, `rm -rf \* x`, `rm -rf "*" x`}, []string{`rm -rf * x`}},
		{`execute_command(rm -rf *.log)`, []string{`rm -rf *.log`}, []string{`rm -rf '*.log'`}},
		{`execute_command(rm -rf '$OUT')`, []string{`rm -rf '$OUT'`, `rm -rf \$OUT`}, []string{`rm -rf $OUT`, `rm -rf "$OUT"`}},
		{`execute_command(touch 'a?' b)`, []string{`touch 'a?' b`}, []string{`touch a? b`}},
		{`execute_command(git commit:*)`, []string{`git commit -m "fix *"`, `git commit *.go`}, []string{`git push`}},
	} {
		rules := mustRules(t, Allow, tc.rule)
		for _, c := range tc.allowed {
			if got := check(rules, c); got != Allow {
				t.Errorf("%s: %q is %s, want allow", tc.rule, c, got)
			}
		}
		for _, c := range tc.asked {
			if got := check(rules, c); got != Ask {
				t.Errorf("%s: %q is %s, want ask (the rule's words are literal, the command's are expanded, or the other way round)", tc.rule, c, got)
			}
		}
	}
	for _, tc := range []struct{ cmd, other string }{
		{`rm -rf build/*`, `rm -rf 'build/*'`},
		{`rm -rf "$OUT"/tmp`, `rm -rf '$OUT/tmp'`},
		{`rm -rf '*'`, `rm -rf *`},
		{`chmod 600 ~/x`, `chmod 600 '~/x'`},
		{`rm -rf $(cat list)`, `rm -rf $(cat other)`}, // its text says nothing of what it runs: no rule
	} {
		d := e.Check(Request{Tool: toolFor(t, "execute_command"), Args: commandArgs(tc.cmd), Workdir: testWorkdir})
		if d.Outcome != Ask {
			t.Fatalf("%q: %s, want ask", tc.cmd, d.Outcome)
		}
		var texts []string
		for _, r := range d.Suggestions {
			texts = append(texts, r.String())
		}
		rules := mustRules(t, Allow, texts...)
		if got := check(rules, tc.cmd); got != Allow && len(texts) > 0 {
			t.Errorf("%q: after accepting %v: %s, want allow", tc.cmd, texts, got)
		}
		if got := check(rules, tc.other); got != Ask {
			t.Errorf("%q's suggestions %v allow %q: %s, want ask", tc.cmd, texts, tc.other, got)
		}
	}
}
