package approval

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"

	"github.com/bmatcuk/doublestar/v4"
	"mvdan.cc/sh/v3/syntax"
)

// Rule allows, asks for or denies the calls of a tool, or of those calls whose
// subject (the command, the path) matches Pattern. Written as
//
//	execute_command(git commit:*)   the command git commit with any arguments
//	execute_command(npm test)       exactly npm test
//	write_file(src/**)              files under src/ in the working directory
//	mcp__github__*                  every tool of the github MCP server
type Rule struct {
	Action Outcome
	// Tool is a tool name or a glob over tool names.
	Tool string
	// Pattern is what the tool's subject must match; "" matches every call.
	Pattern string
}

// String formats the rule as ParseRule reads it, without the action.
func (r Rule) String() string {
	if r.Pattern == "" {
		return r.Tool
	}
	return r.Tool + "(" + r.Pattern + ")"
}

// ParseRule reads a rule written as `tool` or `tool(pattern)`.
func ParseRule(action Outcome, s string) (Rule, error) {
	if !action.Valid() {
		return Rule{}, fmt.Errorf("rule %q: action %q is not allow, ask or deny", s, action)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return Rule{}, errors.New("empty rule")
	}
	name, pattern := s, ""
	if i := strings.IndexByte(s, '('); i >= 0 {
		if s[len(s)-1] != ')' {
			return Rule{}, fmt.Errorf("rule %q: the pattern must end with \")\"", s)
		}
		name, pattern = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:len(s)-1])
		if pattern == "" {
			return Rule{}, fmt.Errorf("rule %q: empty pattern; write %q to match every call", s, name)
		}
	} else if strings.IndexByte(s, ')') >= 0 {
		return Rule{}, fmt.Errorf("rule %q: \")\" without \"(\"", s)
	}
	if name == "" {
		return Rule{}, fmt.Errorf("rule %q: no tool name", s)
	}
	for _, c := range name {
		if unicode.IsSpace(c) || c == '(' || c == ')' || c == '/' || !unicode.IsPrint(c) {
			return Rule{}, fmt.Errorf("rule %q: tool name %q contains %q", s, name, c)
		}
	}
	if _, err := path.Match(name, ""); err != nil {
		return Rule{}, fmt.Errorf("rule %q: tool name %q is not a valid glob", s, name)
	}
	for _, c := range pattern {
		if c != '\t' && !unicode.IsPrint(c) {
			return Rule{}, fmt.Errorf("rule %q: the pattern contains the control character %q", s, c)
		}
	}
	return Rule{Action: action, Tool: name, Pattern: pattern}, nil
}

