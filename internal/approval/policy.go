// Package approval decides whether a tool call may run: permission modes, operator
// and session rules, the tool's own check, command analysis and risk. Storing
// approvals and waiting for them is someone else's job; this package only decides.
package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toolserverd/toolserverd/internal/tool"
)

// Outcome is what a permission check concluded.
type Outcome string

const (
	Allow Outcome = "allow"
	Ask   Outcome = "ask"
	Deny  Outcome = "deny"
)

// Valid reports whether o is allow, ask or deny.
func (o Outcome) Valid() bool { return o == Allow || o == Ask || o == Deny }

// Mode is a session's permission mode.
type Mode string

const (
	// ModeDefault falls back to the risk policy.
	ModeDefault Mode = "default"
	// ModeAcceptEdits also allows the file-writing tools inside the working directory.
	ModeAcceptEdits Mode = "accept_edits"
	// ModeExplore allows only what is read-only and denies the rest.
	ModeExplore Mode = "explore"
	// ModeBypass allows everything except immune asks and deny rules.
	ModeBypass Mode = "bypass"
	// ModeDontAsk turns every ask into a deny, for sessions nobody watches.
	ModeDontAsk Mode = "dont_ask"
)

// Modes lists the permission modes.
func Modes() []Mode {
	return []Mode{ModeDefault, ModeAcceptEdits, ModeExplore, ModeBypass, ModeDontAsk}
}

// Valid reports whether m is a known mode; "" counts as default.
func (m Mode) Valid() bool {
	if m == "" {
		return true
	}
	for _, k := range Modes() {
		if m == k {
			return true
		}
	}
	return false
}

// SubjectKind says how rule patterns read a tool's subject argument.
type SubjectKind string

const (
	// SubjectCommand: the argument is a shell command line.
	SubjectCommand SubjectKind = "command"
	// SubjectPath: the argument is a file path, relative to the working directory.
	SubjectPath SubjectKind = "path"
)

// Subject names the argument of a tool that rule patterns match.
type Subject struct {
	Kind SubjectKind
	// Arg is the argument's name in the call.
	Arg string
	// Default is used when the call leaves the argument out ("." for grep).
	Default string
	// Dir, for a command, names the argument giving the directory the command starts
	// in (relative to the working directory, or absolute); the command's relative
	// words are paths from there.
	Dir string
}

// DefaultSubjects is the subject table of the built-in tools. Tools missing from
// it are matched by name only.
func DefaultSubjects() map[string]Subject {
	m := map[string]Subject{"execute_command": {Kind: SubjectCommand, Arg: "command", Dir: "cwd"}}
	for _, name := range []string{"read_file", "write_file", "edit_file", "multi_edit", "json_read", "json_write", "list_dir", "tree"} {
		m[name] = Subject{Kind: SubjectPath, Arg: "path"}
	}
	m["glob"] = Subject{Kind: SubjectPath, Arg: "path", Default: "."}
	m["grep"] = Subject{Kind: SubjectPath, Arg: "path", Default: "."}
	return m
}

// DefaultEditTools are the tools accept_edits mode allows inside the working directory.
func DefaultEditTools() []string {
	return []string{"write_file", "edit_file", "multi_edit", "json_write"}
}

// DefaultImmunePaths are the paths whose writes always ask: the repository's
// internals, secrets, SSH keys and shell start-up files.
func DefaultImmunePaths() []string {
	return []string{".git/**", "**/.git/**", ".env", ".env.*", "**/.ssh/**",
		".bashrc", ".zshrc", ".profile", ".bash_profile"}
}

// Config is the operator's permission policy.
type Config struct {
	// Rules are the operator's allow, ask and deny rules.
	Rules []Rule
	// RiskOverrides replace the risk a tool declares, by tool name or glob.
	RiskOverrides map[string]tool.Risk
	// RiskPolicy says what happens to a call no rule and no mode decided, by its
	// risk. Missing levels take DefaultRiskPolicy's value.
	RiskPolicy map[tool.Risk]Outcome
	// ImmunePaths are gitignore-style globs; writing to them always asks, in every
	// mode and whatever the allow rules say. nil means DefaultImmunePaths.
	ImmunePaths []string
	// Subjects says which argument rule patterns match, by tool name or glob.
	// nil means DefaultSubjects.
	Subjects map[string]Subject
	// EditTools are what accept_edits mode allows inside the working directory.
	// nil means DefaultEditTools.
	EditTools []string
	// PrivateDirs are absolute directories a command must not even read without a
	// person's approval, in every mode (the daemon's data dir: its keys, database and
	// other sessions' workspaces); the session's working directory inside one is its
	// own. Commands are read as written, so this guards what a command names, not
	// every path it could reach (a sandbox does that).
	PrivateDirs []string
	// ReadDirs are absolute directories that read-only commands may read without
	// asking, besides the session's working directory (a toolchain's sources, a
	// shared dataset). A read-only command naming an existing path outside both asks.
	ReadDirs []string
}

