package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolserverd/toolserverd/internal/testnet"
)

// usageCommands are the commands the usage text lists, each as "cmd" or "cmd sub"
// mapped to the words of its line (placeholders and options included).
func usageCommands(t *testing.T) map[string][]string {
	t.Helper()
	cmds := map[string][]string{}
	_, list, ok := strings.Cut(usage, "commands:\n")
	if !ok {
		t.Fatal("usage has no commands: section")
	}
	for line := range strings.Lines(list) {
		if !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			continue // a continuation line
		}
		// Alternatives are "a | b" outside brackets and parentheses.
		depth, start := 0, 0
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "   "); i > 0 {
			line = line[:i] // the description column
		}
		var alts []string
		for i, r := range line {
			switch r {
			case '[', '(':
				depth++
			case ']', ')':
				depth--
			case '|':
				if depth == 0 {
					alts = append(alts, line[start:i])
					start = i + 1
				}
			}
		}
		alts = append(alts, line[start:])
		for _, a := range alts {
			words := strings.Fields(a)
			key := words[0]
			if len(words) > 1 && regexp.MustCompile(`^[a-z]+$`).MatchString(words[1]) {
				key += " " + words[1]
			}
			cmds[key] = words
		}
	}
	if len(cmds) < 20 {
		t.Fatalf("read only %d commands from usage: %v", len(cmds), cmds)
	}
	return cmds
}

// TestDocumentedCommandsExist: every toolserverctl command README.md and the other
// docs show is one the usage lists, and every command the usage lists is one run
// dispatches (it does not answer with the usage text).
func TestDocumentedCommandsExist(t *testing.T) {
	cmds := usageCommands(t)
	grouped := map[string]bool{}
	for k := range cmds {
		if c, _, ok := strings.Cut(k, " "); ok {
			grouped[c] = true
		}
	}
	mention := regexp.MustCompile("(?m)(?:`|/cmd/|^[ \\t]+)toolserverctl ([a-z]+)(?: ([a-z]+))?")
	found := 0
	for _, f := range []string{"../../README.md", "../../docs/config.md", "../../api/openapi.yaml", "../../deploy/config.example.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mention.FindAllStringSubmatch(string(b), -1) {
			key := m[1]
			if grouped[m[1]] {
				key += " " + m[2]
			}
			found++
			if cmds[key] == nil {
				t.Errorf("%s shows toolserverctl %s, which the usage does not list", f, key)
			}
		}
	}
	if found < 10 {
		t.Fatalf("found only %d toolserverctl commands in the docs", found)
	}
	// No daemon answers: a command run dispatches fails to connect, one it does not
	// prints the usage.
	url := "http://" + testnet.RefusedAddr(t)
	placeholder := regexp.MustCompile(`^[A-Z][A-Z_]*$`)
	for key, words := range cmds {
		args := strings.Fields(key)
		depth, flagValue := 0, false
		for _, w := range words[len(args):] {
			depth += strings.Count(w, "[") + strings.Count(w, "(")
			if depth == 0 && strings.HasPrefix(w, "--") {
				args = append(args, w)
				flagValue = true
			} else if depth == 0 && flagValue {
				args = append(args, "x") // an option's value
				flagValue = false
			} else if depth == 0 && placeholder.MatchString(w) {
				arg := "x"
				if strings.HasSuffix(w, "JSON") {
					arg = "{}"
				}
				args = append(args, arg)
			}
			depth -= strings.Count(w, "]") + strings.Count(w, ")")
		}
		if key == "run" {
			args = append([]string{"run", "--tools", "x"}, args[1:]...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out, errOut bytes.Buffer
		_, _ = run(ctx, append([]string{"--url", url}, args...), strings.NewReader(""), &out, &errOut)
		cancel()
		if strings.Contains(errOut.String(), "usage: toolserverctl") {
			t.Errorf("toolserverctl %s (from the usage line %q) answers with the usage text", strings.Join(args, " "), strings.Join(words, " "))
		}
	}
}