// ParseRules reads a list of rules that share an action, as a config file lists
// them, and reports every bad one.
func ParseRules(action Outcome, list []string) ([]Rule, error) {
	rules := make([]Rule, 0, len(list))
	var errs []error
	for _, s := range list {
		r, err := ParseRule(action, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rules = append(rules, r)
	}
	return rules, errors.Join(errs...)
}

// compiledRule is a rule ready to match: its pattern read both as a command
// prefix and as a path glob, since which applies depends on the tool called.
type compiledRule struct {
	Rule
	any       bool     // no pattern, or "*"
	cmdWords  []string // the command words of the pattern
	cmdGlobs  []bool   // which of them the shell expands (SimpleCommand.special)
	cmdPrefix bool     // the pattern ended in :*
	cmdErr    error
	pathGlob  string
	pathErr   error
}

func compileRule(r Rule) compiledRule {
	c := compiledRule{Rule: r}
	p := r.Pattern
	if p == "" || p == "*" || p == "**" {
		c.any = true
		return c
	}
	body, prefix := strings.CutSuffix(p, ":*")
	c.cmdPrefix = prefix
	c.cmdWords, c.cmdGlobs, c.cmdErr = patternWords(body)
	c.pathGlob = normalizeGlob(p)
	if !doublestar.ValidatePattern(c.pathGlob) {
		c.pathErr = fmt.Errorf("%q is not a valid path glob", p)
	}
	return c
}

// patternWords reads the words of a command pattern as the shell would, so a
// pattern matches the command however it was quoted.
// It also tells which words the shell expands (globs, variables, ~).
func patternWords(s string) ([]string, []bool, error) {
	if !strings.ContainsAny(s, "'\"\\$`{~;&|<>()=") {
		w := strings.Fields(s)
		if len(w) == 0 {
			return nil, nil, errors.New("no command words")
		}
		globs := make([]bool, len(w))
		for i, x := range w {
			globs[i] = strings.ContainsAny(x, "*?[")
		}
		return w, globs, nil
	}
	f, err := syntax.NewParser().Parse(strings.NewReader(s), "")
	if err != nil {
		return nil, nil, fmt.Errorf("not a command: %v", err)
	}
	if len(f.Stmts) != 1 {
		return nil, nil, errors.New("a command pattern must be one simple command")
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 || len(call.Assigns) > 0 || len(f.Stmts[0].Redirs) > 0 {
		return nil, nil, errors.New("a command pattern must be one simple command")
	}
	fs := expandWords(newExpandConfig(), s, call.Args)
	words := make([]string, len(fs))
	globs := make([]bool, len(fs))
	for i, f := range fs {
		words[i], globs[i] = f.text, f.dynamic || f.glob
	}
	return words, globs, nil
}

// matchWords matches one command's words against the rule's command pattern.
func (c *compiledRule) matchWords(words []string) bool {
	if c.any {
		return true
	}
	if c.cmdErr != nil || len(words) < len(c.cmdWords) || !c.cmdPrefix && len(words) != len(c.cmdWords) {
		return false
	}
	for i, w := range c.cmdWords {
		if words[i] != w {
			return false
		}
	}
	return true
}

// matchAllow matches a command against an allow rule: its words as matchWords
// does, each word the shell expands (* unquoted, $VAR) only by one written so in the
// pattern, and the other way round. A rule for rm -rf '*' (a file named *) must not
// allow rm -rf * (every file). Deny and ask rules match by text only: for them,
// matching more is the safe side.
func (c *compiledRule) matchAllow(sc SimpleCommand) bool {
	if !c.matchWords(sc.Words) {
		return false
	}
	if c.any {
		return true
	}
	for i := range c.cmdWords {
		if c.cmdGlobs[i] != (i < len(sc.special) && sc.special[i]) {
			return false
		}
	}
	return true
}

// suggestCommand proposes a rule for a command: a prefix rule of its name and, when
// the second word looks like a subcommand (git push, npm run), that word too; or,
// for a call of high risk and for commands that delete or take away (rm, chmod, …),
// the command exactly as written: approving "rm -rf build" for the session must not
// allow every later rm.
//
// special tells the words the shell expands (SimpleCommand.special): they are
// written unquoted, as the command has them, so that the rule allows the same
// expansion and not the literal text, nor the literal text the expansion. A word
// whose text cannot be written so (a command substitution, whose text says nothing
// of what it runs) gets no rule.
func suggestCommand(words []string, special []bool, exact bool) string {
	if len(words) == 0 || words[0] == "" {
		return ""
	}
	isSpecial := func(i int) bool { return i < len(special) && special[i] }
	if exact || exactOnly[words[0]] {
		q := make([]string, len(words))
		for i, w := range words {
			switch {
			case !isSpecial(i):
				q[i] = quoteWord(w)
			case strings.Contains(w, "$(…)") || strings.ContainsAny(w, " \t\n'\"\\`;&|<>(){}#!"):
				return ""
			default:
				q[i] = w
			}
		}
		return strings.Join(q, " ")
	}
	if isSpecial(0) {
		return ""
	}
	out := []string{quoteWord(words[0])}
	if len(words) > 1 && subcommandLike(words[1]) {
		out = append(out, words[1])
	}
	return strings.Join(out, " ") + ":*"
}

// exactOnly are commands whose suggested rule is always the exact command: a prefix
// rule would allow them on any path or process.
var exactOnly = map[string]bool{"rm": true, "rmdir": true, "shred": true, "unlink": true, "dd": true, "truncate": true,
	"chmod": true, "chown": true, "chgrp": true, "kill": true, "pkill": true, "killall": true, "mkfs": true}

func subcommandLike(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func quoteWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`{}()[]*?!;&|<>#~=%") {
		return s
	}
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		return s
	}
	return q
}