// DefaultConfig is the policy with no operator rules.
func DefaultConfig() Config {
	return Config{
		RiskOverrides: map[string]tool.Risk{},
		RiskPolicy:    DefaultRiskPolicy(),
		ImmunePaths:   DefaultImmunePaths(),
		Subjects:      DefaultSubjects(),
		EditTools:     DefaultEditTools(),
	}
}

// withDefaults fills what the operator left out.
func (c Config) withDefaults() Config {
	policy := DefaultRiskPolicy()
	for r, o := range c.RiskPolicy {
		policy[r] = o
	}
	c.RiskPolicy = policy
	if c.ImmunePaths == nil {
		c.ImmunePaths = DefaultImmunePaths()
	}
	if c.Subjects == nil {
		c.Subjects = DefaultSubjects()
	}
	if c.EditTools == nil {
		c.EditTools = DefaultEditTools()
	}
	return c
}

// Validate reports every problem in the config at once.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	for name, s := range c.Subjects {
		if _, err := path.Match(name, ""); err != nil || name == "" {
			errs = append(errs, fmt.Errorf("subjects: %q is not a tool name or glob", name))
		}
		if s.Kind != SubjectCommand && s.Kind != SubjectPath {
			errs = append(errs, fmt.Errorf("subjects: %s: kind %q is not command or path", name, s.Kind))
		}
		if s.Arg == "" {
			errs = append(errs, fmt.Errorf("subjects: %s: no argument name", name))
		}
	}
	subjects := newGlobTable(c.Subjects)
	for _, r := range c.Rules {
		if err := validateRule(r, subjects); err != nil {
			errs = append(errs, err)
		}
	}
	for name, r := range c.RiskOverrides {
		if _, err := path.Match(name, ""); err != nil || name == "" {
			errs = append(errs, fmt.Errorf("risk_overrides: %q is not a tool name or glob", name))
		}
		if !r.Valid() {
			errs = append(errs, fmt.Errorf("risk_overrides: %s: %q is not a risk level", name, r))
		}
	}
	for r, o := range c.RiskPolicy {
		if !r.Valid() {
			errs = append(errs, fmt.Errorf("risk_policy: %q is not a risk level", r))
		}
		if !o.Valid() {
			errs = append(errs, fmt.Errorf("risk_policy: %s: %q is not allow, ask or deny", r, o))
		}
	}
	for _, p := range c.ImmunePaths {
		if p == "" || !doublestar.ValidatePattern(normalizeGlob(p)) {
			errs = append(errs, fmt.Errorf("immune_paths: %q is not a valid glob", p))
		}
	}
	for _, t := range c.EditTools {
		if t == "" {
			errs = append(errs, errors.New("edit_tools: empty tool name"))
		}
	}
	return errors.Join(errs...)
}

// validateRule checks a rule's pattern against the kind of subject its tool has.
func validateRule(r Rule, subjects globTable[Subject]) error {
	if _, err := ParseRule(r.Action, r.String()); err != nil {
		return err
	}
	c := compileRule(r)
	if c.any {
		return nil
	}
	s, ok := subjects.lookup(r.Tool)
	switch {
	case !ok:
		return fmt.Errorf("rule %s: %s has no argument rules can match; write the tool name alone", r, r.Tool)
	case s.Kind == SubjectCommand && c.cmdErr != nil:
		return fmt.Errorf("rule %s: %v", r, c.cmdErr)
	case s.Kind == SubjectPath && c.pathErr != nil:
		return fmt.Errorf("rule %s: %v", r, c.pathErr)
	}
	return nil
}

// Request is one call to check.
type Request struct {
	// Tool gives the spec and, if it implements Checker, the tool's own check.
	Tool tool.Tool
	Args json.RawMessage
	Mode Mode
	// SessionRules were added by approvals in this session.
	SessionRules []Rule
	// Workdir is the session root that relative paths are resolved against.
	Workdir string
}

// Decision is the answer for one call.
type Decision struct {
	Outcome Outcome
	// Reason says why, in words an approver and a model both understand.
	Reason string
	// Risk is the effective risk of this call: the tool's, overridden by the
	// operator, raised by command analysis.
	Risk tool.Risk
	// Suggestions are rules the approver may accept with an ask, so that calls
	// like this one no longer ask in the session.
	Suggestions []Rule
	// Immune asks cannot be silenced by allow rules or bypass mode.
	Immune bool
	// ReadOnly is what the analysis concluded about this call.
	ReadOnly bool
	// Rule is the rule that decided, if one did.
	Rule *Rule
	// Findings are what command analysis noticed.
	Findings []Finding
}

// Checker is implemented by tools that judge their own calls. "" (or any other
// value) passes the decision on; allow and deny decide; ask asks, unless an
// allow rule or bypass mode allows the call.
type Checker interface {
	CheckPermission(args json.RawMessage) (Outcome, string)
}
